/* gw/fakeip: a name keeps its synthetic address for the map's life, an
 * address is never given twice, the map is bounded, and a saved map
 * loads back only when it is exactly what the saver writes. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gw/fakeip.h"

#define IP(a, b, c, d)                                                         \
	(((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) |                       \
	 ((uint32_t)(c) << 8) | (uint32_t)(d))

static uint32_t get(al_fakeip *m, const char *name)
{
	uint32_t a = 0;
	al_err err;
	if (al_fakeip_get(m, name, &a, &err) != 0)
		fail_msg("%s: %s", name, err.msg);
	return a;
}

static void test_same_name_same_address(void **state)
{
	(void)state;
	al_fakeip *m = al_fakeip_new(AL_FAKEIP_CAP_DEFAULT, NULL);
	assert_non_null(m);
	uint32_t a = get(m, "pypi.org");
	uint32_t b = get(m, "files.pythonhosted.org");
	assert_int_equal(a, IP(198, 18, 0, 1));
	assert_int_equal(b, IP(198, 18, 0, 2));
	assert_int_equal(get(m, "pypi.org"), a);
	assert_string_equal(al_fakeip_name(m, a), "pypi.org");
	assert_string_equal(al_fakeip_name(m, b), "files.pythonhosted.org");
	assert_null(al_fakeip_name(m, IP(198, 18, 0, 3)));
	assert_null(al_fakeip_name(m, IP(198, 18, 0, 0)));
	assert_null(al_fakeip_name(m, IP(10, 0, 0, 1)));
	assert_int_equal(al_fakeip_count(m), 2);
	/* Only canonical names: the caller canonicalises, the map checks. */
	al_err err;
	uint32_t x;
	assert_int_equal(al_fakeip_get(m, "PyPI.org", &x, &err), -1);
	assert_int_equal(err.code, AL_EINVAL);
	assert_int_equal(al_fakeip_get(m, "pypi.org.", &x, &err), -1);
	assert_int_equal(al_fakeip_get(m, "", &x, &err), -1);
	assert_int_equal(al_fakeip_count(m), 2);
	al_fakeip_free(m);
}

static void test_cap(void **state)
{
	(void)state;
	al_err err;
	assert_null(al_fakeip_new(0, &err));
	assert_null(al_fakeip_new(AL_FAKEIP_CAP_MAX + 1, &err));
	al_fakeip *m = al_fakeip_new(3, &err);
	assert_non_null(m);
	uint32_t a = get(m, "a.test");
	get(m, "b.test");
	get(m, "c.test");
	uint32_t x;
	assert_int_equal(al_fakeip_get(m, "d.test", &x, &err), -1);
	assert_int_equal(err.code, AL_ENOSPACE);
	/* Known names keep working when the map is full. */
	assert_int_equal(get(m, "a.test"), a);
	al_fakeip_free(m);

	/* The whole range: the last address is 198.19.255.254, distinct
	 * from every other (a name per address, none reused). */
	m = al_fakeip_new(AL_FAKEIP_CAP_MAX, &err);
	assert_non_null(m);
	char name[32];
	uint32_t last = 0;
	for (uint32_t i = 0; i < AL_FAKEIP_CAP_MAX; i++) {
		snprintf(name, sizeof name, "n%u.test", i);
		uint32_t got = get(m, name);
		assert_int_equal(got, IP(198, 18, 0, 1) + i);
		last = got;
	}
	assert_int_equal(last, IP(198, 19, 255, 254));
	assert_int_equal(al_fakeip_get(m, "more.test", &x, &err), -1);
	assert_string_equal(al_fakeip_name(m, IP(198, 18, 200, 7)),
			    "n51206.test");
	al_fakeip_free(m);
}

static void test_pack_unpack(void **state)
{
	(void)state;
	al_fakeip *m = al_fakeip_new(16, NULL);
	get(m, "pypi.org");
	get(m, "deb.debian.org");
	char *buf;
	size_t len;
	assert_int_equal(al_fakeip_pack(m, &buf, &len, NULL), 0);
	const char *want = "airlock-fakeip 1\n"
			   "198.18.0.1 pypi.org\n"
			   "198.18.0.2 deb.debian.org\n";
	assert_int_equal(len, strlen(want));
	assert_memory_equal(buf, want, len);
	al_err err;
	al_fakeip *back = al_fakeip_unpack(buf, len, 16, &err);
	assert_non_null(back);
	assert_int_equal(al_fakeip_count(back), 2);
	assert_string_equal(al_fakeip_name(back, IP(198, 18, 0, 2)),
			    "deb.debian.org");
	/* A loaded map goes on after its last address. */
	assert_int_equal(get(back, "npmjs.org"), IP(198, 18, 0, 3));
	assert_int_equal(get(back, "pypi.org"), IP(198, 18, 0, 1));
	al_fakeip_free(back);
	/* More names than the cap: refused. */
	assert_null(al_fakeip_unpack(buf, len, 1, &err));
	assert_int_equal(err.code, AL_EINVAL);
	free(buf);
	al_fakeip_free(m);

	/* Empty map */
	m = al_fakeip_unpack("airlock-fakeip 1\n", 17, 4, &err);
	assert_non_null(m);
	assert_int_equal(al_fakeip_count(m), 0);
	al_fakeip_free(m);
}

