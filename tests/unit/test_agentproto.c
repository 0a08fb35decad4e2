/* Frame codec: what a peer sees on the wire and what a hostile peer can
 * make the decoder do. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/agentproto.h"

static void hdr(uint8_t *h, uint32_t magic, uint16_t type, uint16_t flags,
		uint32_t id, uint32_t len)
{
	h[0] = (uint8_t)(magic >> 24);
	h[1] = (uint8_t)(magic >> 16);
	h[2] = (uint8_t)(magic >> 8);
	h[3] = (uint8_t)magic;
	h[4] = (uint8_t)(type >> 8);
	h[5] = (uint8_t)type;
	h[6] = (uint8_t)(flags >> 8);
	h[7] = (uint8_t)flags;
	h[8] = (uint8_t)(id >> 24);
	h[9] = (uint8_t)(id >> 16);
	h[10] = (uint8_t)(id >> 8);
	h[11] = (uint8_t)id;
	h[12] = (uint8_t)(len >> 24);
	h[13] = (uint8_t)(len >> 16);
	h[14] = (uint8_t)(len >> 8);
	h[15] = (uint8_t)len;
}

static void test_encode_layout(void **state)
{
	(void)state;
	al_buf b;
	al_err err;
	al_buf_init(&b, 0);
	assert_int_equal(al_frame_encode(&b, AL_F_STDOUT, 0x01020304, "hi", 2,
					 &err),
			 0);
	static const uint8_t want[] = {'A', 'L', 'F', '1', 0, 5, 0, 0,	 1,
				       2,   3,	 4,   0,   0, 0, 2, 'h', 'i'};
	assert_int_equal(al_buf_pending(&b), sizeof want);
	assert_memory_equal(b.data + b.off, want, sizeof want);
	al_buf_free(&b);
}

static void test_round_trip(void **state)
{
	(void)state;
	al_buf b;
	al_err err;
	al_frame_reader r;
	al_frame f;
	al_buf_init(&b, 0);
	al_frame_reader_init(&r);

	const char *json = "{\"cmd\":[\"true\"]}";
	assert_int_equal(al_frame_encode(&b, AL_F_EXEC, 7, json, strlen(json),
					 &err),
			 0);
	assert_int_equal(al_frame_encode(&b, AL_F_FILE_END, 8, NULL, 0, &err),
			 0);
	uint8_t bin[300];
	for (size_t i = 0; i < sizeof bin; i++)
		bin[i] = (uint8_t)i;
	assert_int_equal(al_frame_encode(&b, AL_F_STDIN, 9, bin, sizeof bin,
					 &err),
			 0);
	assert_int_equal(al_frame_encode(&b, AL_F_DESTROY, 10, "{}", 2, &err),
			 0);
	assert_int_equal(al_frame_reader_feed(&r, b.data + b.off,
					      al_buf_pending(&b), &err),
			 0);

	assert_int_equal(al_frame_next(&r, &f, &err), 1);
	assert_int_equal(f.type, AL_F_EXEC);
	assert_int_equal(f.id, 7);
	assert_int_equal(f.len, strlen(json));
	assert_string_equal((char *)f.payload, json);
	al_frame_free(&f);

	assert_int_equal(al_frame_next(&r, &f, &err), 1);
	assert_int_equal(f.type, AL_F_FILE_END);
	assert_int_equal(f.id, 8);
	assert_int_equal(f.len, 0);
	assert_non_null(f.payload);
	assert_int_equal(f.payload[0], '\0');
	al_frame_free(&f);

	assert_int_equal(al_frame_next(&r, &f, &err), 1);
	assert_int_equal(f.type, AL_F_STDIN);
	assert_int_equal(f.len, sizeof bin);
	assert_memory_equal(f.payload, bin, sizeof bin);
	assert_int_equal(f.payload[sizeof bin], '\0');
	al_frame_free(&f);

	assert_int_equal(al_frame_next(&r, &f, &err), 1);
	assert_int_equal(f.type, AL_F_DESTROY);
	assert_int_equal(f.id, 10);
	al_frame_free(&f);

	assert_int_equal(al_frame_next(&r, &f, &err), 0);
	al_frame_reader_free(&r);
	al_buf_free(&b);
}

static void test_split_bytes(void **state)
{
	(void)state;
	al_buf b;
	al_err err;
	al_frame_reader r;
	al_frame f;
	al_buf_init(&b, 0);
	al_frame_reader_init(&r);
	assert_int_equal(al_frame_encode(&b, AL_F_STDOUT, 1, "abcdef", 6, &err),
			 0);
	assert_int_equal(al_frame_encode(&b, AL_F_STDERR, 2, "xyz", 3, &err),
			 0);
	size_t total = al_buf_pending(&b);
	int got = 0;
	for (size_t i = 0; i < total; i++) {
		assert_int_equal(al_frame_reader_feed(&r, b.data + b.off + i, 1,
						      &err),
				 0);
		int rc = al_frame_next(&r, &f, &err);
		assert_int_not_equal(rc, -1);
		if (rc == 1) {
			got++;
			if (got == 1) {
				/* Complete exactly at its last byte. */
				assert_int_equal(i, AL_FRAME_HDR_LEN + 6 - 1);
				assert_int_equal(f.type, AL_F_STDOUT);
				assert_string_equal((char *)f.payload,
						    "abcdef");
			} else {
				assert_int_equal(i, total - 1);
				assert_int_equal(f.type, AL_F_STDERR);
				assert_string_equal((char *)f.payload, "xyz");
			}
			al_frame_free(&f);
		}
	}
	assert_int_equal(got, 2);
	al_frame_reader_free(&r);
	al_buf_free(&b);
}

