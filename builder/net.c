/* RUN steps' network: the build leases one network slot (core/net/pool.h,
 * as a sandbox's shim does) and runs one egress gateway on it
 * (core/net/gwlaunch.h) for all its RUN steps; each step's jail joins the
 * slot's guest namespace. The gateway is the one every sandbox has, under
 * the same policy: GW_CONFIG says "build":true, so policies/egress.lua's
 * build rules apply (build_registries), and names the build's id as the
 * sandbox, so its decisions land in the egress log under the build's id
 * (GET /v1/templates/builds/{id}/egress). Its allow list is the host's
 * package registries, read from the host's apt and npm configuration:
 * what the policy allows a build besides build_registries (deny, never
 * and the ports still apply).
 *
 * Supervision is per step: a gateway that died is started again before
 * the next step; while none runs the slot's rules drop everything (fail
 * closed). The builder is synchronous, so the GW_CONFIG's ACK is waited
 * for here, briefly. */
#include "builder.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "host/cgroup.h"
#include "model/egress_log.h"
#include "net/egress.h"
#include "net/gwlaunch.h"
#include "net/netspec.h"
#include "proto/agentproto.h"

#define NET_ACK_MS 5000
#define NET_REGISTRIES_MAX 8
/* How long a failed step waits for its denials to reach the egress log
 * (the gateway writes every 250 ms, the controller ingests every 100). */
#define NET_EXPLAIN_WAIT_MS 3000
#define NET_EXPLAIN_MAX 5
/* How long a finished build waits for the controller to ingest its
 * gateway's last files (it ingests every 100 ms). */
#define NET_SETTLE_WAIT_MS 3000
#define NPMRC_MAX (64u << 10)

/* ---- the host's registries ---- */

/* The host of an http(s) URL into out (canonical); 0 when there is
 * none. */
static int url_host(const char *url, char out[AL_NETSPEC_PATTERN_MAX])
{
	const char *p = strstr(url, "://");
	if (p == NULL || strncmp(url, "http", 4) != 0)
		return 0;
	p += 3;
	size_t n = strcspn(p, "/?#");
	const char *at = memchr(p, '@', n);
	if (at != NULL) {
		n -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	size_t h = strcspn(p, ":/?#");
	if (h < n)
		n = h;
	al_err err = {0};
	return n > 0 && al_netspec_pattern_canon(p, n, out, &err) == 0 &&
	       strchr(out, '*') == NULL;
}

static void add_host(char (*out)[256], size_t max, size_t *n, const char *url)
{
	char h[AL_NETSPEC_PATTERN_MAX];
	if (*n >= max || !url_host(url, h))
		return;
	for (size_t i = 0; i < *n; i++)
		if (strcmp(out[i], h) == 0)
			return;
	snprintf(out[(*n)++], 256, "%s", h);
}

/* VERSION_CODENAME of the host's /etc/os-release ("bookworm" if none). */
static void host_release(char *out, size_t outlen)
{
	snprintf(out, outlen, "bookworm");
	size_t len;
	al_err tmp_err = {0};
	char *t = bld_fsroot_read_host_file("/etc/os-release", NPMRC_MAX, &len,
					    &tmp_err);
	if (t == NULL)
		return;
	char *v = strstr(t, "VERSION_CODENAME=");
	if (v != NULL && (v == t || v[-1] == '\n')) {
		v += strlen("VERSION_CODENAME=");
		size_t l = strspn(v, "abcdefghijklmnopqrstuvwxyz");
		if (l > 0 && l < outlen)
			snprintf(out, outlen, "%.*s", (int)l, v);
	}
	free(t);
}

/* "registry=URL" of an npmrc, into out; 0 when it has none. */
static int npmrc_registry(const char *path, char *out, size_t outlen)
{
	size_t len;
	al_err tmp_err = {0};
	char *t = bld_fsroot_read_host_file(path, NPMRC_MAX, &len, &tmp_err);
	if (t == NULL)
		return 0;
	int found = 0;
	for (char *save = NULL, *line = strtok_r(t, "\n", &save);
	     line != NULL && !found; line = strtok_r(NULL, "\n", &save)) {
		line += strspn(line, " \t");
		if (strncmp(line, "registry", 8) != 0)
			continue;
		char *v = line + 8;
		v += strspn(v, " \t");
		if (*v != '=')
			continue;
		v++;
		v += strspn(v, " \t");
		v[strcspn(v, " \t\r")] = '\0';
		snprintf(out, outlen, "%s", v);
		found = 1;
	}
	free(t);
	return found;
}

size_t bld_net_registries(char (*out)[256], size_t max)
{
	size_t n = 0;
	char rel[64], suite[96], url[1024];
	host_release(rel, sizeof rel);
	static const char *const suffix[] = {"", "-updates", "-security"};
	for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
		al_err tmp_err = {0};
		snprintf(suite, sizeof suite, "%s%s", rel, suffix[i]);
		if (bld_mirror_of_host(suite, url, sizeof url, &tmp_err) == 0)
			add_host(out, max, &n, url);
	}
	const char *npm = getenv("AIRLOCK_NPM_REGISTRY");
	if (npm != NULL && npm[0] != '\0')
		add_host(out, max, &n, npm);
	else if (npmrc_registry("/etc/npmrc", url, sizeof url) ||
		 npmrc_registry("/usr/etc/npmrc", url, sizeof url))
		add_host(out, max, &n, url);
	else
		add_host(out, max, &n, "https://registry.npmjs.org/");
	return n;
}

