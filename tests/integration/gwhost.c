/* gwhost: see gwhost.h. */
#include "gwhost.h"

#include "cred/credproto.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *config_state;

static const char *config_lookup(const char *name)
{
	return strcmp(name, "AIRLOCK_STATE") == 0 ? config_state : getenv(name);
}

int gwhost_config(al_config *cfg, const char *state, al_err *err)
{
	config_state = state;
	return al_config_load_from(cfg, config_lookup, err);
}

static int lease_slot(gwhost *h, al_err *err)
{
	int rc = al_netpool_take(h->pool, AL_NETSLOT_NS, &h->lease, err);
	if (rc == AL_DECLINED) {
		if (al_netpool_prepare(h->pool, AL_NETSLOT_NS, err) < 0)
			return -1;
		rc = al_netpool_take(h->pool, AL_NETSLOT_NS, &h->lease, err);
	}
	if (rc == AL_DECLINED)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "no slot ready after preparing one");
	return rc;
}

int gwhost_start(gwhost *h, al_netpool *pool, const al_config *cfg,
		 const char *prog, const char *sandbox, int cred_fd,
		 al_err *err)
{
	memset(h, 0, sizeof *h);
	h->pool = pool;
	h->sandbox = sandbox;
	const char *state = cfg->state_dir;
	char keys[AL_PATH_MAX + 8];
	snprintf(keys, sizeof keys, "%s/keys", state);
	snprintf(h->run_dir, sizeof h->run_dir, "%s", cfg->run_dir);
	mkdir(keys, 0700);
	mkdir(h->run_dir, 0755);
	if (lease_slot(h, err) < 0)
		return -1;
	h->ca = al_ca_open(keys, err);
	if (h->ca == NULL)
		goto fail_lease;
	h->mint = ctl_mintd_start(state, h->ca, err);
	if (h->mint == NULL)
		goto fail_ca;
	if (al_uidrange_take(&al_uidrange_gw, sandbox, &h->uid, err) < 0)
		goto fail_mint;
	static al_gateway_env env;
	al_gateway_env_fill(&env, cfg);
	al_gateway_spec spec = {
		.slot = &h->lease.slot,
		.uid = h->uid.base,
		.gid = h->uid.base,
		.sandbox = sandbox,
		.prog = prog,
		.env = env.env,
		.run_dir = h->run_dir, /* egress directory, address journal */
		.cred_fd = cred_fd,
	};
	int64_t t0 = al_now_ms();
	if (al_gateway_launch(&spec, &h->proc, err) < 0)
		goto fail_uid;
	h->launch_ms = al_now_ms() - t0;
	/* Frames one at a time, each answered before the next. */
	int fl = fcntl(h->proc.control_fd, F_GETFL);
	fcntl(h->proc.control_fd, F_SETFL, fl & ~O_NONBLOCK);
	struct in_addr ga = {htonl(h->lease.slot.addr.gateway)};
	inet_ntop(AF_INET, &ga, h->gateway, sizeof h->gateway);
	return 0;
fail_uid:
	al_uidrange_drop(&h->uid);
fail_mint:
	ctl_mintd_stop(h->mint);
fail_ca:
	al_ca_close(h->ca);
fail_lease:
	al_netpool_release(pool, &h->lease);
	return -1;
}

/* The answer to a GW_CREDCHAN_REQ: ok false, no channel. */
static int credchan_none(gwhost *h, uint32_t id, al_err *err)
{
	char *p = al_gw_credchan_pack(false, err);
	if (p == NULL)
		return -1;
	int rc = al_frame_send(h->proc.control_fd, AL_F_GW_CREDCHAN, id, p,
			       strlen(p), err);
	free(p);
	return rc;
}

int gwhost_configure(gwhost *h, al_gw_config *c, uint32_t id, al_frame *ack,
		     al_err *err)
{
	snprintf(c->sandbox, sizeof c->sandbox, "%s", h->sandbox);
	snprintf(c->gateway, sizeof c->gateway, "%s", h->gateway);
	char *p = al_gw_config_pack(c, err);
	if (p == NULL)
		return -1;
	int rc = al_frame_send(h->proc.control_fd, AL_F_GW_CONFIG, id, p,
			       strlen(p), err);
	free(p);
	if (rc < 0)
		return -1;
	al_frame_reader r;
	al_frame_reader_init(&r);
	int64_t deadline = al_now_ms() + GWHOST_ACK_TIMEOUT_MS;
	while ((rc = al_frame_recv(h->proc.control_fd, &r, ack, deadline,
				   err)) == 0 &&
	       ack->type == AL_F_GW_CREDCHAN_REQ) {
		/* A gateway without a credential channel (fd 7) asks the shim
		 * for one; standing alone there is none to give. */
		rc = credchan_none(h, ack->id, err);
		al_frame_free(ack);
		if (rc < 0)
			break;
	}
	al_frame_reader_free(&r);
	if (rc < 0)
		return -1;
	if (ack->type != AL_F_GW_ACK || ack->id != id) {
		al_err_set(err, AL_EPROTO, 0, "frame %u id %u, not GW_ACK %u",
			   ack->type, ack->id, id);
		al_frame_free(ack);
		return -1;
	}
	return 0;
}

int gwhost_stop(gwhost *h, int sig)
{
	if (sig != 0)
		kill(h->proc.pid, sig);
	close(h->proc.control_fd);
	siginfo_t si = {0};
	if (waitid(P_PIDFD, (id_t)h->proc.pidfd, &si, WEXITED) < 0)
		perror("waitid");
	close(h->proc.pidfd);
	al_gateway_state_remove(h->run_dir, h->sandbox);
	al_uidrange_drop(&h->uid);
	ctl_mintd_stop(h->mint);
	al_ca_close(h->ca);
	al_netpool_release(h->pool, &h->lease);
	return si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
}
