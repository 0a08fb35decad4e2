/* The sandbox's network setting and its gateway's control channel
 * (netctl.h): GW_CONFIG out, GW_ACK in, one at a time. The gateway parses
 * hostile bytes and may be compromised, so what it sends is checked like
 * anything from outside, and it can neither stall the loop (the fd is
 * non-blocking, the queue bounded) nor keep a config it never
 * acknowledged (a late or missing ACK detaches it). */
#include "netctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fdpass.h"
#include "base/log.h"
#include "base/ratebucket.h"
#include "cred/credclient.h"
#include "cred/credproto.h"
#include "gateway.h"
#include "net/netspec.h"
#include "route.h"

void shim_netctl_init(shim *s)
{
	memset(&s->gw, 0, sizeof s->gw);
	s->gw.fd = -1;
	s->gw.client = -1;
}

int shim_netctl_attached(const shim *s)
{
	return s->gw.fd >= 0;
}

/* The pending request is over: tell whoever asked. */
static void answer(shim *s, int ok, al_code code, const char *msg)
{
	shim_gwctl *g = &s->gw;
	if (g->wait_id == 0)
		return;
	if (g->client >= 0) {
		if (ok) {
			/* The gateway runs with it: so does the shim. */
			json_object_put(s->sb.network);
			s->sb.network = g->pending;
			g->pending = NULL;
			char *txt = al_net_result_pack(true, NULL);
			if (txt != NULL)
				shim_client_reply(s, g->client, g->client_gen,
						  AL_F_RESULT, g->client_id,
						  txt, strlen(txt));
			else
				shim_client_error(s, g->client, g->client_gen,
						  g->client_id, AL_ENOMEM,
						  "out of memory");
			free(txt);
		} else {
			shim_client_error(s, g->client, g->client_gen,
					  g->client_id, code, msg);
		}
	}
	json_object_put(g->pending);
	g->pending = NULL;
	g->wait_id = 0;
	g->client = -1;
}

void shim_netctl_detach(shim *s, const char *why)
{
	shim_gwctl *g = &s->gw;
	if (g->fd < 0)
		return;
	al_info("sandbox %s: gateway control closed: %s", s->sb.id, why);
	answer(s, 0, AL_EUNAVAIL, why);
	close(g->fd);
	g->fd = -1;
	al_frame_reader_free(&g->in);
	al_buf_free(&g->out);
}

/* A GW_CONFIG for network (the sandbox's identity from its spec) onto
 * the queue; the id it went under, 0 on failure (err). */
static uint32_t send_config(shim *s, json_object *network, al_err *err)
{
	shim_gwctl *g = &s->gw;
	al_gw_config c = {0};
	snprintf(c.sandbox, sizeof c.sandbox, "%s", s->sb.id);
	snprintf(c.template_name, sizeof c.template_name, "%s",
		 s->sb.template_name);
	snprintf(c.project, sizeof c.project, "%s", s->sb.project);
	snprintf(c.gateway, sizeof c.gateway, "%s", g->addr);
	c.build = g->build != 0;
	size_t n = s->sb.metadata != NULL
			   ? (size_t)json_object_object_length(s->sb.metadata)
			   : 0;
	al_policy_kv kv[AL_GW_META_MAX];
	if (n > AL_GW_META_MAX) {
		al_err_set(err, AL_EINVAL, 0, "too much metadata");
		return 0;
	}
	if (n > 0) {
		json_object_object_foreach(s->sb.metadata, k, v)
		{
			kv[c.n_metadata].key = k;
			kv[c.n_metadata].value = json_object_get_string(v);
			c.n_metadata++;
		}
	}
	c.metadata = kv;
	if (network != NULL) {
		if (al_netspec_from_json(network, "network", true, &c.network,
					 err) < 0)
			return 0;
	} else {
		al_netspec_default(&c.network);
	}
	char *txt = al_gw_config_pack(&c, err);
	al_netspec_free(&c.network);
	if (txt == NULL)
		return 0;
	if (++g->next_id == 0)
		g->next_id = 1;
	int rc = al_frame_encode(&g->out, AL_F_GW_CONFIG, g->next_id, txt,
				 strlen(txt), err);
	free(txt);
	if (rc < 0)
		return 0;
	g->wait_id = g->next_id;
	g->wait_deadline_ms = al_now_ms() + SHIM_GW_ACK_MS;
	return g->wait_id;
}

