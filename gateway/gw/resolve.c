/* gw/resolve: upstream lookups through evdns_getaddrinfo, with our own
 * deadline (evdns reports a timeout as a plain failure) and a cap on
 * lookups at once.
 *
 * evdns delivers a cancelled lookup's callback later, from the loop, so
 * each lookup's evdns side lives in a token that outlives a cancelled
 * request and is freed by that last callback; the resolver itself is
 * freed once no token is left. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "base/dnsname.h"
#include "base/log.h"
#include "gw/resolve.h"

#define NAME_BUF 254 /* a canonical name and its NUL */

typedef struct token token;

struct al_resolve_req {
	al_resolver *r;
	token *tok; /* NULL once evdns answered */
	al_resolve_cb cb;
	void *arg;
	struct event *timer; /* the deadline, then the deferred delivery */
	bool done;	     /* res holds the outcome, delivery is due */
	al_resolve_result res;
	al_resolve_req *prev, *next;
};

/* The evdns side of one lookup: lives until evdns calls back. */
struct token {
	al_resolver *r;
	al_resolve_req *req; /* NULL when cancelled */
	struct evdns_getaddrinfo_request *gai;
	bool in_start; /* inside evdns_getaddrinfo (a synchronous answer) */
};

struct al_resolver {
	struct event_base *base;
	struct evdns_base *dns;
	const al_upaddr *classify;
	unsigned max_inflight;
	unsigned timeout_ms;
	size_t inflight; /* requests not yet delivered or cancelled */
	size_t tokens;	 /* evdns lookups not yet called back */
	bool closing;
	al_resolve_req *head;
};

/* "IP:PORT" or "[IPv6]:PORT", port 1..65535 in plain decimal. */
static int parse_hostport(const char *s, struct sockaddr_storage *ss,
			  socklen_t *len)
{
	char host[INET6_ADDRSTRLEN];
	const char *colon, *h = s;
	size_t hl;
	bool v6 = s[0] == '[';
	if (v6) {
		const char *close = strchr(s, ']');
		if (close == NULL || close[1] != ':')
			return -1;
		h = s + 1;
		hl = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL)
			return -1;
		hl = (size_t)(colon - s);
	}
	if (hl == 0 || hl >= sizeof host)
		return -1;
	memcpy(host, h, hl);
	host[hl] = '\0';
	const char *p = colon + 1;
	size_t pl = strlen(p);
	if (pl == 0 || pl > 5 || p[0] == '0')
		return -1;
	unsigned port = 0;
	for (size_t i = 0; i < pl; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		port = port * 10 + (unsigned)(p[i] - '0');
	}
	if (port > 65535)
		return -1;
	memset(ss, 0, sizeof *ss);
	if (v6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			return -1;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof *s6;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return -1;
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof *s4;
	}
	return 0;
}

static int configure(al_resolver *r, const al_resolver_config *cfg, al_err *err)
{
	char secs[32];
	/* Our deadline (the timer) comes first: three tries of half of it
	 * each would take longer. */
	snprintf(secs, sizeof secs, "%u.%03u", r->timeout_ms / 2000,
		 (r->timeout_ms / 2) % 1000);
	if (evdns_base_set_option(r->dns, "timeout:", secs) != 0 ||
	    evdns_base_set_option(r->dns, "attempts:", "3") != 0 ||
	    evdns_base_set_option(r->dns, "randomize-case:", "1") != 0 ||
	    /* A and AAAA are asked at once: once one is answered, the
	     * other gets this long (not evdns's 3 s) before the lookup
	     * goes on with what it has. */
	    evdns_base_set_option(r->dns, "getaddrinfo-allow-skew:", "0.5") !=
		    0)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "resolve: evdns refused an option");
	evdns_base_search_clear(r->dns);
	if (cfg->upstream_dns != NULL && cfg->upstream_dns[0] != '\0') {
		struct sockaddr_storage ss;
		socklen_t sl;
		if (parse_hostport(cfg->upstream_dns, &ss, &sl) != 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_UPSTREAM_DNS: '%.64s' is"
					  " not IP:PORT",
					  cfg->upstream_dns);
		if (evdns_base_nameserver_sockaddr_add(r->dns,
						       (struct sockaddr *)&ss,
						       sl, 0) != 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_UPSTREAM_DNS: evdns"
					  " refused %.64s",
					  cfg->upstream_dns);
	} else {
		const char *path = cfg->resolv_conf != NULL
					   ? cfg->resolv_conf
					   : "/etc/resolv.conf";
		/* Nameservers only: not its search list or options, not
		 * the host's /etc/hosts, no 127.0.0.1 default. */
		int rc = evdns_base_resolv_conf_parse(
			r->dns,
			DNS_OPTION_NAMESERVERS |
				DNS_OPTION_NAMESERVERS_NO_DEFAULT,
			path);
		if (rc != 0 || evdns_base_count_nameservers(r->dns) == 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "resolve: no nameserver from %s"
					  " (evdns says %d); set"
					  " AIRLOCK_UPSTREAM_DNS",
					  path, rc);
	}
	if (cfg->hosts != NULL && cfg->hosts[0] != '\0') {
		/* evdns cannot say why a file did not load: check it can
		 * be read first. */
		int fd = open(cfg->hosts, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return al_err_sys(err, AL_EINVAL, errno,
					  "AIRLOCK_UPSTREAM_HOSTS: open %s",
					  cfg->hosts);
		close(fd);
		if (evdns_base_load_hosts(r->dns, cfg->hosts) != 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_UPSTREAM_HOSTS: %s does"
					  " not load",
					  cfg->hosts);
	}
	return 0;
}