static int next_after(const uint8_t *p, size_t n, al_err *err,
		      al_frame_reader *r)
{
	al_frame f;
	al_frame_reader_init(r);
	assert_int_equal(al_frame_reader_feed(r, p, n, err), 0);
	int rc = al_frame_next(r, &f, err);
	if (rc == 1)
		al_frame_free(&f);
	return rc;
}

static void test_bad_magic(void **state)
{
	(void)state;
	uint8_t h[AL_FRAME_HDR_LEN];
	al_err err;
	al_frame_reader r;

	hdr(h, 0x414c4632, AL_F_EXEC, 0, 1, 0);
	assert_int_equal(next_after(h, sizeof h, &err, &r), -1);
	assert_int_equal(err.code, AL_EPROTO);
	al_frame_reader_free(&r);

	/* Rejected from the first wrong byte, without waiting for more. */
	assert_int_equal(next_after((const uint8_t *)"GET ", 2, &err, &r), -1);
	assert_int_equal(err.code, AL_EPROTO);
	al_frame_reader_free(&r);

	/* A correct prefix just waits. */
	assert_int_equal(next_after((const uint8_t *)"ALF", 3, &err, &r), 0);
	al_frame_reader_free(&r);
}

static void test_flags_rejected(void **state)
{
	(void)state;
	uint8_t h[AL_FRAME_HDR_LEN];
	al_err err;
	al_frame_reader r;
	hdr(h, AL_FRAME_MAGIC, AL_F_EXEC, 0x0100, 1, 0);
	assert_int_equal(next_after(h, sizeof h, &err, &r), -1);
	assert_int_equal(err.code, AL_EPROTO);
	al_frame_reader_free(&r);
}

static void test_oversized_rejected_before_alloc(void **state)
{
	(void)state;
	uint8_t h[AL_FRAME_HDR_LEN];
	al_err err;
	al_frame_reader r;

	hdr(h, AL_FRAME_MAGIC, AL_F_STDIN, 0, 1, AL_FRAME_MAX_PAYLOAD + 1);
	assert_int_equal(next_after(h, sizeof h, &err, &r), -1);
	assert_int_equal(err.code, AL_EPROTO);
	/* Nothing was reserved for the claimed payload. */
	assert_true(r.in.cap < 64 * 1024);
	al_frame_reader_free(&r);

	hdr(h, AL_FRAME_MAGIC, AL_F_STDIN, 0, 1, 0xffffffffu);
	assert_int_equal(next_after(h, sizeof h, &err, &r), -1);
	assert_int_equal(err.code, AL_EPROTO);
	al_frame_reader_free(&r);

	/* The maximum itself is legal: it waits for the payload, and still
	 * has not allocated room for it. */
	hdr(h, AL_FRAME_MAGIC, AL_F_STDIN, 0, 1, AL_FRAME_MAX_PAYLOAD);
	assert_int_equal(next_after(h, sizeof h, &err, &r), 0);
	assert_true(r.in.cap < 64 * 1024);
	al_frame_reader_free(&r);
}