static void test_unpack_strict(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"airlock-fakeip 2\n",
		"airlock-fakeip 1",
		"airlock-fakeip 1\n198.18.0.1 a.test",	 /* no \n */
		"airlock-fakeip 1\n198.18.0.2 a.test\n", /* not first */
		"airlock-fakeip 1\n198.18.0.1 a.test\n"
		"198.18.0.3 b.test\n", /* gap */
		"airlock-fakeip 1\n198.18.0.1 a.test\n"
		"198.18.0.2 a.test\n",			   /* twice */
		"airlock-fakeip 1\n198.18.0.1 A.test\n",   /* case */
		"airlock-fakeip 1\n198.18.0.1 a.test.\n",  /* dot */
		"airlock-fakeip 1\n198.18.0.01 a.test\n",  /* zero */
		"airlock-fakeip 1\n198.18.0.1  a.test\n",  /* space */
		"airlock-fakeip 1\n198.18.0.1 a.test \n",  /* space */
		"airlock-fakeip 1\n198.18.0.1 a.test\r\n", /* CR */
		"airlock-fakeip 1\n198.18.0.1\n",	   /* no name */
		"airlock-fakeip 1\n198.18.0.1 \n",	   /* no name */
		"airlock-fakeip 1\n 198.18.0.1 a.test\n",  /* lead */
		"airlock-fakeip 1\n198.18.0 a.test\n",	   /* short */
		"airlock-fakeip 1\n198.18.0.1.1 a.test\n", /* long */
		"airlock-fakeip 1\n198.18.0.256 a.test\n", /* range */
		"airlock-fakeip 1\n\n",			   /* empty */
		"airlock-fakeip 1\n198.18.0.1 a b\n",	   /* 2 words */
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		al_err err;
		al_err_clear(&err);
		al_fakeip *m = al_fakeip_unpack(bad[i], strlen(bad[i]), 16,
						&err);
		if (m != NULL)
			fail_msg("accepted #%zu: %s", i, bad[i]);
		assert_int_equal(err.code, AL_EINVAL);
	}
	/* A NUL inside the name */
	const char nul[] = "airlock-fakeip 1\n198.18.0.1 a\0b.test\n";
	al_err err;
	assert_null(al_fakeip_unpack(nul, sizeof nul - 1, 16, &err));
}

/* A new directory from template dir; path gets <dir>/map in it. */
static void map_path(char *dir, char path[128])
{
	assert_non_null(mkdtemp(dir));
	snprintf(path, 128, "%s/map", dir);
}

static void test_save_load(void **state)
{
	(void)state;
	char dir[] = "/tmp/gw-dns-fakeip-XXXXXX";
	char path[128];
	map_path(dir, path);
	al_err err;
	assert_null(al_fakeip_load(path, 16, &err));
	assert_int_equal(err.code, AL_ENOENT);
	al_fakeip *m = al_fakeip_new(16, NULL);
	get(m, "a.test");
	get(m, "b.test");
	assert_int_equal(al_fakeip_save(m, path, &err), 0);
	al_fakeip *back = al_fakeip_load(path, 16, &err);
	assert_non_null(back);
	assert_int_equal(get(back, "b.test"), IP(198, 18, 0, 2));
	assert_int_equal(get(back, "c.test"), IP(198, 18, 0, 3));
	al_fakeip_free(back);
	al_fakeip_free(m);
	/* A file past the size a cap allows is not read at all. */
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("airlock-fakeip 1\n", f);
	for (size_t i = 0; i < AL_FAKEIP_FILE_MAX(1); i++)
		fputc('x', f);
	fclose(f);
	assert_null(al_fakeip_load(path, 1, &err));
	assert_int_equal(err.code, AL_EINVAL);
	unlink(path);
	rmdir(dir);
}