/* evdns's own lines in the process's log, with its format and rate
 * limit, not libevent's bare stderr lines. Its debug lines can name what
 * the guest asked for, so only warnings and the nameserver state changes
 * ("Nameserver ... has failed", "... is back up": not warnings to evdns)
 * pass at info level and above. */
static void evdns_line(int is_warn, const char *msg)
{
	enum al_log_level level = AL_LOG_DEBUG;
	if (is_warn)
		level = AL_LOG_WARN;
	else if (strncmp(msg, "Nameserver ", 11) == 0 ||
		 strncmp(msg, "All nameservers", 15) == 0)
		level = AL_LOG_INFO;
	al_log(level, "resolve: evdns: %s", msg);
}

al_resolver *al_resolver_new(struct event_base *base,
			     const al_resolver_config *cfg, al_err *err)
{
	if (base == NULL || cfg == NULL || cfg->classify == NULL) {
		al_err_set(err, AL_EINVAL, 0,
			   "resolve: no event base or classifier");
		return NULL;
	}
	al_resolver *r = calloc(1, sizeof *r);
	if (r == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "resolve: out of memory");
		return NULL;
	}
	r->base = base;
	r->classify = cfg->classify;
	r->max_inflight = cfg->max_inflight ? cfg->max_inflight
					    : AL_RESOLVE_INFLIGHT_DEFAULT;
	r->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms
					: AL_RESOLVE_TIMEOUT_MS_DEFAULT;
	evdns_set_log_fn(evdns_line);
	r->dns = evdns_base_new(base, 0);
	if (r->dns == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "resolve: evdns_base_new");
		free(r);
		return NULL;
	}
	if (configure(r, cfg, err) != 0) {
		evdns_base_free(r->dns, 0);
		free(r);
		return NULL;
	}
	return r;
}

static void resolver_final(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	al_resolver *r = arg;
	evdns_base_free(r->dns, 0);
	free(r);
}

/* Free a closing resolver once no evdns callback is due; from inside one
 * of those callbacks, a loop turn later (evdns is still on the stack). */
static void resolver_release(al_resolver *r, bool from_evdns)
{
	if (!r->closing || r->tokens != 0)
		return;
	const struct timeval now = {0, 0};
	if (!from_evdns || event_base_once(r->base, -1, EV_TIMEOUT,
					   resolver_final, r, &now) != 0)
		resolver_final(-1, 0, r);
}

static void req_free(al_resolve_req *q)
{
	al_resolver *r = q->r;
	if (q->prev != NULL)
		q->prev->next = q->next;
	else
		r->head = q->next;
	if (q->next != NULL)
		q->next->prev = q->prev;
	event_free(q->timer);
	r->inflight--;
	free(q);
}

/* Drop q's evdns lookup, if any: its token waits for the callback. */
static void req_detach(al_resolve_req *q)
{
	token *t = q->tok;
	if (t == NULL)
		return;
	q->tok = NULL;
	t->req = NULL;
	evdns_getaddrinfo_cancel(t->gai);
}

void al_resolve_cancel(al_resolve_req *q)
{
	if (q == NULL)
		return;
	req_detach(q);
	req_free(q);
}

void al_resolver_free(al_resolver *r)
{
	if (r == NULL)
		return;
	while (r->head != NULL)
		al_resolve_cancel(r->head);
	r->closing = true;
	resolver_release(r, false);
}

size_t al_resolver_inflight(const al_resolver *r)
{
	return r->inflight;
}

socklen_t al_resolve_addr_sockaddr(const al_resolve_addr *a, unsigned port,
				   struct sockaddr_storage *out)
{
	memset(out, 0, sizeof *out);
	if (a->family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		memcpy(s6->sin6_addr.s6_addr, a->addr6, 16);
		return sizeof *s6;
	}
	struct sockaddr_in *s4 = (struct sockaddr_in *)out;
	s4->sin_family = AF_INET;
	s4->sin_port = htons((uint16_t)port);
	s4->sin_addr.s_addr = htonl(a->addr);
	return sizeof *s4;
}

/* One answer's address, unless it is there already or there is no room. */
static void add_addr(al_resolve_req *q, const struct sockaddr *sa)
{
	al_resolve_result *res = &q->res;
	al_resolve_addr a = {.family = sa->sa_family};
	if (sa->sa_family == AF_INET)
		a.addr = ntohl(
			((const struct sockaddr_in *)sa)->sin_addr.s_addr);
	else
		memcpy(a.addr6,
		       ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr,
		       16);
	for (size_t i = 0; i < res->n; i++)
		if (res->addrs[i].family == a.family &&
		    res->addrs[i].addr == a.addr &&
		    memcmp(res->addrs[i].addr6, a.addr6, 16) == 0)
			return;
	if (res->n >= AL_RESOLVE_ADDRS_MAX)
		return;
	a.deny = al_upaddr_check(q->r->classify, sa);
	res->addrs[res->n++] = a;
}