/* ---- the gateway ---- */

static void gateway_end(bld_net *n)
{
	if (n->ctl >= 0)
		close(n->ctl);
	n->ctl = -1;
	al_gateway_end(&n->pid, &n->pidfd);
	if (n->cgroup[0] != '\0') {
		al_err err = {0};
		if (al_cgroup_destroy(n->cgroup, &err) < 0)
			al_warn("build gateway cgroup %s: %s", n->cgroup,
				err.msg);
		n->cgroup[0] = '\0';
	}
}

/* It exited (its pidfd is readable): reaped, to be started again. */
static void gateway_check(bld *b)
{
	bld_net *n = &b->net;
	struct pollfd p = {.fd = n->pidfd, .events = POLLIN};
	if (n->pid > 0 && poll(&p, 1, 0) == 1) {
		al_warn("build %s: its gateway (pid %d) ended; starting "
			"another",
			b->id, (int)n->pid);
		gateway_end(n);
	}
}

/* The first (and only) GW_CONFIG, and its ACK. */
static int gateway_configure(bld *b, al_err *err)
{
	bld_net *n = &b->net;
	char regs[NET_REGISTRIES_MAX][256];
	char *allow[NET_REGISTRIES_MAX + 1];
	size_t nr = bld_net_registries(regs, NET_REGISTRIES_MAX);
	for (size_t i = 0; i < nr; i++)
		allow[i] = regs[i];
	allow[nr] = NULL;
	al_gw_config c = {
		.build = true,
		.network = {.mode = AL_NET_ALLOWLIST,
			    .allow = nr > 0 ? allow : NULL,
			    .n_allow = nr},
	};
	snprintf(c.sandbox, sizeof c.sandbox, "%s", b->id);
	snprintf(c.template_name, sizeof c.template_name, "%s", b->name);
	snprintf(c.project, sizeof c.project, "%s", b->project);
	al_net_addr_format(n->lease.slot.addr.gateway, c.gateway);
	char *txt = al_gw_config_pack(&c, err);
	if (txt == NULL)
		return -1;
	int64_t deadline = al_now_ms() + NET_ACK_MS;
	int rc = al_frame_send_until(n->ctl, AL_F_GW_CONFIG, 1, txt,
				     strlen(txt), deadline, err);
	free(txt);
	if (rc < 0)
		return -1;
	al_frame_reader rd;
	al_frame f;
	al_frame_reader_init(&rd);
	rc = al_frame_recv(n->ctl, &rd, &f, deadline, err);
	al_frame_reader_free(&rd);
	if (rc < 0)
		return -1;
	al_gw_ack ack;
	rc = f.type == AL_F_GW_ACK && f.id == 1
		     ? al_gw_ack_unpack(f.payload, f.len, &ack, err)
		     : al_err_set(err, AL_EPROTO, 0,
				  "the gateway answered no GW_ACK");
	al_frame_free(&f);
	if (rc == 0 && !ack.ok)
		rc = al_err_set(err, AL_EPROTO, 0,
				"the gateway refused its setting: %s",
				ack.error);
	return rc;
}

