/* The shim's gateway control channel (shim/netctl.c) against a fake
 * gateway on a socketpair: the first GW_CONFIG goes out on attach, a
 * NETWORK request is answered after the gateway's ACK (and only then
 * becomes the sandbox's setting), a refusal or a missing ACK fails it,
 * a gateway that breaks the protocol is detached, and without a gateway
 * only mode none applies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "../../shim/netctl.c"

/* The relay's side, faked: what the client was answered. */
static struct {
	int n;
	uint16_t type;
	uint32_t id;
	al_code code;
	char text[1024];
} answered;

uint32_t shim_client_gen(const shim *sh, int i)
{
	(void)sh;
	(void)i;
	return 7;
}

void shim_client_reply(shim *sh, int i, uint32_t gen, uint16_t type,
		       uint32_t id, const void *p, size_t n)
{
	(void)sh;
	assert_int_equal(i, 0);
	assert_int_equal(gen, 7);
	answered.n++;
	answered.type = type;
	answered.id = id;
	answered.code = AL_OK;
	snprintf(answered.text, sizeof answered.text, "%.*s", (int)n,
		 (const char *)p);
}

void shim_client_error(shim *sh, int i, uint32_t gen, uint32_t id, al_code code,
		       const char *msg)
{
	(void)sh;
	(void)gen;
	assert_int_equal(i, 0);
	answered.n++;
	answered.type = AL_F_ERROR;
	answered.id = id;
	answered.code = code;
	snprintf(answered.text, sizeof answered.text, "%s", msg);
}

/* The gateway process, faked: the tests attach their gateway before
 * any request, so there is never a dormant one to start. */
int shim_gwproc_wake(shim_gwproc *g)
{
	(void)g;
	return -1;
}

static shim sh;
static int gw_fd; /* the fake gateway's end */
static al_frame_reader gw_in;

static int setup(void **state)
{
	(void)state;
	memset(&sh, 0, sizeof sh);
	memset(&answered, 0, sizeof answered);
	snprintf(sh.sb.id, sizeof sh.sb.id, "sbx1");
	snprintf(sh.sb.template_name, sizeof sh.sb.template_name, "minimal");
	snprintf(sh.sb.project, sizeof sh.sb.project, "default");
	sh.sb.metadata = json_tokener_parse("{\"team\":\"ml\"}");
	shim_netctl_init(&sh);
	al_frame_reader_init(&gw_in);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	gw_fd = sv[1];
	al_err err = {0};
	return shim_netctl_attach(&sh, sv[0], "10.200.0.1", 0, &err);
}

static int teardown(void **state)
{
	(void)state;
	shim_netctl_detach(&sh, "test over");
	close(gw_fd);
	al_frame_reader_free(&gw_in);
	al_sandbox_free_fields(&sh.sb);
	return 0;
}

/* The shim's loop, once: write what is queued, read what came. */
static void turn(void)
{
	if (sh.gw.fd >= 0)
		shim_netctl_event(&sh, POLLOUT);
}

/* The next GW_CONFIG at the gateway. */
static uint32_t gw_read_config(al_gw_config *c)
{
	turn();
	al_frame f;
	al_err err = {0};
	assert_int_equal(al_frame_recv(gw_fd, &gw_in, &f, al_now_ms() + 2000,
				       &err),
			 0);
	assert_int_equal(f.type, AL_F_GW_CONFIG);
	assert_int_equal(al_gw_config_unpack(f.payload, f.len, c, &err), 0);
	uint32_t id = f.id;
	al_frame_free(&f);
	return id;
}

static void gw_ack(uint32_t id, bool ok, const char *error)
{
	al_err err = {0};
	char *t = al_gw_ack_pack(ok, error, &err);
	assert_int_equal(al_frame_send(gw_fd, AL_F_GW_ACK, id, t, strlen(t),
				       &err),
			 0);
	free(t);
	shim_netctl_event(&sh, POLLIN);
}

static void request(const char *network_json)
{
	char payload[512];
	snprintf(payload, sizeof payload, "{\"network\":%s}", network_json);
	al_frame f = {.type = AL_F_NETWORK,
		      .id = 1,
		      .len = (uint32_t)strlen(payload),
		      .payload = (uint8_t *)payload};
	shim_netctl_request(&sh, 0, &f);
}

