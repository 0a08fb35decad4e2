/* Fuzz the shim's relay (shim/relay.c): clients on the control socket
 * and the agent, both hostile, send frames (well-formed or not) in any
 * interleaving, connect and hang up, while the relay turns. Everything
 * the shim sends either way must be well-formed frames, and it must
 * never crash or leak. The machine side (teardown, claim) is faked.
 *
 * Input: one byte of flags (bit 0: a standby, bit 1: its claim fails),
 * then operations, each a byte and its operands (see run_op).
 *
 * fuzz-sources: shim/route.c shim/boot.c shim/stream.c shim/gateway.c shim/lifecycle.c
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../shim/life.h" /* faked below */
#include "../../shim/netctl.h"
#include "../../shim/relay.h"
#include "base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PEERS 8

static shim s;
static int claim_fails;

/* The machine side, faked: nothing to stop, no database. */
void shim_teardown(shim *sh, al_event ev, const char *detail)
{
	(void)ev;
	(void)detail;
	sh->listen_fd = -1;
}

int shim_claim(shim *sh, const void *payload, size_t len, char **result,
	       al_err *err)
{
	(void)payload;
	(void)len;
	/* 2: declined, the standby waits on unchanged. */
	if (claim_fails == 2) {
		al_err_set(err, AL_ESTATE, 0, "claim declined");
		return AL_DECLINED;
	}
	sh->standby = 0;
	if (claim_fails)
		return al_err_set(err, AL_ESTATE, 0, "claim refused");
	snprintf(sh->sb.id, sizeof sh->sb.id, "claimed");
	*result = strdup("{\"pid\":1,\"accel\":\"\"}");
	return *result != NULL ? 0 : -1;
}

typedef struct peer {
	int fd; /* our end; -1 once closed */
	al_frame_reader in;
} peer;

static peer clients[MAX_PEERS];
static int nclients;
static peer agent;

typedef struct input {
	const uint8_t *p;
	size_t n;
} input;

static uint8_t take(input *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		abort();
}

/* All that the shim sent to p so far: only well-formed frames. */
static void drain(peer *p)
{
	if (p->fd < 0)
		return;
	for (;;) {
		uint8_t buf[65536];
		ssize_t n = read(p->fd, buf, sizeof buf);
		if (n <= 0)
			break;
		al_err err;
		if (al_frame_reader_feed(&p->in, buf, (size_t)n, &err) < 0)
			abort();
		al_frame f;
		int rc;
		while ((rc = al_frame_next(&p->in, &f, &err)) == 1)
			al_frame_free(&f);
		if (rc < 0)
			abort();
	}
}

static void drain_all(void)
{
	for (int i = 0; i < nclients; i++)
		drain(&clients[i]);
	drain(&agent);
}

static void send_bytes(peer *p, const void *b, size_t n)
{
	if (p->fd < 0 || n == 0)
		return;
	/* The buffers are large and drained after every operation. */
	ssize_t w = write(p->fd, b, n);
	(void)w;
}

static void send_frame(peer *p, uint16_t type, uint32_t id, const void *b,
		       size_t n)
{
	al_buf out;
	al_err err;
	al_buf_init(&out, 0);
	if (al_frame_encode(&out, type, id, b, n, &err) == 0)
		send_bytes(p, out.data + out.off, al_buf_pending(&out));
	al_buf_free(&out);
}

/* Frame types worth trying: every real one and a few that are not. */
static uint16_t pick_type(uint8_t b)
{
	/* clang-format off */
	static const uint16_t types[] = {
		AL_F_HELLO,	AL_F_EXEC,	AL_F_STARTED,	AL_F_STDIN,
		AL_F_STDOUT,	AL_F_STDERR,	AL_F_EXIT,	AL_F_SIGNAL,
		AL_F_FILE_READ, AL_F_FILE_DATA, AL_F_FILE_END,	AL_F_FILE_WRITE,
		AL_F_FILE_LIST, AL_F_RESULT,	AL_F_ERROR,	AL_F_STATUS,
		AL_F_DESTROY,	AL_F_CLAIM,	AL_F_IDENTITY,	AL_F_DISK_GROW,
		AL_F_PAUSE,	AL_F_RESUME,
		0,		16,		31,		37,
		0xffff,
	};
	/* clang-format on */
	return types[b % (sizeof types / sizeof *types)];
}

/* Requests a client would send, so that routes exist to answer. */
static void canned_request(peer *p, uint8_t which, uint32_t id)
{
	static const struct {
		uint16_t type;
		const char *body;
	} reqs[] = {
		{AL_F_EXEC, "{\"cmd\":[\"true\"],\"stdin\":true}"},
		{AL_F_EXEC, "{\"cmd\":[\"x\"],\"env\":{\"A\":\"1\"}}"},
		{AL_F_EXEC, "{\"cmd\":[\"x\"],\"env\":[]}"},
		{AL_F_EXEC, "[1,2]"},
		{AL_F_FILE_READ, "{\"path\":\"/etc/passwd\"}"},
		{AL_F_FILE_WRITE, "{\"path\":\"/tmp/x\",\"mode\":420}"},
		{AL_F_FILE_LIST, "{\"path\":\"/\"}"},
		{AL_F_STATUS, "{}"},
		{AL_F_CLAIM, "{\"id\":\"sbx-fuzz\"}"},
		{AL_F_CLAIM, "{\"id\":\"Bad Id\"}"},
		{AL_F_STDIN, "data"},
		{AL_F_STDIN, ""},
		{AL_F_SIGNAL, "{\"signal\":15}"},
		{AL_F_FILE_DATA, "chunk"},
		{AL_F_FILE_END, ""},
		{AL_F_DESTROY, "{}"},
		{AL_F_PAUSE, "{}"},
		{AL_F_RESUME, "{}"},
	};
	size_t k = which % (sizeof reqs / sizeof *reqs);
	send_frame(p, reqs[k].type, id, reqs[k].body, strlen(reqs[k].body));
}