static void test_unknown_type(void **state)
{
	(void)state;
	static const uint16_t bad[] = {0,  16, 31,    47,    49,
				       58, 61, 0x100, 0xffff};
	static const uint16_t good[] = {1,  8,	15, 32, 33, 34, 35, 36, 37,
					38, 39, 40, 41, 42, 43, 44, 50, 51,
					52, 53, 54, 55, 56, 57, 59, 60};
	uint8_t h[AL_FRAME_HDR_LEN];
	al_err err;
	al_frame_reader r;

	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		hdr(h, AL_FRAME_MAGIC, bad[i], 0, 1, 0);
		assert_int_equal(next_after(h, sizeof h, &err, &r), -1);
		assert_int_equal(err.code, AL_EPROTO);
		al_frame_reader_free(&r);
		assert_string_equal(al_frame_type_name(bad[i]), "UNKNOWN");
	}
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		hdr(h, AL_FRAME_MAGIC, good[i], 0, 1, 0);
		assert_int_equal(next_after(h, sizeof h, &err, &r), 1);
		al_frame_reader_free(&r);
	}
	assert_string_equal(al_frame_type_name(AL_F_FILE_WRITE), "FILE_WRITE");
	assert_string_equal(al_frame_type_name(AL_F_IDENTITY), "IDENTITY");
	assert_string_equal(al_frame_type_name(AL_F_DISK_GROW), "DISK_GROW");
	assert_string_equal(al_frame_type_name(AL_F_STREAMS), "STREAMS");
}

