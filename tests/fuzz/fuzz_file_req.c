/* Fuzz the payload unpackers of agentproto that take bytes from a
 * hostile peer: file, disk grow, IDENTITY, EXEC, STREAM_EXEC and STREAMS requests
 * (from the host, in the shim and the agent), ERROR and EXIT (from the
 * agent, in the shim, fcgi and the builder), SUSPEND's result (from the
 * shim, in fcgi). Whatever the
 * bytes, an unpack returns 0 with a well-formed result or -1 with an
 * error. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An accepted EXEC holds what its contract says, and packs and unpacks
 * to the same request. */
static void check_exec(const al_exec_msg *m)
{
	size_t n = json_object_array_length(m->cmd);
	if (n == 0 || n > AL_EXEC_ARGS_MAX ||
	    json_object_get_string_len(json_object_array_get_idx(m->cmd, 0)) ==
		    0 ||
	    (m->env != NULL &&
	     json_object_object_length(m->env) > AL_EXEC_ENV_MAX) ||
	    m->timeout_ms < 0 || m->timeout_ms > AL_EXEC_TIMEOUT_MS_MAX)
		abort();
	for (size_t i = 0; i < n; i++) {
		json_object *s = json_object_array_get_idx(m->cmd, i);
		if (!json_object_is_type(s, json_type_string) ||
		    strlen(json_object_get_string(s)) !=
			    (size_t)json_object_get_string_len(s))
			abort();
	}
	al_err err = {0};
	char *s = al_exec_pack(m, &err);
	al_exec_msg again;
	if (s == NULL || al_exec_unpack(s, strlen(s), &again, &err) < 0 ||
	    !json_object_equal(again.cmd, m->cmd) ||
	    (m->env != NULL && !json_object_equal(again.env, m->env)) ||
	    (m->cwd == NULL) != (again.cwd == NULL) ||
	    (m->cwd != NULL && strcmp(m->cwd, again.cwd) != 0) ||
	    (m->user == NULL) != (again.user == NULL) ||
	    (m->user != NULL && strcmp(m->user, again.user) != 0) ||
	    again.timeout_ms != m->timeout_ms ||
	    again.stdin_open != m->stdin_open)
		abort();
	free(s);
	al_exec_msg_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	al_file_req q;
	al_err err = {0}, got = {0};

	if (al_file_req_unpack(data, size, &q, &err) == 0) {
		size_t n = strnlen(q.path, sizeof q.path);
		if (n == sizeof q.path || q.path[0] != '/' || q.mode > 07777)
			abort();
		/* What was accepted packs and unpacks to itself. */
		char *s = al_file_req_pack(q.path, (int)q.mode, &err);
		al_file_req again;
		if (s == NULL ||
		    al_file_req_unpack(s, strlen(s), &again, &err) < 0 ||
		    strcmp(again.path, q.path) != 0 || again.mode != q.mode)
			abort();
		free(s);
	} else if (err.code == AL_OK) {
		abort();
	}
	al_suspend_msg su;
	err.code = AL_OK;
	if (al_suspend_unpack(data, size, &su, &err) == 0) {
		size_t n = strnlen(su.snapshot, sizeof su.snapshot);
		char *s = al_suspend_pack(&su, &err);
		al_suspend_msg again;
		if (n == 0 || n == sizeof su.snapshot || s == NULL ||
		    al_suspend_unpack(s, strlen(s), &again, &err) < 0 ||
		    strcmp(again.snapshot, su.snapshot) != 0 ||
		    again.memory != su.memory)
			abort();
		free(s);
	} else if (err.code == AL_OK) {
		abort();
	}
	err.code = AL_OK;
	if (al_suspend_result_unpack(data, size, &su, &err) == 0) {
		if (su.bytes > INT64_MAX)
			abort();
	} else if (err.code == AL_OK) {
		abort();
	}
	al_disk_grow g;
	err.code = AL_OK;
	if (al_disk_grow_unpack(data, size, &g, &err) == 0) {
		if (strnlen(g.path, sizeof g.path) == sizeof g.path ||
		    g.path[0] != '/' || g.bytes == 0 || g.bytes > INT64_MAX)
			abort();
	} else if (err.code == AL_OK) {
		abort();
	}
	al_vm_identity id;
	err.code = AL_OK;
	if (al_vm_identity_unpack(data, size, &id, &err) == 0) {
		/* Every string NUL-terminated in its field, the clock in
		 * range; it packs and unpacks to itself. */
		if (strnlen(id.hostname, sizeof id.hostname) ==
			    sizeof id.hostname ||
		    strnlen(id.entropy, sizeof id.entropy) ==
			    sizeof id.entropy ||
		    strnlen(id.mac, sizeof id.mac) == sizeof id.mac ||
		    strnlen(id.net, sizeof id.net) == sizeof id.net ||
		    id.time_ms <= 0 || id.time_ms > 253402300799999LL)
			abort();
		char *s = al_vm_identity_pack(&id, &err);
		al_vm_identity again;
		if (s == NULL ||
		    al_vm_identity_unpack(s, strlen(s), &again, &err) < 0 ||
		    memcmp(&again, &id, sizeof id) != 0)
			abort();
		free(s);
	} else if (err.code == AL_OK) {
		abort();
	}
	al_exec_msg m;
	err.code = AL_OK;
	if (al_exec_unpack(data, size, &m, &err) == 0)
		check_exec(&m);
	else if (err.code == AL_OK || m.root != NULL)
		abort();
	al_exec_msg_free(&m);
	if (al_error_unpack(data, size, &got, &err) == 0 &&
	    strnlen(got.msg, sizeof got.msg) == sizeof got.msg)
		abort();

	al_exit_msg x;
	err.code = AL_OK;
	if (al_exit_unpack(data, size, &x, &err) == 0) {
		/* Exactly one of a code and a signal name; it packs and
		 * unpacks to itself. */
		if ((x.exit_code < 0) == (x.signal[0] == '\0') ||
		    x.exit_code > 255 ||
		    strnlen(x.signal, sizeof x.signal) == sizeof x.signal)
			abort();
		al_exit_msg again;
		char *s = al_exit_pack(&x, &err);
		if (s == NULL ||
		    al_exit_unpack(s, strlen(s), &again, &err) < 0 ||
		    again.exit_code != x.exit_code ||
		    strcmp(again.signal, x.signal) != 0 ||
		    again.timed_out != x.timed_out)
			abort();
		free(s);
	} else if (err.code == AL_OK) {
		abort();
	}

	al_stream_exec_msg se;
	err.code = AL_OK;
	if (al_stream_exec_unpack(data, size, &se, &err) == 0) {
		if (!al_hex_id_valid(se.lease, AL_STREAM_LEASE_LEN))
			abort();
		check_exec(&se.exec);
	} else if (err.code == AL_OK || se.exec.root != NULL) {
		abort();
	}
	al_stream_exec_free(&se);

	al_streams_msg sm;
	err.code = AL_OK;
	if (al_streams_unpack(data, size, &sm, &err) == 0) {
		if (sm.n > AL_STREAMS_MAX)
			abort();
		for (size_t i = 0; i < sm.n; i++)
			if (!al_hex_id_valid(sm.lease[i], AL_STREAM_LEASE_LEN))
				abort();
	} else if (err.code == AL_OK || sm.lease != NULL) {
		abort();
	}
	al_streams_msg_free(&sm);
	char token[AL_STREAM_TOKEN_LEN + 1];
	if (al_stream_token_unpack(data, size, token, &err) == 0 &&
	    !al_hex_id_valid(token, AL_STREAM_TOKEN_LEN))
		abort();
	return 0;
}