/* One process: memory for its TLS sessions, leaf certificates and
 * buffers with room to spare, a CPU share like a RUN step's and at most
 * one CPU, whatever the build's traffic makes it do. */
static const al_cgroup_limits bld_gateway_limits = {
	.memory_bytes = 256ull << 20,
	.pids_max = 16,
	.cpu_shares = 1024,
	.cpu_millis = 1000,
};

static int gateway_start(bld *b, al_err *err)
{
	bld_net *n = &b->net;
	static al_gateway_env env;
	al_gateway_env_fill(&env, &b->cfg);
	char cg[sizeof n->cgroup];
	snprintf(cg, sizeof cg, "%.40s-gw", b->id);
	if (al_cgroup_create(cg, &bld_gateway_limits, err) < 0) {
		al_err_wrap(err, "the build gateway's cgroup");
		return -1;
	}
	snprintf(n->cgroup, sizeof n->cgroup, "%s", cg);
	al_gateway_spec spec = {
		.slot = &n->lease.slot,
		.uid = n->uid.base,
		.gid = n->uid.base,
		.sandbox = b->id,
		.prog = n->prog,
		.env = env.env,
		.run_dir = b->cfg.run_dir,
		.cgroup = n->cgroup,
	};
	al_gateway_proc p;
	n->starts++;
	if (al_gateway_launch(&spec, &p, err) < 0) {
		gateway_end(n);
		return -1;
	}
	n->pid = p.pid;
	n->pidfd = p.pidfd;
	n->ctl = p.control_fd;
	if (gateway_configure(b, err) < 0) {
		al_err_wrap(err, "configuring the build's gateway");
		gateway_end(n);
		return -1;
	}
	return 0;
}

const al_netslot *bld_net_up(bld *b, al_err *err)
{
	bld_net *n = &b->net;
	int64_t t0 = al_now_ms();
	int prepared = -1; /* -1: the slot was leased before */
	if (n->lease.lock_fd < 0) {
		if (!n->pool_open) {
			if (al_netpool_open(&n->pool, b->cfg.state_dir,
					    b->cfg.net_pool, err) < 0)
				goto fail;
			n->pool_open = 1;
		}
		if (al_gateway_prog(b->cfg.libexec_dir, n->prog, sizeof n->prog,
				    err) < 0 ||
		    (n->uid.lock_fd < 0 &&
		     al_uidrange_take(&al_uidrange_gw, b->id, &n->uid, err) <
			     0) ||
		    al_netpool_lease(&n->pool, AL_NETSLOT_NS, &n->lease,
				     &prepared, err) < 0)
			goto fail;
	}
	gateway_check(b);
	if (n->pid > 0)
		return &n->lease.slot;
	if (gateway_start(b, err) < 0)
		goto fail;
	al_info("build %s: network up in %lld ms (%s slot #%u, gateway pid "
		"%d)",
		b->id, (long long)(al_now_ms() - t0),
		prepared < 0   ? "the build's"
		: prepared > 0 ? "a prepared"
			       : "a ready",
		n->lease.slot.index, (int)n->pid);
	return &n->lease.slot;
fail:
	al_err_wrap(err, "the build's network");
	return NULL;
}

uint64_t bld_net_denied(bld *b)
{
	al_egress_counts c = {0};
	al_err tmp_err = {0};
	if (b->net.pid <= 0 ||
	    al_egress_log_counts(b->db, b->id, &c, &tmp_err) < 0)
		return 0;
	return c.denied;
}