static void test_encode_limits(void **state)
{
	(void)state;
	al_buf b;
	al_err err;
	al_buf_init(&b, 0);
	assert_int_equal(al_frame_encode(&b, AL_F_STDOUT, 1, "",
					 AL_FRAME_MAX_PAYLOAD + 1, &err),
			 -1);
	assert_int_equal(err.code, AL_ETOOBIG);
	assert_int_equal(al_frame_encode(&b, 99, 1, "x", 1, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_int_equal(al_buf_pending(&b), 0);

	/* A full queue refuses a whole frame and keeps the stream intact. */
	al_buf_free(&b);
	al_buf_init(&b, 40);
	assert_int_equal(al_frame_encode(&b, AL_F_STDOUT, 1, "0123456789", 10,
					 &err),
			 0);
	assert_int_equal(al_frame_encode(&b, AL_F_STDOUT, 2, "0123456789", 10,
					 &err),
			 -1);
	assert_int_equal(err.code, AL_ETOOBIG);
	assert_int_equal(al_buf_pending(&b), AL_FRAME_HDR_LEN + 10);
	al_buf_free(&b);
}

static void test_buf_compacts(void **state)
{
	(void)state;
	al_buf b;
	al_err err;
	al_frame_reader r;
	al_frame f;
	uint8_t payload[3000];
	al_buf_init(&b, 0);
	al_frame_reader_init(&r);
	memset(payload, 'x', sizeof payload);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(al_frame_encode(&b, AL_F_STDOUT, (uint32_t)i,
						 payload, sizeof payload, &err),
				 0);
	/* Feed in chunks that never align with frames, so the reader always
	 * holds a partial frame behind consumed ones: without compaction
	 * its buffer would grow to the whole stream. */
	size_t total = al_buf_pending(&b), pos = 0;
	uint32_t want = 0;
	while (pos < total) {
		size_t n = total - pos < 2000 ? total - pos : 2000;
		assert_int_equal(al_frame_reader_feed(&r, b.data + pos, n,
						      &err),
				 0);
		pos += n;
		while (al_frame_next(&r, &f, &err) == 1) {
			assert_int_equal(f.id, want++);
			assert_int_equal(f.len, sizeof payload);
			al_frame_free(&f);
		}
	}
	assert_int_equal(want, 1000);
	assert_true(r.in.cap <= 16384);
	al_frame_reader_free(&r);
	al_buf_free(&b);
}

static void test_flush_would_block(void **state)
{
	(void)state;
	int sv[2];
	al_buf b;
	al_err err;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	al_buf_init(&b, 0);
	static uint8_t big[4 << 20];
	assert_int_equal(al_buf_append(&b, big, sizeof big, &err), 0);
	assert_int_equal(al_buf_flush(&b, sv[0], &err), AL_AGAIN);
	assert_true(al_buf_pending(&b) > 0 && al_buf_pending(&b) < sizeof big);
	close(sv[1]);
	/* Peer gone: an error, not a SIGPIPE. */
	assert_int_equal(al_buf_flush(&b, sv[0], &err), -1);
	close(sv[0]);
	al_buf_free(&b);
}

/* A child sends frames with al_frame_send (on a non-blocking fd when
 * nonblock) while the parent receives them with al_frame_recv. */
static void send_recv(int nonblock)
{
	int sv[2];
	al_err err;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	size_t big_len = AL_FRAME_MAX_PAYLOAD;
	uint8_t *big = malloc(big_len);
	assert_non_null(big);
	for (size_t i = 0; i < big_len; i++)
		big[i] = (uint8_t)(i * 7);

	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		if (nonblock)
			fcntl(sv[1], F_SETFL, O_NONBLOCK);
		int bad = 0;
		for (int i = 0; i < 3; i++)
			bad |= al_frame_send(sv[1], AL_F_FILE_DATA,
					     (uint32_t)i + 1, big, big_len,
					     &err);
		bad |= al_frame_send(sv[1], AL_F_FILE_END, 4, NULL, 0, &err);
		_exit(bad != 0 ? 1 : 0);
	}
	close(sv[1]);
	al_frame_reader r;
	al_frame f;
	al_frame_reader_init(&r);
	/* Let the child fill the socket first so it must wait. */
	usleep(50 * 1000);
	for (uint32_t i = 1; i <= 3; i++) {
		assert_int_equal(al_frame_recv(sv[0], &r, &f,
					       al_now_ms() + 10000, &err),
				 0);
		assert_int_equal(f.type, AL_F_FILE_DATA);
		assert_int_equal(f.id, i);
		assert_int_equal(f.len, big_len);
		assert_memory_equal(f.payload, big, big_len);
		al_frame_free(&f);
	}
	assert_int_equal(al_frame_recv(sv[0], &r, &f, 0, &err), 0);
	assert_int_equal(f.type, AL_F_FILE_END);
	al_frame_free(&f);
	/* Then the peer is gone, cleanly between frames. */
	assert_int_equal(al_frame_recv(sv[0], &r, &f, al_now_ms() + 5000, &err),
			 -1);
	assert_int_equal(err.code, AL_EUNAVAIL);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	al_frame_reader_free(&r);
	close(sv[0]);
	free(big);
}

static void test_send_recv_blocking(void **state)
{
	(void)state;
	send_recv(0);
}

static void test_send_recv_nonblocking(void **state)
{
	(void)state;
	send_recv(1);
}

static void test_recv_deadline(void **state)
{
	(void)state;
	int sv[2];
	al_err err;
	al_frame_reader r;
	al_frame f;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	al_frame_reader_init(&r);
	/* Half a header arrives, then nothing. */
	assert_int_equal(write(sv[1], "ALF1", 4), 4);
	int64_t t0 = al_now_ms();
	assert_int_equal(al_frame_recv(sv[0], &r, &f, t0 + 150, &err), -1);
	int64_t dt = al_now_ms() - t0;
	assert_int_equal(err.code, AL_ETIMEDOUT);
	assert_true(dt >= 140 && dt < 2000);
	al_frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}

static void test_recv_eof_mid_frame(void **state)
{
	(void)state;
	int sv[2];
	al_err err;
	al_frame_reader r;
	al_frame f;
	uint8_t h[AL_FRAME_HDR_LEN + 3];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	hdr(h, AL_FRAME_MAGIC, AL_F_STDOUT, 0, 1, 10);
	memcpy(h + AL_FRAME_HDR_LEN, "abc", 3);
	assert_int_equal(write(sv[1], h, sizeof h), (ssize_t)sizeof h);
	close(sv[1]);
	al_frame_reader_init(&r);
	assert_int_equal(al_frame_recv(sv[0], &r, &f, al_now_ms() + 5000, &err),
			 -1);
	assert_int_equal(err.code, AL_EPROTO);
	al_frame_reader_free(&r);
	close(sv[0]);
}

static void test_recv_violation(void **state)
{
	(void)state;
	int sv[2];
	al_err err;
	al_frame_reader r;
	al_frame f;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[1], "HTTP/1.1 200 OK\r\n", 17), 17);
	al_frame_reader_init(&r);
	assert_int_equal(al_frame_recv(sv[0], &r, &f, al_now_ms() + 5000, &err),
			 -1);
	assert_int_equal(err.code, AL_EPROTO);
	al_frame_reader_free(&r);
	close(sv[0]);
	close(sv[1]);
}

