/* Talking to a vm sandbox's agent from a unit test, as the shim would:
 * its HELLO, an EXEC of "sh -c", a request answered by RESULT. Include
 * after cmocka.h, in a test that defines `ready` (its group setup could
 * make a VM) and `why_skip` (why not) before it uses NEED_VM(). */
#ifndef AL_TEST_VM_AGENT_H
#define AL_TEST_VM_AGENT_H

#include <string.h>

#include <json-c/json.h>

#include "base/log.h"
#include "proto/agentproto.h"

/* Skip a test that needs a VM where none can run here, saying why. */
#define NEED_VM()                                                              \
	do {                                                                   \
		if (!ready) {                                                  \
			fprintf(stderr, "skipped: %s\n", why_skip);            \
			skip();                                                \
		}                                                              \
	} while (0)

/* How long a test waits for an answer it expects: generous, since TCG on
 * a loaded 2-core host can take seconds for what KVM does in milliseconds
 * (these tests check behaviour, bench/ measures speed). */
#define ANSWER_MS 60000

static void expect_hello(int fd, al_frame_reader *r)
{
	al_frame f;
	al_err err = {0};
	int rc = al_frame_recv(fd, r, &f, al_now_ms() + ANSWER_MS, &err);
	if (rc < 0)
		fail_msg("no HELLO: %s", err.msg);
	assert_int_equal(f.type, AL_F_HELLO);
	assert_int_equal(f.id, 0);
	al_frame_free(&f);
}

/* Run sh -c in the sandbox; stdout into out; returns the exit code. */
static int vm_exec(int fd, al_frame_reader *r, uint32_t id, const char *sh,
		   char *out, size_t outlen)
{
	json_object *req = json_object_new_object();
	json_object *cmd = json_object_new_array();
	json_object_array_add(cmd, json_object_new_string("sh"));
	json_object_array_add(cmd, json_object_new_string("-c"));
	json_object_array_add(cmd, json_object_new_string(sh));
	json_object_object_add(req, "cmd", cmd);
	json_object_object_add(req, "stdin", json_object_new_boolean(0));
	const char *s = json_object_to_json_string(req);
	al_err err = {0};
	if (al_frame_send(fd, AL_F_EXEC, id, s, strlen(s), &err) < 0)
		fail_msg("send EXEC: %s", err.msg);
	json_object_put(req);
	size_t have = 0;
	out[0] = '\0';
	for (;;) {
		al_frame f;
		if (al_frame_recv(fd, r, &f, al_now_ms() + ANSWER_MS, &err) < 0)
			fail_msg("exec %s: %s", sh, err.msg);
		assert_int_equal(f.id, id);
		if (f.type == AL_F_STDOUT && have + f.len < outlen) {
			memcpy(out + have, f.payload, f.len);
			have += f.len;
			out[have] = '\0';
		}
		if (f.type == AL_F_ERROR)
			fail_msg("exec %s: %s", sh, (char *)f.payload);
		if (f.type == AL_F_EXIT) {
			json_object *o = json_tokener_parse((char *)f.payload);
			json_object *v = NULL;
			int code = -1;
			if (json_object_object_get_ex(o, "exit_code", &v))
				code = json_object_get_int(v);
			json_object_put(o);
			al_frame_free(&f);
			return code;
		}
		al_frame_free(&f);
	}
}

/* Send a request of type with body "{}" and wait for its RESULT. */
__attribute__((unused)) static void vm_request(int fd, al_frame_reader *r,
					       uint16_t type, uint32_t id)
{
	al_err err = {0};
	if (al_frame_send(fd, type, id, "{}", 2, &err) < 0)
		fail_msg("send %s: %s", al_frame_type_name(type), err.msg);
	for (;;) {
		al_frame f;
		if (al_frame_recv(fd, r, &f, al_now_ms() + ANSWER_MS, &err) < 0)
			fail_msg("no answer to %s: %s",
				 al_frame_type_name(type), err.msg);
		int mine = f.id == id;
		uint16_t t = f.type;
		al_frame_free(&f);
		if (!mine)
			continue;
		if (t != AL_F_RESULT)
			fail_msg("%s answered %s", al_frame_type_name(type),
				 al_frame_type_name(t));
		return;
	}
}

#endif
