/* core/policypub: what GET /v1/info reads of the policies the controller
 * loaded, whichever worker reads it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "policy/policypub.h"

static const char good[] = "function egress(req) return allow() end\n";

static void test_nothing_published(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_policypub.XXXXXX";
	assert_non_null(mkdtemp(dir));
	al_err err = {0};
	assert_null(al_policypub_read(dir, &err));
	assert_int_equal(err.code, AL_ENOENT);
	rmdir(dir);
}

static void test_loaded_and_never_loaded(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_policypub.XXXXXX";
	assert_non_null(mkdtemp(dir));
	al_err err = {0};
	al_policy *p = al_policy_open_source("/p/egress.lua", good,
					     strlen(good),
					     &al_policy_egress_kind, NULL,
					     &err);
	assert_non_null(p);
	al_policypub v[] = {
		{.name = "egress", .path = "/p/egress.lua", .p = p},
		{.name = "other",
		 .path = "/p/other.lua",
		 .error = "/p/other.lua:3: unexpected symbol"},
	};
	assert_int_equal(al_policypub_write(dir, v, 2, &err), 0);
	al_policy_close(p);

	json_object *o = al_policypub_read(dir, &err);
	assert_non_null(o);
	json_object *e = json_object_object_get(o, "egress");
	assert_string_equal(
		json_object_get_string(json_object_object_get(e, "path")),
		"/p/egress.lua");
	assert_true(json_object_get_boolean(json_object_object_get(e,
								   "loaded")));
	assert_int_equal(json_object_get_int(json_object_object_get(e,
								    "reloads")),
			 0);
	json_object *t = json_object_object_get(e, "loaded_at");
	assert_int_equal(strlen(json_object_get_string(t)), 20);
	/* Present and null: nothing was refused. */
	assert_true(json_object_object_get_ex(e, "reload_error", &t));
	assert_null(t);
	json_object *x = json_object_object_get(o, "other");
	assert_false(json_object_get_boolean(json_object_object_get(x,
								    "loaded")));
	assert_string_equal(
		json_object_get_string(json_object_object_get(x, "error")),
		"/p/other.lua:3: unexpected symbol");
	json_object_put(o);

	/* Only the whole file is there: no temp file left beside it. */
	char tmp[64];
	snprintf(tmp, sizeof tmp, "%s/policies.json.tmp.%d", dir,
		 (int)getpid());
	struct stat st;
	assert_int_equal(stat(tmp, &st), -1);
	snprintf(tmp, sizeof tmp, "%s/policies.json", dir);
	assert_int_equal(stat(tmp, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	al_policypub_withdraw(dir);
	assert_null(al_policypub_read(dir, &err));
	assert_int_equal(err.code, AL_ENOENT);
	rmdir(dir);
}

static void test_refuses_a_garbled_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_policypub.XXXXXX", path[64];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/policies.json", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"egress\": ", f);
	fclose(f);
	al_err err = {0};
	assert_null(al_policypub_read(dir, &err));
	assert_int_equal(err.code, AL_EINVAL);
	assert_non_null(strstr(err.msg, "policies.json"));
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nothing_published),
		cmocka_unit_test(test_loaded_and_never_loaded),
		cmocka_unit_test(test_refuses_a_garbled_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