/* A send into a peer that takes nothing gives up at its deadline. */
static void test_send_until_deadline(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
				    sv),
			 0);
	static uint8_t chunk[AL_FRAME_MAX_PAYLOAD];
	al_err err = {0};
	int rc = 0;
	int64_t t0 = al_now_ms();
	/* The socket buffer fills within a few frames; then the wait. */
	for (int i = 0; i < 64 && rc == 0; i++)
		rc = al_frame_send_until(sv[0], AL_F_FILE_DATA, 1, chunk,
					 sizeof chunk, al_now_ms() + 100, &err);
	assert_int_equal(rc, -1);
	assert_int_equal(err.code, AL_ETIMEDOUT);
	assert_true(al_now_ms() - t0 < 5000);
	close(sv[0]);
	close(sv[1]);
}

static void test_file_req_pack_unpack(void **state)
{
	(void)state;
	al_err err = {0};
	al_file_req q;
	char *s = al_file_req_pack("/root/a \"b\"", 0600, &err);
	assert_non_null(s);
	assert_int_equal(al_file_req_unpack(s, strlen(s), &q, &err), 0);
	assert_string_equal(q.path, "/root/a \"b\"");
	assert_int_equal(q.mode, 0600);
	free(s);
	s = al_file_req_pack("/x", -1, &err);
	assert_non_null(s);
	assert_int_equal(al_file_req_unpack(s, strlen(s), &q, &err), 0);
	assert_int_equal(q.mode, AL_FILE_MODE_DEFAULT);
	free(s);

	static const struct {
		const char *in;
		al_code code;
	} bad[] = {
		{"", AL_EINVAL},
		{"[]", AL_EINVAL},
		{"{\"path\":\"/x\"} junk", AL_EINVAL},
		{"{}", AL_EINVAL},
		{"{\"path\":7}", AL_EINVAL},
		{"{\"path\":\"/a\\u0000b\"}", AL_EINVAL},
		{"{\"path\":\"rel\"}", AL_EPATH},
		{"{\"path\":\"\"}", AL_EPATH},
		{"{\"path\":\"/x\",\"mode\":\"644\"}", AL_EINVAL},
		{"{\"path\":\"/x\",\"mode\":4096}", AL_EINVAL},
		{"{\"path\":\"/x\",\"mode\":-1}", AL_EINVAL},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err.code = AL_OK;
		assert_int_equal(al_file_req_unpack(bad[i].in,
						    strlen(bad[i].in), &q,
						    &err),
				 -1);
		assert_int_equal(err.code, bad[i].code);
	}
	/* A path that fills the field leaves no room for its NUL. */
	char *longp = malloc(AL_FILE_PATH_MAX + 32);
	assert_non_null(longp);
	int n = snprintf(longp, AL_FILE_PATH_MAX + 32, "{\"path\":\"/");
	memset(longp + n, 'a', AL_FILE_PATH_MAX - 1);
	strcpy(longp + n + AL_FILE_PATH_MAX - 1, "\"}");
	assert_int_equal(al_file_req_unpack(longp, strlen(longp), &q, &err),
			 -1);
	assert_int_equal(err.code, AL_EPATH);
	free(longp);
}