static void fill(al_resolve_req *q, int result, struct evutil_addrinfo *ai)
{
	al_resolve_result *res = &q->res;
	/* IPv4 first, then IPv6. */
	static const int families[] = {AF_INET, AF_INET6};
	for (size_t f = 0; result == 0 && f < 2; f++)
		for (struct evutil_addrinfo *i = ai; i != NULL; i = i->ai_next)
			if (i->ai_family == families[f] && i->ai_addr != NULL)
				add_addr(q, i->ai_addr);
	if (res->n > 0) {
		res->status = 0;
		for (size_t i = 0; i < res->n; i++)
			if (res->addrs[i].deny == NULL) {
				res->first_allowed = &res->addrs[i];
				break;
			}
		return;
	}
	switch (result) {
	case 0:
	case EVUTIL_EAI_NONAME:
	case EVUTIL_EAI_NODATA:
	case EVUTIL_EAI_ADDRFAMILY:
		res->status = AL_ENOENT;
		res->error = "no such name (or no address)";
		break;
	case EVUTIL_EAI_MEMORY:
		res->status = AL_ENOMEM;
		res->error = "out of memory";
		break;
	default:
		res->status = AL_EUNAVAIL;
		res->error = "upstream resolver failed";
		break;
	}
}

static void deliver_soon(al_resolve_req *q)
{
	q->done = true;
	event_del(q->timer);
	const struct timeval now = {0, 0};
	event_add(q->timer, &now);
}

static void on_gai(int result, struct evutil_addrinfo *ai, void *arg)
{
	token *t = arg;
	al_resolver *r = t->r;
	al_resolve_req *q = t->req;
	if (q != NULL) {
		q->tok = NULL;
		fill(q, result, ai);
		deliver_soon(q);
	}
	if (ai != NULL)
		evutil_freeaddrinfo(ai);
	if (t->in_start) {
		t->gai = NULL; /* al_resolve frees it on return */
		t->req = NULL;
		return;
	}
	free(t);
	r->tokens--;
	resolver_release(r, true);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	al_resolve_req *q = arg;
	if (!q->done) {
		req_detach(q);
		memset(&q->res, 0, sizeof q->res);
		q->res.status = AL_ETIMEDOUT;
		q->res.error = "upstream resolver timed out";
	}
	al_resolve_cb cb = q->cb;
	void *cb_arg = q->arg;
	al_resolve_result res = q->res;
	if (res.first_allowed != NULL)
		res.first_allowed = res.addrs +
				    (q->res.first_allowed - q->res.addrs);
	req_free(q);
	cb(&res, cb_arg);
}

al_resolve_req *al_resolve(al_resolver *r, const char *name, al_resolve_cb cb,
			   void *arg, al_err *err)
{
	char canon[NAME_BUF];
	if (name == NULL || cb == NULL ||
	    al_dnsname_canon(name, canon, sizeof canon, NULL) != 0 ||
	    strcmp(canon, name) != 0) {
		al_err_set(err, AL_EINVAL, 0, "resolve: name not canonical");
		return NULL;
	}
	if (r->inflight >= r->max_inflight) {
		al_err_set(err, AL_EQUOTA, 0,
			   "resolve: %zu lookups already pending", r->inflight);
		return NULL;
	}
	al_resolve_req *q = calloc(1, sizeof *q);
	token *t = calloc(1, sizeof *t);
	if (q != NULL)
		q->timer = evtimer_new(r->base, on_timer, q);
	if (q == NULL || t == NULL || q->timer == NULL) {
		if (q != NULL && q->timer != NULL)
			event_free(q->timer);
		free(q);
		free(t);
		al_err_set(err, AL_ENOMEM, ENOMEM, "resolve: out of memory");
		return NULL;
	}
	q->r = r;
	q->cb = cb;
	q->arg = arg;
	q->next = r->head;
	if (r->head != NULL)
		r->head->prev = q;
	r->head = q;
	r->inflight++;
	t->r = r;
	t->req = q;
	q->tok = t;
	struct evutil_addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_protocol = IPPROTO_TCP,
	};
	t->in_start = true;
	t->gai = evdns_getaddrinfo(r->dns, name, NULL, &hints, on_gai, t);
	t->in_start = false;
	if (q->done) {
		free(t); /* answered at once (a number, a hosts entry) */
		return q;
	}
	if (t->gai == NULL) {
		/* No answer and no request: treat as a failure, later. */
		q->tok = NULL;
		free(t);
		fill(q, EVUTIL_EAI_FAIL, NULL);
		deliver_soon(q);
		return q;
	}
	r->tokens++;
	const struct timeval tv = {r->timeout_ms / 1000,
				   (r->timeout_ms % 1000) * 1000};
	event_add(q->timer, &tv);
	return q;
}