static char *slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void test_journal(void **state)
{
	(void)state;
	char dir[] = "/tmp/gw-dns-journal-XXXXXX";
	char path[128];
	map_path(dir, path);
	al_err err;
	al_fakeip *m = al_fakeip_open(path, 16, &err);
	if (m == NULL)
		fail_msg("%s", err.msg);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(get(m, "a.test"), IP(198, 18, 0, 1));
	assert_int_equal(get(m, "b.test"), IP(198, 18, 0, 2));
	assert_int_equal(get(m, "a.test"), IP(198, 18, 0, 1));
	/* On disk as soon as handed out, before any free or save */
	assert_string_equal(slurp(path), "airlock-fakeip 1\n"
					 "198.18.0.1 a.test\n"
					 "198.18.0.2 b.test\n");
	al_fakeip_free(m);
	/* A restarted gateway: same addresses, and the next one after */
	m = al_fakeip_open(path, 16, &err);
	assert_non_null(m);
	assert_int_equal(get(m, "b.test"), IP(198, 18, 0, 2));
	assert_int_equal(get(m, "c.test"), IP(198, 18, 0, 3));
	al_fakeip_free(m);
	/* A crash in the middle of a line: the cut line is dropped */
	FILE *f = fopen(path, "a");
	fputs("198.18.0.4 d.te", f);
	fclose(f);
	m = al_fakeip_open(path, 16, &err);
	if (m == NULL)
		fail_msg("%s", err.msg);
	assert_int_equal(al_fakeip_count(m), 3);
	assert_int_equal(get(m, "e.test"), IP(198, 18, 0, 4));
	assert_null(strstr(slurp(path), "d.te"));
	al_fakeip_free(m);

	/* A write that fails half way: that name gets no address, nor any
	 * later new one; reopened, the file holds what was handed out. */
	m = al_fakeip_open(path, 16, &err);
	assert_int_equal(stat(path, &st), 0);
	struct rlimit old;
	getrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit lim = {(rlim_t)st.st_size + 5, old.rlim_max};
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	uint32_t x;
	assert_int_equal(al_fakeip_get(m, "f.test", &x, &err), -1);
	assert_int_equal(err.code, AL_ESYS);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(al_fakeip_get(m, "g.test", &x, &err), -1);
	assert_int_equal(get(m, "a.test"), IP(198, 18, 0, 1)); /* known */
	al_fakeip_free(m);
	signal(SIGXFSZ, SIG_DFL);
	m = al_fakeip_open(path, 16, &err);
	assert_non_null(m);
	assert_int_equal(al_fakeip_count(m), 4);
	assert_int_equal(get(m, "g.test"), IP(198, 18, 0, 5));
	al_fakeip_free(m);

	/* A damaged file is refused, not repaired */
	f = fopen(path, "a");
	fputs("198.18.0.9 z.test\n", f);
	fclose(f);
	assert_null(al_fakeip_open(path, 16, &err));
	assert_int_equal(err.code, AL_EINVAL);
	/* and so is a link */
	char link[160];
	snprintf(link, sizeof link, "%s/link", dir);
	assert_int_equal(symlink(path, link), 0);
	assert_null(al_fakeip_open(link, 16, &err));
	unlink(link);
	unlink(path);
	rmdir(dir);
}

/* The longest names a guest can ask for fill the journal (on the host's
 * shared run/ tmpfs) only to AL_FAKEIP_JOURNAL_MAX: then new names are
 * refused as past the cap, known ones still answer, and a restart keeps
 * the bound. */
static void test_journal_bytes(void **state)
{
	(void)state;
	char dir[] = "/tmp/gw-dns-journal-XXXXXX";
	char path[128];
	map_path(dir, path);
	al_err err;
	al_fakeip *m = al_fakeip_open(path, AL_FAKEIP_CAP_DEFAULT, &err);
	assert_non_null(m);
	/* 253 bytes: four labels of 63 (the first numbered) and a dot each. */
	char name[254], label[64];
	memset(label, 'x', 63);
	label[63] = '\0';
	uint32_t x, n = 0;
	for (;; n++) {
		snprintf(name, sizeof name, "%08u%.55s.%s.%s.%.61s", n, label,
			 label, label, label);
		assert_int_equal(strlen(name), 253);
		if (al_fakeip_get(m, name, &x, &err) < 0)
			break;
	}
	assert_int_equal(err.code, AL_ENOSPACE);
	assert_true(n > 7000 && n < AL_FAKEIP_CAP_DEFAULT);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size <= AL_FAKEIP_JOURNAL_MAX);
	assert_true(st.st_size > AL_FAKEIP_JOURNAL_MAX - 300);
	char first[254];
	snprintf(first, sizeof first, "%08u%.55s.%s.%s.%.61s", 0u, label, label,
		 label, label);
	assert_int_equal(get(m, first), IP(198, 18, 0, 1));
	al_fakeip_free(m);
	m = al_fakeip_open(path, AL_FAKEIP_CAP_DEFAULT, &err);
	assert_non_null(m);
	assert_int_equal(al_fakeip_count(m), n);
	assert_int_equal(al_fakeip_get(m, name, &x, &err), -1);
	assert_int_equal(err.code, AL_ENOSPACE);
	al_fakeip_free(m);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_name_same_address),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_pack_unpack),
		cmocka_unit_test(test_unpack_strict),
		cmocka_unit_test(test_save_load),
		cmocka_unit_test(test_journal),
		cmocka_unit_test(test_journal_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