static void test_disk_grow_pack_unpack(void **state)
{
	(void)state;
	al_err err = {0};
	al_disk_grow g;
	char *s = al_disk_grow_pack("/", 8192ull << 20, &err);
	assert_non_null(s);
	assert_int_equal(al_disk_grow_unpack(s, strlen(s), &g, &err), 0);
	assert_string_equal(g.path, "/");
	assert_true(g.bytes == 8192ull << 20);
	free(s);

	static const struct {
		const char *in;
		al_code code;
	} bad[] = {
		{"", AL_EINVAL},
		{"{}", AL_EINVAL},
		{"{\"path\":\"/\"}", AL_EINVAL},
		{"{\"path\":\"/\",\"bytes\":0}", AL_EINVAL},
		{"{\"path\":\"/\",\"bytes\":-4096}", AL_EINVAL},
		{"{\"path\":\"/\",\"bytes\":\"4096\"}", AL_EINVAL},
		{"{\"path\":\"/\",\"bytes\":1.5}", AL_EINVAL},
		{"{\"bytes\":4096}", AL_EINVAL},
		{"{\"path\":\"rel\",\"bytes\":4096}", AL_EPATH},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err.code = AL_OK;
		assert_int_equal(al_disk_grow_unpack(bad[i].in,
						     strlen(bad[i].in), &g,
						     &err),
				 -1);
		assert_int_equal(err.code, bad[i].code);
	}
}

static void test_exec_pack_unpack(void **state)
{
	(void)state;
	al_err err = {0};
	json_object *cmd =
		json_tokener_parse("[\"sh\",\"-c\",\"echo \\\"$X\\\"\"]");
	json_object *env = json_tokener_parse("{\"X\":\"a=b\",\"Y\":\"\"}");
	assert_non_null(cmd);
	assert_non_null(env);
	al_exec_msg in = {
		.cmd = cmd,
		.env = env,
		.cwd = "/srv/app",
		.user = "app:staff",
		.timeout_ms = 1500,
		.stdin_open = 1,
		.kill_on_exit = 1,
	};
	char *s = al_exec_pack(&in, &err);
	assert_non_null(s);
	al_exec_msg m;
	assert_int_equal(al_exec_unpack(s, strlen(s), &m, &err), 0);
	free(s);
	assert_int_equal(json_object_array_length(m.cmd), 3);
	assert_string_equal(
		json_object_get_string(json_object_array_get_idx(m.cmd, 2)),
		"echo \"$X\"");
	json_object *v = NULL;
	assert_true(json_object_object_get_ex(m.env, "X", &v));
	assert_string_equal(json_object_get_string(v), "a=b");
	assert_int_equal(json_object_object_length(m.env), 2);
	assert_string_equal(m.cwd, "/srv/app");
	assert_string_equal(m.user, "app:staff");
	assert_int_equal(m.timeout_ms, 1500);
	assert_int_equal(m.stdin_open, 1);
	assert_int_equal(m.kill_on_exit, 1);
	al_exec_msg_free(&m);
	assert_null(m.root);

	/* What is left out comes back unset. */
	al_exec_msg bare = {.cmd = cmd};
	s = al_exec_pack(&bare, &err);
	assert_non_null(s);
	assert_int_equal(al_exec_unpack(s, strlen(s), &m, &err), 0);
	free(s);
	assert_null(m.env);
	assert_null(m.cwd);
	assert_null(m.user);
	assert_int_equal(m.timeout_ms, 0);
	assert_int_equal(m.stdin_open, 0);
	assert_int_equal(m.kill_on_exit, 0);
	al_exec_msg_free(&m);
	json_object_put(cmd);
	json_object_put(env);

	static const char *const bad[] = {
		"",
		"[]",
		"{\"cmd\":[\"true\"]} junk",
		"{}",
		"{\"cmd\":\"true\"}",
		"{\"cmd\":[]}",
		"{\"cmd\":[\"\"]}",
		"{\"cmd\":[\"true\",7]}",
		"{\"cmd\":[\"a\\u0000b\"]}",
		"{\"cmd\":[\"true\"],\"env\":[]}",
		"{\"cmd\":[\"true\"],\"env\":{\"\":\"x\"}}",
		"{\"cmd\":[\"true\"],\"env\":{\"A=B\":\"x\"}}",
		"{\"cmd\":[\"true\"],\"env\":{\"A\":1}}",
		"{\"cmd\":[\"true\"],\"env\":{\"A\":\"x\\u0000\"}}",
		"{\"cmd\":[\"true\"],\"cwd\":1}",
		"{\"cmd\":[\"true\"],\"user\":[\"root\"]}",
		"{\"cmd\":[\"true\"],\"stdin\":1}",
		"{\"cmd\":[\"true\"],\"kill_on_exit\":1}",
		"{\"cmd\":[\"true\"],\"kill_on_exit\":\"yes\"}",
		"{\"cmd\":[\"true\"],\"timeout_ms\":-1}",
		"{\"cmd\":[\"true\"],\"timeout_ms\":1.5}",
		"{\"cmd\":[\"true\"],\"timeout_ms\":8640000001}",
		"{\"cmd\":[\"true\"],\"timeout_ms\":99999999999999999999}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err.code = AL_OK;
		assert_int_equal(al_exec_unpack(bad[i], strlen(bad[i]), &m,
						&err),
				 -1);
		assert_int_equal(err.code, AL_EINVAL);
		assert_null(m.root);
		assert_null(m.cmd);
	}
	/* The largest timeout is taken. */
	const char *max = "{\"cmd\":[\"true\"],\"timeout_ms\":8640000000}";
	assert_int_equal(al_exec_unpack(max, strlen(max), &m, &err), 0);
	assert_int_equal(m.timeout_ms, AL_EXEC_TIMEOUT_MS_MAX);
	al_exec_msg_free(&m);
}