int shim_netctl_attach(shim *s, int fd, const char *gateway_addr, int build,
		       al_err *err)
{
	shim_gwctl *g = &s->gw;
	if (g->fd >= 0)
		shim_netctl_detach(s, "replaced by a new gateway");
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		close(fd);
		return al_err_sys(err, AL_ESYS, errno, "gateway control fd");
	}
	g->fd = fd;
	snprintf(g->addr, sizeof g->addr, "%s", gateway_addr);
	g->build = build;
	al_frame_reader_init(&g->in);
	al_buf_init(&g->out, SHIM_GW_QUEUE_MAX);
	g->client = -1;
	if (send_config(s, s->sb.network, err) == 0) {
		shim_netctl_detach(s, "no first config");
		return -1;
	}
	return 0;
}

void shim_netctl_started(shim *s, int fd)
{
	if (fd < 0)
		return;
	al_err err = {0};
	/* Ours from here (closed on failure: the gateway then exits, and
	 * its pidfd says so). */
	if (shim_netctl_attach(s, fd, s->gwproc.addr, 0, &err) < 0)
		al_warn("sandbox %s: gateway control: %s", s->sb.id, err.msg);
}

/* A gateway not started yet (it waits for the guest's first use of its
 * sockets) starts now with network as its first config; 1 when that
 * config is on its way (its ACK answers the change). */
static int wake_with(shim *s, json_object *network)
{
	json_object *was = s->sb.network;
	s->sb.network = network;
	int fd = shim_gwproc_wake(&s->gwproc);
	shim_netctl_started(s, fd);
	s->sb.network = was;
	return fd >= 0 && s->gw.fd >= 0 && s->gw.wait_id != 0;
}

void shim_netctl_request(shim *s, int client, const al_frame *f)
{
	shim_gwctl *g = &s->gw;
	uint32_t gen = shim_client_gen(s, client);
	al_err err = {0};
	al_netspec ns;
	if (al_net_update_unpack(f->payload, f->len, &ns, &err) < 0) {
		shim_client_error(s, client, gen, f->id, err.code, err.msg);
		return;
	}
	json_object *network = al_netspec_to_json(&ns);
	enum al_net_mode mode = ns.mode;
	al_netspec_free(&ns);
	if (network == NULL) {
		shim_client_error(s, client, gen, f->id, AL_ENOMEM,
				  "out of memory");
		return;
	}
	if (g->fd < 0 && wake_with(s, network)) {
		g->pending = network;
		g->client = client;
		g->client_gen = gen;
		g->client_id = f->id;
		return;
	}
	if (g->fd < 0) {
		/* Nothing runs that could let traffic out: none is what
		 * the sandbox has anyway; anything else it cannot get. */
		if (mode != AL_NET_NONE) {
			json_object_put(network);
			shim_client_error(
				s, client, gen, f->id, AL_ESTATE,
				"the sandbox has no network (created with"
				" mode none, or its gateway is not running):"
				" only mode none applies");
			return;
		}
		json_object_put(s->sb.network);
		s->sb.network = network;
		char *txt = al_net_result_pack(false, &err);
		if (txt != NULL)
			shim_client_reply(s, client, gen, AL_F_RESULT, f->id,
					  txt, strlen(txt));
		else
			shim_client_error(s, client, gen, f->id, err.code,
					  err.msg);
		free(txt);
		return;
	}
	if (g->wait_id != 0) {
		json_object_put(network);
		shim_client_error(s, client, gen, f->id, AL_ESTATE,
				  "another network change is in progress");
		return;
	}
	if (send_config(s, network, &err) == 0) {
		json_object_put(network);
		shim_client_error(s, client, gen, f->id, err.code, err.msg);
		return;
	}
	g->pending = network;
	g->client = client;
	g->client_gen = gen;
	g->client_id = f->id;
}

int shim_netctl_poll(shim *s, struct pollfd *pfd, int *who, int n)
{
	shim_gwctl *g = &s->gw;
	if (g->fd < 0)
		return n;
	short ev = POLLIN;
	if (al_buf_pending(&g->out) > 0)
		ev |= POLLOUT;
	pfd[n] = (struct pollfd){.fd = g->fd, .events = ev};
	who[n] = SHIM_WHO_GW;
	return n + 1;
}

/* GW_CREDCHAN_REQ: a fresh credential channel, passed with the answer
 * (SCM_RIGHTS). The fd must travel with the answer's bytes, so it goes
 * only when nothing else is queued; otherwise, over the rate, or without
 * a controller the answer is ok:false and the gateway asks again later. */