static void test_first_config_then_change(void **state)
{
	(void)state;
	al_gw_config c;
	uint32_t id = gw_read_config(&c);
	assert_string_equal(c.sandbox, "sbx1");
	assert_string_equal(c.project, "default");
	assert_string_equal(c.gateway, "10.200.0.1");
	assert_int_equal(c.n_metadata, 1);
	assert_int_equal(c.network.mode, AL_NET_ALLOWLIST);
	al_gw_config_free(&c);
	gw_ack(id, true, NULL);
	assert_int_equal(answered.n, 0); /* nobody asked for that one */
	assert_true(shim_netctl_attached(&sh));

	request("{\"mode\":\"open\",\"deny\":[\"Evil.example\"]}");
	assert_int_equal(answered.n, 0); /* not before the ACK */
	id = gw_read_config(&c);
	assert_int_equal(c.network.mode, AL_NET_OPEN);
	assert_string_equal(c.network.deny[0], "evil.example");
	al_gw_config_free(&c);
	assert_null(sh.sb.network);
	gw_ack(id, true, NULL);
	assert_int_equal(answered.n, 1);
	assert_int_equal(answered.type, AL_F_RESULT);
	assert_string_equal(answered.text, "{\"gateway\":true}");
	assert_non_null(sh.sb.network);
	assert_non_null(strstr(al_json_compact(sh.sb.network), "\"open\""));
}

static void test_refused_and_unanswered(void **state)
{
	(void)state;
	al_gw_config c;
	gw_ack(gw_read_config(&c), true, NULL);
	al_gw_config_free(&c);
	request("{\"mode\":\"open\"}");
	uint32_t id = gw_read_config(&c);
	al_gw_config_free(&c);
	/* One at a time. */
	request("{\"mode\":\"none\"}");
	assert_int_equal(answered.code, AL_ESTATE);
	gw_ack(id, false, "no thanks");
	assert_int_equal(answered.n, 2);
	assert_int_equal(answered.code, AL_EPROTO);
	assert_non_null(strstr(answered.text, "no thanks"));
	assert_null(sh.sb.network); /* unchanged */
	assert_true(shim_netctl_attached(&sh));
	/* No ACK at all: timed out, and the gateway is cut off. */
	request("{\"mode\":\"open\"}");
	gw_read_config(&c);
	al_gw_config_free(&c);
	assert_true(shim_netctl_timeout(&sh, al_now_ms()) > 0);
	shim_netctl_tick(&sh, al_now_ms() + SHIM_GW_ACK_MS + 1);
	assert_int_equal(answered.code, AL_ETIMEDOUT);
	assert_false(shim_netctl_attached(&sh));
}

static void test_protocol_break_detaches(void **state)
{
	(void)state;
	al_gw_config c;
	uint32_t id = gw_read_config(&c);
	al_gw_config_free(&c);
	al_err err = {0};
	/* An ACK for an id never sent. */
	char *t = al_gw_ack_pack(true, NULL, &err);
	al_frame_send(gw_fd, AL_F_GW_ACK, id + 5, t, strlen(t), &err);
	free(t);
	shim_netctl_event(&sh, POLLIN);
	assert_false(shim_netctl_attached(&sh));
}

static void test_no_gateway(void **state)
{
	(void)state;
	shim_netctl_detach(&sh, "gone");
	request("{\"mode\":\"allowlist\",\"allow\":[\"a.com\"]}");
	assert_int_equal(answered.code, AL_ESTATE);
	assert_null(sh.sb.network);
	request("{\"mode\":\"none\"}");
	assert_int_equal(answered.type, AL_F_RESULT);
	assert_string_equal(answered.text, "{\"gateway\":false}");
	assert_non_null(strstr(al_json_compact(sh.sb.network), "\"none\""));
	request("{\"mode\":\"nope\"}");
	assert_int_equal(answered.code, AL_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_first_config_then_change,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_and_unanswered,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_protocol_break_detaches,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_gateway, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