static void test_error_pack_unpack(void **state)
{
	(void)state;
	al_err err = {0}, got = {0};
	char *s = al_error_pack(AL_ENOENT, "no \"such\" file", &err);
	assert_non_null(s);
	assert_int_equal(al_error_unpack(s, strlen(s), &got, &err), 0);
	assert_int_equal(got.code, AL_ENOENT);
	assert_string_equal(got.msg, "no \"such\" file");
	free(s);
	static const char unknown[] = "{\"code\":\"what\"}";
	assert_int_equal(al_error_unpack(unknown, strlen(unknown), &got, &err),
			 0);
	assert_int_equal(got.code, AL_EINTERNAL);
	static const char bad[] = "{\"code\":1}";
	assert_int_equal(al_error_unpack(bad, strlen(bad), &got, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	s = al_file_result_pack(209715200, &err);
	assert_non_null(s);
	assert_string_equal(s, "{\"bytes\":209715200}");
	free(s);
}

static void test_exit_pack_unpack(void **state)
{
	(void)state;
	al_err err = {0};
	al_exit_msg m, in = {.exit_code = 7};
	char *s = al_exit_pack(&in, &err);
	assert_string_equal(s, "{\"exit_code\":7}");
	assert_int_equal(al_exit_unpack(s, strlen(s), &m, &err), 0);
	assert_int_equal(m.exit_code, 7);
	assert_string_equal(m.signal, "");
	free(s);
	al_exit_msg k = {.exit_code = -1, .signal = "SIGKILL", .timed_out = 1};
	s = al_exit_pack(&k, &err);
	assert_string_equal(s, "{\"signal\":\"SIGKILL\",\"timed_out\":true}");
	assert_int_equal(al_exit_unpack(s, strlen(s), &m, &err), 0);
	assert_int_equal(m.exit_code, -1);
	assert_string_equal(m.signal, "SIGKILL");
	assert_true(m.timed_out);
	free(s);
	static const char *const bad[] = {
		"{}",
		"{\"exit_code\":256}",
		"{\"exit_code\":-1}",
		"{\"exit_code\":\"1\"}",
		"{\"exit_code\":0,\"signal\":\"SIGKILL\"}",
		"{\"signal\":\"KILL\"}",
		"{\"signal\":\"SIGkill\"}",
		"{\"signal\":\"SIGAAAAAAAAAAAAAAAA\"}",
		"{\"signal\":\"SIGTERM\",\"timed_out\":1}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(al_exit_unpack(bad[i], strlen(bad[i]), &m,
						&err),
				 -1);
		assert_int_equal(err.code, AL_EINVAL);
	}
}

