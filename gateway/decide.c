/* decide: the policy's decisions for this sandbox, and the egress log. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "gw.h"
#include "proto/agentproto.h"

bool gw_decide(gw *g, enum al_egress_proto proto, const char *name,
	       unsigned port, const char *method, const char *path,
	       char reason[AL_POLICY_REASON_MAX])
{
	if (!g->configured) {
		snprintf(reason, AL_POLICY_REASON_MAX, "not configured");
		return false;
	}
	const al_gw_config *c = &g->cfg;
	al_egress_req req = {
		.name = name,
		.port = port,
		.protocol = proto,
		.method = method,
		.path = path,
		.sandbox = c->sandbox,
		.template_name = c->template_name[0] ? c->template_name : NULL,
		.project = c->project[0] ? c->project : NULL,
		.metadata = c->metadata,
		.n_metadata = c->n_metadata,
		.mode = c->network.mode,
		.allow = (const char *const *)c->network.allow,
		.n_allow = c->network.n_allow,
		.deny = (const char *const *)c->network.deny,
		.n_deny = c->network.n_deny,
		.build = c->build,
	};
	al_egress_decision d;
	al_policy_egress(g->policy, &req, &d);
	memcpy(reason, d.reason, AL_POLICY_REASON_MAX);
	reason[AL_POLICY_REASON_MAX - 1] = '\0';
	return d.allow;
}

static int64_t unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void gw_log(gw *g, bool allow, const char *reason, enum al_egress_proto proto,
	    const char *name, unsigned port, const char *method,
	    const char *path)
{
	al_egress_rec r;
	al_egress_rec_set(&r, unix_ms(), g->sandbox, allow, reason, proto, name,
			  port, method, path);
	al_egress_writer_add(g->egress, &r, al_now_ms());
	if (!event_pending(g->flush, EV_TIMEOUT, NULL)) {
		struct timeval t = {0, AL_EGRESS_FLUSH_MS * 1000};
		event_add(g->flush, &t);
	}
}

bool gw_decide_log(gw *g, enum al_egress_proto proto, const char *name,
		   unsigned port, const char *method, const char *path)
{
	char reason[AL_POLICY_REASON_MAX];
	bool allow = gw_decide(g, proto, name, port, method, path, reason);
	gw_log(g, allow, reason, proto, name, port, method, path);
	return allow;
}

void gw_dns_decide(void *arg, const char *name, al_dnsserv_decision *out)
{
	gw *g = arg;
	/* A changed policy file applies from the next lookup on (and the
	 * next connection, proxy.c): one stat. */
	al_policy_reload_if_changed(g->policy);
	char reason[AL_POLICY_REASON_MAX];
	out->allow = gw_decide(arg, AL_EGRESS_DNS, name, 0, NULL, NULL, reason);
	snprintf(out->reason, sizeof out->reason, "%s", reason);
}

void gw_dns_log(void *arg, const al_dnsserv_event *ev)
{
	gw_log(arg, ev->allow, ev->reason, AL_EGRESS_DNS, ev->name, 0, NULL,
	       NULL);
}

void gw_log_flush(gw *g, bool force)
{
	al_err err;
	int64_t now = al_now_ms();
	if (al_egress_writer_flush(g->egress, now, force, &err) < 0)
		gw_note(g, "egress log: %s", err.msg);
	int64_t due = al_egress_writer_due(g->egress);
	if (due >= 0 && !force) {
		/* A failed write is retried too, not faster than a flush. */
		int64_t wait = due > now ? due - now : AL_EGRESS_FLUSH_MS;
		struct timeval t = {wait / 1000, (wait % 1000) * 1000};
		event_add(g->flush, &t);
	}
}

/* The guest can cause notes (failed dials, refused responses): at most
 * this many a second reach the log, the rest are counted. */
#define GW_NOTES_PER_S 20

static bool note_allowed(gw *g)
{
	static int64_t window;
	static unsigned n;
	static unsigned long dropped;
	int64_t now = al_now_ms() / 1000;
	if (now != window) {
		window = now;
		n = 0;
		if (dropped > 0) {
			fprintf(stderr,
				"airlock-gateway %s: %lu log lines "
				"suppressed\n",
				g->sandbox, dropped);
			dropped = 0;
		}
	}
	if (n >= GW_NOTES_PER_S) {
		dropped++;
		return false;
	}
	n++;
	return true;
}

void gw_note(gw *g, const char *fmt, ...)
{
	if (!note_allowed(g))
		return;
	char line[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	/* Printable only: names and reasons may come from the guest. */
	for (char *p = line; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	fprintf(stderr, "airlock-gateway %s: %s\n", g->sandbox, line);
}
