/* core/airlockfile: what a user's Airlockfile turns into, and the errors
 * (with their line) the API answers for a bad one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "template/airlockfile.h"

static al_airlockfile *parse_ok(const char *text)
{
	al_err err = {0};
	int line = -1;
	al_airlockfile *af = al_airlockfile_parse(text, strlen(text), &line,
						  &err);
	if (af == NULL)
		fail_msg("parse failed: %s", err.msg);
	assert_int_equal(line, 0);
	return af;
}

/* Parse text expecting a failure at line; returns the message. */
static void parse_bad(const char *text, int line, const char *needle)
{
	al_err err = {0};
	int got = -1;
	al_airlockfile *af = al_airlockfile_parse(text, strlen(text), &got,
						  &err);
	if (af != NULL) {
		al_airlockfile_free(af);
		fail_msg("accepted: %s", text);
	}
	assert_int_equal(err.code, AL_EINVAL);
	assert_int_equal(got, line);
	if (line > 0) {
		char prefix[32];
		snprintf(prefix, sizeof prefix, "line %d: ", line);
		if (strncmp(err.msg, prefix, strlen(prefix)) != 0)
			fail_msg("message '%s' lacks '%s'", err.msg, prefix);
	}
	if (needle != NULL && strstr(err.msg, needle) == NULL)
		fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

static void test_every_instruction(void **state)
{
	(void)state;
	al_airlockfile *af =
		parse_ok("# a template\n"
			 "FROM minimal\n"
			 "\n"
			 "run apk add x\n"
			 "RUN [\"/bin/echo\", \"hi there\"]\n"
			 "COPY --chmod=0755 app.sh lib/ /opt/app/\n"
			 "ENV A=1 B=\"two words\" C='x y' D=a\\ b E=\n"
			 "ENV LEGACY some value here\n"
			 "WORKDIR /srv\n"
			 "WORKDIR data\n"
			 "COPY conf.toml .\n"
			 "USER app:staff\n"
			 "START [\"python3\", \"-m\", \"http.server\"]\n"
			 "READY curl -fs http://127.0.0.1:8000/\n");
	assert_int_equal(af->nsteps, 12);
	assert_int_equal(af->steps[0].kind, AL_AF_FROM);
	assert_int_equal(af->from->base, AL_AF_BASE_TEMPLATE);
	assert_string_equal(af->from->template_name, "minimal");
	assert_int_equal(af->steps[0].line, 2);

	const al_af_step *s = &af->steps[1];
	assert_int_equal(s->kind, AL_AF_RUN);
	assert_int_equal(s->line, 4);
	assert_string_equal(s->text, "run apk add x");
	assert_int_equal(s->cmd.exec_form, 0);
	assert_int_equal(s->cmd.argc, 3);
	assert_string_equal(s->cmd.argv[0], "/bin/sh");
	assert_string_equal(s->cmd.argv[1], "-c");
	assert_string_equal(s->cmd.argv[2], "apk add x");
	assert_null(s->cmd.argv[3]);
	assert_string_equal(s->workdir, "/");
	assert_string_equal(s->user, "root");

	s = &af->steps[2];
	assert_int_equal(s->cmd.exec_form, 1);
	assert_int_equal(s->cmd.argc, 2);
	assert_string_equal(s->cmd.argv[1], "hi there");
	assert_null(s->cmd.argv[2]);

	s = &af->steps[3];
	assert_int_equal(s->kind, AL_AF_COPY);
	assert_int_equal(s->copy.chmod, 0755);
	assert_int_equal(s->copy.nsrc, 2);
	assert_string_equal(s->copy.src[0], "app.sh");
	assert_string_equal(s->copy.src[1], "lib");
	assert_string_equal(s->copy.dest, "/opt/app/");
	assert_int_equal(s->copy.dest_is_dir, 1);

	s = &af->steps[4];
	assert_int_equal(s->kind, AL_AF_ENV);
	assert_int_equal(s->env_n, 5);
	assert_string_equal(s->env[0].key, "A");
	assert_string_equal(s->env[0].value, "1");
	assert_string_equal(s->env[1].value, "two words");
	assert_string_equal(s->env[2].value, "x y");
	assert_string_equal(s->env[3].value, "a b");
	assert_string_equal(s->env[4].key, "E");
	assert_string_equal(s->env[4].value, "");
	s = &af->steps[5];
	assert_int_equal(s->env_n, 1);
	assert_string_equal(s->env[0].key, "LEGACY");
	assert_string_equal(s->env[0].value, "some value here");
	assert_int_equal(s->nenv, 6);

	assert_string_equal(af->steps[6].path, "/srv");
	assert_string_equal(af->steps[7].path, "/srv/data");
	assert_string_equal(af->steps[7].workdir, "/srv/data");

	s = &af->steps[8];
	assert_int_equal(s->copy.chmod, -1);
	assert_string_equal(s->copy.src[0], "conf.toml");
	assert_string_equal(s->copy.dest, "/srv/data/");

	s = &af->steps[9];
	assert_string_equal(s->user_name, "app");
	assert_string_equal(s->user_group, "staff");
	assert_string_equal(s->user, "app");
	assert_string_equal(s->group, "staff");

	assert_non_null(af->start);
	assert_int_equal(af->start->kind, AL_AF_START);
	assert_int_equal(af->start->cmd.exec_form, 1);
	assert_string_equal(af->start->cmd.argv[2], "http.server");
	assert_non_null(af->ready);
	assert_string_equal(af->ready->cmd.argv[2],
			    "curl -fs http://127.0.0.1:8000/");
	/* The final state is what the template's sandboxes run with. */
	const al_af_step *last = &af->steps[af->nsteps - 1];
	assert_string_equal(last->workdir, "/srv/data");
	assert_string_equal(last->user, "app");
	al_airlockfile_free(af);
}

static void test_from_forms(void **state)
{
	(void)state;
	al_airlockfile *af = parse_ok("FROM scratch\n");
	assert_int_equal(af->from->base, AL_AF_BASE_SCRATCH);
	assert_null(af->from->template_name);
	assert_int_equal(af->nsteps, 1);
	assert_null(af->start);
	assert_null(af->ready);
	al_airlockfile_free(af);

	af = parse_ok("from debian:bookworm\n");
	assert_int_equal(af->from->base, AL_AF_BASE_DEBIAN);
	assert_string_equal(af->from->suite, "bookworm");
	assert_int_equal(af->from->npackages, 0);
	al_airlockfile_free(af);

	af = parse_ok(
		"FROM debian:bookworm "
		"--include=bash,ca-certificates,python3,libstdc++6,g++\n");
	assert_int_equal(af->from->npackages, 5);
	assert_string_equal(af->from->packages[1], "ca-certificates");
	assert_string_equal(af->from->packages[3], "libstdc++6");
	assert_string_equal(af->from->packages[4], "g++");
	assert_null(af->from->packages[5]);
	al_airlockfile_free(af);

	af = parse_ok("FROM my-python-3\n");
	assert_string_equal(af->from->template_name, "my-python-3");
	al_airlockfile_free(af);

	parse_bad("FROM ubuntu:22.04\n", 1, "unsupported base");
	parse_bad("FROM Python\n", 1, "unsupported base");
	parse_bad("FROM a1234567890123456789012345678901234567890123456789"
		  "012345678901234\n",
		  1, "unsupported base");
	parse_bad("FROM minimal --include=bash\n", 1, "debian:bookworm");
	parse_bad("FROM debian:bookworm --include=bash,,git\n", 1,
		  "invalid package name");
	parse_bad("FROM debian:bookworm --include=Bash\n", 1,
		  "invalid package name");
	parse_bad("FROM debian:bookworm --include=a;rm\n", 1,
		  "invalid package name");
	parse_bad("FROM debian:bookworm --platform=x\n", 1, "unknown option");
	parse_bad("FROM scratch minimal\n", 1, "one base");
	parse_bad("RUN true\nFROM scratch\n", 1, "first instruction");
	parse_bad("FROM scratch\nRUN x\nFROM minimal\n", 3, "only once");
	parse_bad("\n# nothing here\n\n", 0, "no instructions");
	parse_bad("", 0, "no instructions");
}

static void test_continuations_and_comments(void **state)
{
	(void)state;
	al_airlockfile *af = parse_ok("FROM scratch\r\n"
				      "# comment\r\n"
				      "RUN apt-get install \\\r\n"
				      "    # dropped comment\r\n"
				      "\r\n"
				      "    curl \\  \r\n"
				      "    git\r\n"
				      "   RUN    [\"a\", \\\n"
				      "\"b\"]   \n"
				      "RUN last \\");
	assert_int_equal(af->nsteps, 4);
	assert_int_equal(af->steps[1].line, 3);
	assert_string_equal(af->steps[1].cmd.argv[2],
			    "apt-get install     curl     git");
	assert_int_equal(af->steps[2].line, 8);
	assert_int_equal(af->steps[2].cmd.exec_form, 1);
	assert_string_equal(af->steps[2].cmd.argv[1], "b");
	assert_int_equal(af->steps[3].line, 10);
	assert_string_equal(af->steps[3].cmd.argv[2], "last");
	al_airlockfile_free(af);

	/* A line starting with '[' that is not a JSON array is shell form. */
	af = parse_ok("FROM scratch\nRUN [ -f /x ] && echo y\n");
	assert_int_equal(af->steps[1].cmd.exec_form, 0);
	assert_string_equal(af->steps[1].cmd.argv[2], "[ -f /x ] && echo y");
	al_airlockfile_free(af);
}

static void test_errors_name_their_line(void **state)
{
	(void)state;
	parse_bad("FROM scratch\nRUN ok\n\nFOO bar\n", 4,
		  "unknown instruction 'FOO'");
	parse_bad("FROM scratch\nADD x /y\n", 2, "unknown instruction 'ADD'");
	/* The first physical line of a continued instruction is named. */
	parse_bad("FROM scratch\nRUN a \\\n b\nCMD \\\n x\n", 4,
		  "unknown instruction 'CMD'");
	parse_bad("FROM scratch\nRUN\n", 2, "needs arguments");
	parse_bad("FROM scratch\nRUN [\"a\", 1]\n", 2, "only strings");
	parse_bad("FROM scratch\nRUN []\n", 2, "empty JSON array");
	parse_bad("FROM scratch\nRUN [\"a\\u0000b\"]\n", 2, "NUL");
	parse_bad("FROM scratch\nSTART a\nSTART b\n", 3, "only one START");
	parse_bad("FROM scratch\nREADY a\nREADY b\n", 3, "only one READY");
	parse_bad("FROM scratch\nENV 1A=x\n", 2, "NAME=VALUE");
	parse_bad("FROM scratch\nENV A=\"open\n", 2, "unterminated");
	parse_bad("FROM scratch\nENV A=1 junk\n", 2, "NAME=VALUE");
	parse_bad("FROM scratch\nENV ONLYKEY\n", 2, "needs a value");
	parse_bad("FROM scratch\nENV B-AD value\n", 2, "invalid name");
	parse_bad("FROM scratch\nUSER a b\n", 2, "one user");
	parse_bad("FROM scratch\nUSER a:\n", 2, "invalid user");
	parse_bad("FROM scratch\nUSER a;b\n", 2, "invalid user");
	parse_bad("FROM scratch\nRUN a\x01\n", 2, "control character");
	parse_bad("FROM scratch\nRUN a\rb\n", 2, "control character");
	parse_bad("FROM scratch\nRUN \xff\xfe\n", 2, "UTF-8");
	/* A NUL byte inside the buffer: the length, not strlen, counts. */
	al_err err = {0};
	int line = -1;
	static const char nul[] = "FROM scratch\nRUN a\0b\n";
	assert_null(al_airlockfile_parse(nul, sizeof nul - 1, &line, &err));
	assert_int_equal(line, 2);
}

static void test_copy_paths(void **state)
{
	(void)state;
	al_airlockfile *af =
		parse_ok("FROM scratch\n"
			 "WORKDIR /app\n"
			 "COPY ./src//main.c ../etc/x.conf\n"
			 "COPY . .\n"
			 "COPY [\"with space.txt\", \"/opt/with space.txt\"]\n"
			 "COPY --chmod=600 [\"a\", \"b\", \"/d/\"]\n"
			 "COPY a /\n");
	const al_af_copy *c = &af->steps[2].copy;
	assert_string_equal(c->src[0], "src/main.c");
	/* ".." in the destination folds within the rootfs. */
	assert_string_equal(c->dest, "/etc/x.conf");
	assert_int_equal(c->dest_is_dir, 0);
	c = &af->steps[3].copy;
	assert_string_equal(c->src[0], ".");
	assert_string_equal(c->dest, "/app/");
	assert_int_equal(c->dest_is_dir, 1);
	c = &af->steps[4].copy;
	assert_string_equal(c->src[0], "with space.txt");
	assert_string_equal(c->dest, "/opt/with space.txt");
	c = &af->steps[5].copy;
	assert_int_equal(c->chmod, 0600);
	assert_int_equal(c->nsrc, 2);
	c = &af->steps[6].copy;
	assert_string_equal(c->dest, "/");
	assert_int_equal(c->dest_is_dir, 1);
	al_airlockfile_free(af);

	parse_bad("FROM scratch\nCOPY ../secret /x\n", 2, "leaves the build");
	parse_bad("FROM scratch\nCOPY a/../../b /x\n", 2, "'..'");
	parse_bad("FROM scratch\nCOPY [\"..\", \"/x\"]\n", 2, "'..'");
	parse_bad("FROM scratch\nCOPY /etc/passwd /x\n", 2, "relative");
	parse_bad("FROM scratch\nCOPY [\"a\\nb\", \"/x\"]\n", 2,
		  "control character");
	parse_bad("FROM scratch\nCOPY onlyone\n", 2, "source and a dest");
	parse_bad("FROM scratch\nCOPY a b /notdir\n", 2, "ending in '/'");
	parse_bad("FROM scratch\nCOPY --chown=1 a /b\n", 2,
		  "unsupported option");
	parse_bad("FROM scratch\nCOPY --chmod=9 a /b\n", 2, "octal");
	parse_bad("FROM scratch\nCOPY --chmod=17777 a /b\n", 2, "octal");
}

static void test_limits(void **state)
{
	(void)state;
	/* 1001 instructions: the 1001st (line 1001) is refused. */
	size_t cap = 1001 * 8 + 32;
	char *buf = malloc(cap);
	assert_non_null(buf);
	strcpy(buf, "FROM scratch\n");
	for (int i = 0; i < 1000; i++)
		strcat(buf, "RUN x\n");
	parse_bad(buf, 1001, "more than 1000 instructions");
	free(buf);

	/* A logical line over 64 KiB. */
	buf = malloc(AL_AF_MAX_LINE + 64);
	assert_non_null(buf);
	strcpy(buf, "FROM scratch\nRUN ");
	size_t l = strlen(buf);
	memset(buf + l, 'a', AL_AF_MAX_LINE);
	buf[l + AL_AF_MAX_LINE] = '\0';
	parse_bad(buf, 2, "longer than");
	free(buf);

	/* Over 1 MiB: AL_ETOOBIG, no line. */
	buf = malloc(AL_AF_MAX_BYTES + 1);
	assert_non_null(buf);
	memset(buf, '\n', AL_AF_MAX_BYTES + 1);
	memcpy(buf, "FROM scratch", 12);
	al_err err = {0};
	int line = -1;
	assert_null(al_airlockfile_parse(buf, AL_AF_MAX_BYTES + 1, &line,
					 &err));
	assert_int_equal(err.code, AL_ETOOBIG);
	assert_int_equal(line, 0);
	/* Exactly 1 MiB is fine. */
	al_airlockfile *af = al_airlockfile_parse(buf, AL_AF_MAX_BYTES, &line,
						  &err);
	assert_non_null(af);
	al_airlockfile_free(af);
	free(buf);
}

static void test_envp(void **state)
{
	(void)state;
	al_airlockfile *af = parse_ok("FROM scratch\n"
				      "ENV A=1 B=2\n"
				      "RUN x\n"
				      "ENV A=3 C=4\n");
	char **e = al_airlockfile_envp(af, af->steps[2].nenv, NULL);
	assert_non_null(e);
	assert_string_equal(e[0], "A=1");
	assert_string_equal(e[1], "B=2");
	assert_null(e[2]);
	free(e);
	e = al_airlockfile_envp(af, af->nenv, NULL);
	assert_string_equal(e[0], "A=3");
	assert_string_equal(e[1], "B=2");
	assert_string_equal(e[2], "C=4");
	assert_null(e[3]);
	free(e);
	al_airlockfile_free(af);
}

static void key_of(const char *text, size_t idx, const char *parent,
		   const char *extra, char out[AL_AF_KEY_HEX])
{
	al_airlockfile *af = parse_ok(text);
	al_err err = {0};
	assert_true(idx < af->nsteps);
	assert_int_equal(al_airlockfile_step_key(parent, &af->steps[idx], extra,
						 out, &err),
			 0);
	assert_int_equal(strlen(out), 64);
	al_airlockfile_free(af);
}

static void test_cache_keys(void **state)
{
	(void)state;
	const char *P1 = "1111111111111111111111111111111111111111111111111111"
			 "111111111111";
	const char *P2 = "2222222222222222222222222222222222222222222222222222"
			 "222222222222";
	const char *H1 = "aaaa";
	const char *H2 = "bbbb";
	char a[AL_AF_KEY_HEX], b[AL_AF_KEY_HEX];

	key_of("FROM scratch\nRUN make all\n", 1, P1, NULL, a);
	/* Spelling that does not change meaning keeps the key. */
	key_of("# c\nFROM scratch\n\nrun   make all  \n", 1, P1, NULL, b);
	assert_string_equal(a, b);
	/* Same step again: same key (deterministic). */
	key_of("FROM scratch\nRUN make all\n", 1, P1, NULL, b);
	assert_string_equal(a, b);
	/* Parent changes: key changes. */
	key_of("FROM scratch\nRUN make all\n", 1, P2, NULL, b);
	assert_string_not_equal(a, b);
	/* Text changes: key changes. */
	key_of("FROM scratch\nRUN make al\n", 1, P1, NULL, b);
	assert_string_not_equal(a, b);
	/* Shell vs exec form of the same words differ. */
	key_of("FROM scratch\nRUN [\"make\", \"all\"]\n", 1, P1, NULL, b);
	assert_string_not_equal(a, b);
	/* No parent vs a parent. */
	key_of("FROM scratch\nRUN make all\n", 1, NULL, NULL, b);
	assert_string_not_equal(a, b);

	/* COPY: copied files' hash matters, and only it. */
	key_of("FROM scratch\nCOPY a /b\n", 1, P1, H1, a);
	key_of("FROM scratch\nCOPY  ./a  /b\n", 1, P1, H1, b);
	assert_string_equal(a, b);
	key_of("FROM scratch\nCOPY a /b\n", 1, P1, H2, b);
	assert_string_not_equal(a, b);
	key_of("FROM scratch\nCOPY --chmod=644 a /b\n", 1, P1, H1, b);
	assert_string_not_equal(a, b);
	/* Same text but a different WORKDIR makes a different dest. */
	key_of("FROM scratch\nWORKDIR /w\nCOPY a b\n", 2, P1, H1, a);
	key_of("FROM scratch\nWORKDIR /v\nCOPY a b\n", 2, P1, H1, b);
	assert_string_not_equal(a, b);

	/* ENV field boundaries cannot collide. */
	key_of("FROM scratch\nENV A=bc\n", 1, P1, NULL, a);
	key_of("FROM scratch\nENV A=b C=\n", 1, P1, NULL, b);
	assert_string_not_equal(a, b);

	/* FROM keys differ per base and package list. */
	key_of("FROM debian:bookworm --include=a,b\n", 0, NULL, NULL, a);
	key_of("FROM debian:bookworm --include=a,c\n", 0, NULL, NULL, b);
	assert_string_not_equal(a, b);
	key_of("FROM debian:bookworm --include=a,b\n", 0, NULL, NULL, b);
	assert_string_equal(a, b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_instruction),
		cmocka_unit_test(test_from_forms),
		cmocka_unit_test(test_continuations_and_comments),
		cmocka_unit_test(test_errors_name_their_line),
		cmocka_unit_test(test_copy_paths),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_envp),
		cmocka_unit_test(test_cache_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