static void test_stream_exec_pack_unpack(void **state)
{
	(void)state;
	al_err err = {0};
	json_object *cmd = json_tokener_parse("[\"sleep\",\"1\"]");
	al_exec_msg in = {.cmd = cmd, .timeout_ms = 5000};
	char lease[AL_STREAM_LEASE_LEN + 1];
	assert_int_equal(al_hex_random(lease, AL_STREAM_LEASE_LEN, &err), 0);
	assert_true(al_hex_id_valid(lease, AL_STREAM_LEASE_LEN));
	char *s = al_stream_exec_pack(&in, lease, 1, &err);
	assert_non_null(s);
	al_stream_exec_msg m;
	assert_int_equal(al_stream_exec_unpack(s, strlen(s), &m, &err), 0);
	assert_string_equal(m.lease, lease);
	assert_true(m.background);
	assert_int_equal(m.exec.timeout_ms, 5000);
	assert_string_equal(json_object_get_string(
				    json_object_array_get_idx(m.exec.cmd, 0)),
			    "sleep");
	al_stream_exec_free(&m);
	free(s);
	s = al_stream_exec_pack(&in, "ABC", 0, &err);
	assert_int_equal(al_stream_exec_unpack(s, strlen(s), &m, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	free(s);
	static const char noexec[] =
		"{\"lease\":\"0123456789abcdef0123456789abcdef\"}";
	assert_int_equal(al_stream_exec_unpack(noexec, strlen(noexec), &m,
					       &err),
			 -1);
	static const char badexec[] =
		"{\"exec\":{\"cmd\":[]},"
		"\"lease\":\"0123456789abcdef0123456789abcdef\"}";
	assert_int_equal(al_stream_exec_unpack(badexec, strlen(badexec), &m,
					       &err),
			 -1);
	json_object_put(cmd);

	char token[AL_STREAM_TOKEN_LEN + 1], got[AL_STREAM_TOKEN_LEN + 1];
	assert_int_equal(al_hex_random(token, AL_STREAM_TOKEN_LEN, &err), 0);
	s = al_stream_token_pack(token, &err);
	assert_int_equal(al_stream_token_unpack(s, strlen(s), got, &err), 0);
	assert_string_equal(got, token);
	free(s);
	static const char short_token[] = "{\"token\":\"abcd\"}";
	assert_int_equal(al_stream_token_unpack(short_token,
						strlen(short_token), got, &err),
			 -1);
}

static void test_streams_pack_unpack(void **state)
{
	(void)state;
	al_err err = {0};
	char lease[2][AL_STREAM_LEASE_LEN + 1] = {
		"0123456789abcdef0123456789abcdef",
		"ffffffffffffffffffffffffffffffff",
	};
	char *s = al_streams_pack(lease, 2, AL_EAUTH, "revoked", &err);
	al_streams_msg m;
	assert_int_equal(al_streams_unpack(s, strlen(s), &m, &err), 0);
	assert_int_equal(m.n, 2);
	assert_string_equal(m.lease[1], lease[1]);
	assert_int_equal(m.end, AL_EAUTH);
	assert_string_equal(m.message, "revoked");
	al_streams_msg_free(&m);
	free(s);
	s = al_streams_pack(lease, 0, AL_OK, NULL, &err);
	assert_string_equal(s, "{\"leases\":[]}");
	assert_int_equal(al_streams_unpack(s, strlen(s), &m, &err), 0);
	assert_int_equal(m.n, 0);
	assert_int_equal(m.end, AL_OK);
	al_streams_msg_free(&m);
	free(s);
	static const char *const bad[] = {
		"{}",
		"{\"leases\":[\"x\"]}",
		"{\"leases\":[1]}",
		"{\"leases\":[],\"end\":1}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(al_streams_unpack(bad[i], strlen(bad[i]), &m,
						   &err),
				 -1);
}

int main(void)
{
	signal(SIGPIPE, SIG_DFL);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_layout),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_split_bytes),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_flags_rejected),
		cmocka_unit_test(test_oversized_rejected_before_alloc),
		cmocka_unit_test(test_unknown_type),
		cmocka_unit_test(test_encode_limits),
		cmocka_unit_test(test_buf_compacts),
		cmocka_unit_test(test_flush_would_block),
		cmocka_unit_test(test_send_recv_blocking),
		cmocka_unit_test(test_send_recv_nonblocking),
		cmocka_unit_test(test_recv_deadline),
		cmocka_unit_test(test_recv_eof_mid_frame),
		cmocka_unit_test(test_recv_violation),
		cmocka_unit_test(test_send_until_deadline),
		cmocka_unit_test(test_file_req_pack_unpack),
		cmocka_unit_test(test_disk_grow_pack_unpack),
		cmocka_unit_test(test_exec_pack_unpack),
		cmocka_unit_test(test_error_pack_unpack),
		cmocka_unit_test(test_exit_pack_unpack),
		cmocka_unit_test(test_stream_exec_pack_unpack),
		cmocka_unit_test(test_streams_pack_unpack),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