static peer *pick_client(uint8_t b)
{
	if (nclients == 0)
		return NULL;
	peer *p = &clients[b % nclients];
	return p->fd >= 0 ? p : NULL;
}

static void connect_client(void)
{
	if (nclients == MAX_PEERS)
		return;
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	set_nonblock(sp[0]);
	set_nonblock(sp[1]);
	peer *p = &clients[nclients++];
	p->fd = sp[1];
	al_frame_reader_init(&p->in);
	shim_relay_add_client(&s, sp[0]);
}

/* One operation; 1 once the relay wants to end. */
static int run_op(input *in, al_event *ev, char *detail, size_t dlen)
{
	uint8_t op = take(in);
	uint8_t buf[64];
	peer *p;
	size_t n;
	uint16_t type;
	uint32_t id;

	switch (op % 9) {
	case 0:
		connect_client();
		break;
	case 1: /* a client's frame */
		p = pick_client(take(in));
		type = pick_type(take(in));
		id = take(in);
		n = take(in) % sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = take(in);
		if (p != NULL)
			send_frame(p, type, id, buf, n);
		break;
	case 2: /* bytes on a client's connection */
		p = pick_client(take(in));
		n = take(in) % sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = take(in);
		if (p != NULL)
			send_bytes(p, buf, n);
		break;
	case 3: /* an agent frame, mostly for ids the shim handed out, or
		 * an answer to the shim's own PAUSE / RESUME */
		type = pick_type(take(in));
		id = take(in);
		id = id >= 248 ? AL_REQ_ID_PAUSE + (id & 1) : id % 16;
		n = take(in) % sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = take(in);
		send_frame(&agent, type, id, buf, n);
		break;
	case 4: /* bytes on the agent channel */
		n = take(in) % sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = take(in);
		send_bytes(&agent, buf, n);
		break;
	case 5: /* a client hangs up */
		p = pick_client(take(in));
		if (p != NULL) {
			close(p->fd);
			p->fd = -1;
		}
		break;
	case 6: /* a request that opens a route */
		p = pick_client(take(in));
		id = take(in);
		if (p != NULL)
			canned_request(p, take(in), id);
		else
			take(in);
		break;
	case 7: /* an agent answer with JSON for a recent id */
		type = pick_type(take(in));
		id = take(in) % 16;
		send_frame(&agent, type, id, "{\"exit_code\":0}", 15);
		break;
	default: /* the agent's channel ends */
		close(agent.fd);
		agent.fd = -1;
		break;
	}
	/* Let the relay take in what was sent and answer it. */
	for (int t = 0; t < 3; t++) {
		if (shim_relay_turn(&s, 0, ev, detail, dlen))
			return 1;
		drain_all();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	if (!once) {
		once = 1;
		/* As the shim's main: a peer gone is an error, not a death. */
		signal(SIGPIPE, SIG_IGN);
		/* The shim logs what hostile peers do; a line, then quiet. */
		al_log_init("fuzz_relay", AL_LOG_INFO);
		al_log_limit(1, 0);
	}
	if (size == 0)
		return 0;
	input in = {data + 1, size - 1};

	memset(&s, 0, sizeof s);
	s.listen_fd = -1;
	s.sig_fd = -1;
	s.destroy_client = -1;
	shim_netctl_init(&s);
	s.next_agent_id = 1;
	s.standby = data[0] & 1;
	claim_fails = ((data[0] >> 1) & 3) % 3;
	s.driver = &al_driver_ns;
	snprintf(s.sb.id, sizeof s.sb.id, "sbx-fuzz-0");
	snprintf(s.slot, sizeof s.slot, "standby-v1-fuzz");
	for (int i = 0; i < SHIM_MAX_CLIENTS; i++)
		s.clients[i].fd = -1;
	al_frame_reader_init(&s.agent_in);
	al_buf_init(&s.agent_out, SHIM_AGENT_QUEUE_MAX);

	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	set_nonblock(sp[0]);
	set_nonblock(sp[1]);
	s.h.agent_fd = sp[0];
	agent.fd = sp[1];
	al_frame_reader_init(&agent.in);
	nclients = 0;

	al_event ev = AL_EV_DELETE;
	char detail[600] = "";
	while (in.n > 0 && !run_op(&in, &ev, detail, sizeof detail))
		;
	drain_all();
	shim_relay_finish(&s, ev, detail);
	drain_all();

	close(s.h.agent_fd);
	if (agent.fd >= 0)
		close(agent.fd);
	al_frame_reader_free(&agent.in);
	for (int i = 0; i < nclients; i++) {
		if (clients[i].fd >= 0)
			close(clients[i].fd);
		al_frame_reader_free(&clients[i].in);
	}
	return 0;
}