static int credchan(shim *s, const al_frame *f)
{
	shim_gwctl *g = &s->gw;
	al_err err = {0};
	if (al_gw_credchan_req_unpack(f->payload, f->len, &err) < 0)
		return -1;
	int fd = -1;
	if (al_buf_pending(&g->out) == 0 &&
	    al_ratebucket_take(&g->credchan_rate, SHIM_GW_CREDCHAN_BURST,
			       SHIM_GW_CREDCHAN_RATE, al_now_ms(), NULL)) {
		fd = al_credclient_open(s->cfg.state_dir, s->sb.id, &err);
		if (fd < 0)
			al_info("sandbox %s: no credential channel for the "
				"gateway: %s",
				s->sb.id, err.msg);
	}
	char *txt = al_gw_credchan_pack(fd >= 0, &err);
	int rc = txt != NULL ? 0 : -1;
	if (txt != NULL && fd >= 0) {
		al_buf one;
		al_buf_init(&one, 0);
		rc = al_frame_encode(&one, AL_F_GW_CREDCHAN, f->id, txt,
				     strlen(txt), &err);
		if (rc == 0 && al_fd_send(g->fd, one.data + one.off,
					  al_buf_pending(&one), fd, &err) < 0) {
			al_info("sandbox %s: handing a credential channel: %s",
				s->sb.id, err.msg);
			rc = -1;
		}
		al_buf_free(&one);
	} else if (txt != NULL) {
		rc = al_frame_encode(&g->out, AL_F_GW_CREDCHAN, f->id, txt,
				     strlen(txt), &err);
	}
	if (fd >= 0)
		close(fd);
	free(txt);
	return rc;
}

/* One frame from the gateway: the ACK of the config in flight, or a
 * request for a credential channel. */
static int from_gateway(shim *s, const al_frame *f)
{
	shim_gwctl *g = &s->gw;
	al_err err = {0};
	al_gw_ack ack;
	if (f->type == AL_F_GW_CREDCHAN_REQ)
		return credchan(s, f);
	if (f->type != AL_F_GW_ACK || f->id != g->wait_id || g->wait_id == 0 ||
	    al_gw_ack_unpack(f->payload, f->len, &ack, &err) < 0)
		return -1;
	if (ack.ok) {
		answer(s, 1, AL_OK, NULL);
		return 0;
	}
	char msg[AL_GW_ACK_ERROR_MAX + 48];
	snprintf(msg, sizeof msg, "the gateway refused the setting: %s",
		 ack.error);
	al_warn("sandbox %s: %s", s->sb.id, msg);
	int first = g->client < 0;
	answer(s, 0, AL_EPROTO, msg);
	/* A gateway without a config it accepted denies everything, but
	 * one the shim cannot configure is of no use: it goes. */
	return first ? -1 : 0;
}

void shim_netctl_event(shim *s, short revents)
{
	shim_gwctl *g = &s->gw;
	al_err err = {0};
	if (revents & POLLOUT) {
		if (al_buf_flush(&g->out, g->fd, &err) < 0) {
			shim_netctl_detach(s, "the gateway went away");
			return;
		}
	}
	if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0)
		return;
	int r = al_frame_reader_fill(&g->in, g->fd, &err);
	if (r <= 0) {
		shim_netctl_detach(s, r == 0 ? "the gateway went away"
					     : "reading the gateway failed");
		return;
	}
	for (;;) {
		al_frame f;
		r = al_frame_next(&g->in, &f, &err);
		if (r == 0)
			return;
		if (r < 0 || from_gateway(s, &f) < 0) {
			if (r > 0)
				al_frame_free(&f);
			shim_netctl_detach(s, "the gateway broke the protocol");
			return;
		}
		al_frame_free(&f);
		if (g->fd < 0)
			return;
	}
}

int shim_netctl_timeout(const shim *s, int64_t now)
{
	const shim_gwctl *g = &s->gw;
	if (g->fd < 0 || g->wait_id == 0)
		return -1;
	int64_t left = g->wait_deadline_ms - now;
	return left > 0 ? (int)left : 0;
}

void shim_netctl_tick(shim *s, int64_t now)
{
	shim_gwctl *g = &s->gw;
	if (g->fd >= 0 && g->wait_id != 0 && now >= g->wait_deadline_ms) {
		answer(s, 0, AL_ETIMEDOUT,
		       "the gateway did not acknowledge the setting in time");
		shim_netctl_detach(s, "no acknowledgement in time");
	}
}