/* One denial as a log line. */
static void explain_one(bld *b, json_object *e)
{
	json_object *v;
	const char *f[4] = {"?", "?", "?", "?"};
	static const char *const keys[4] = {"protocol", "name", "reason",
					    "path"};
	int port = 0;
	for (int i = 0; i < 4; i++)
		if (json_object_object_get_ex(e, keys[i], &v) &&
		    json_object_is_type(v, json_type_string))
			f[i] = json_object_get_string(v);
	if (json_object_object_get_ex(e, "port", &v))
		port = json_object_get_int(v);
	if (strcmp(f[0], "dns") == 0)
		bld_blog_info(b, "egress denied: DNS lookup of %s (%s)", f[1],
			      f[2]);
	else
		bld_blog_info(b, "egress denied: %s %s:%d%s (%s)", f[0], f[1],
			      port, strcmp(f[3], "?") != 0 ? f[3] : "", f[2]);
}

void bld_net_explain(bld *b, uint64_t before)
{
	if (b->net.pid <= 0)
		return;
	int64_t deadline = al_now_ms() + NET_EXPLAIN_WAIT_MS;
	uint64_t now = before;
	while ((now = bld_net_denied(b)) <= before && al_now_ms() < deadline)
		usleep(100000);
	if (now <= before)
		return;
	json_object *arr = NULL;
	char next[AL_EGRESS_CURSOR_MAX];
	al_err tmp_err = {0};
	if (al_egress_log_list(b->db, b->id, 100, NULL, &arr, next, &tmp_err) <
	    0)
		return;
	uint64_t want = now - before, shown = 0, unlogged = 0;
	size_t len = json_object_array_length(arr);
	for (size_t i = 0; i < len && shown < want && shown < NET_EXPLAIN_MAX;
	     i++) {
		json_object *e = json_object_array_get_idx(arr, i), *allow, *d;
		/* A count of decisions not logged (core/net/egress.h) is no
		 * denial of its own. */
		if (json_object_object_get_ex(e, "dropped", &d))
			unlogged += (uint64_t)json_object_get_int64(d);
		else if (json_object_object_get_ex(e, "allow", &allow) &&
			 !json_object_get_boolean(allow)) {
			explain_one(b, e);
			shown++;
		}
	}
	json_object_put(arr);
	if (unlogged > 0)
		bld_blog_info(
			b,
			"%llu more egress decisions were not logged (over "
			"the log rate or no room): some denials may be "
			"among them",
			(unsigned long long)unlogged);
	bld_blog_info(b,
		      "a template build reaches only what policies/egress.lua "
		      "allows builds (build_registries) and the host's package "
		      "registries; the build's egress log: GET "
		      "/v1/templates/builds/%s/egress",
		      b->id);
}

void bld_net_settle(bld *b)
{
	bld_net *n = &b->net;
	if (n->starts == 0)
		return;
	gateway_end(n);
	int64_t end = al_now_ms() + NET_SETTLE_WAIT_MS;
	while (al_egress_pending(b->cfg.run_dir, b->id) > 0) {
		if (al_now_ms() >= end) {
			al_warn("build %s: its egress log is not all ingested "
				"yet (the controller is behind)",
				b->id);
			return;
		}
		usleep(20000);
	}
}

void bld_net_down(bld *b)
{
	bld_net *n = &b->net;
	gateway_end(n);
	if (n->pool_open && n->lease.lock_fd >= 0)
		al_netpool_release(&n->pool, &n->lease);
	al_uidrange_drop(&n->uid);
	if (n->starts > 0)
		al_gateway_state_remove(b->cfg.run_dir, b->id);
}

void bld_net_init(bld_net *n)
{
	memset(n, 0, sizeof *n);
	n->lease.lock_fd = -1;
	n->lease.slot.gw_fd = -1;
	n->lease.slot.guest_fd = -1;
	n->uid.lock_fd = -1;
	n->pidfd = -1;
	n->ctl = -1;
}
