/* driver: the table's lookup, and which drivers a host offers (what a
 * create and GET /v1/info read) from the operator's settings and what
 * the vm probe recorded in a state directory of the test's own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "driver.h"
#include "vm/probe.h"

#include "fake_env.h"
#include "shrun.h"

static char sd[] = "/tmp/al-drivers-XXXXXX";

/* The status under the settings drivers and default_driver (NULL:
 * unset). */
static al_driver_status status(const char *drivers, const char *def)
{
	const char *env[7] = {"AIRLOCK_STATE", sd};
	size_t n = 2;
	if (drivers != NULL) {
		env[n++] = "AIRLOCK_DRIVERS";
		env[n++] = drivers;
	}
	if (def != NULL) {
		env[n++] = "AIRLOCK_DEFAULT_DRIVER";
		env[n++] = def;
	}
	env[n] = NULL;
	fake_env = env;
	al_config cfg;
	al_err err = {0};
	if (al_config_load_from(&cfg, fake_env_lookup, &err) < 0)
		fail_msg("config: %s", err.msg);
	al_driver_status st;
	al_driver_status_read(&cfg, &st);
	return st;
}

static void test_find(void **state)
{
	(void)state;
	al_err err;
	assert_ptr_equal(al_driver_find("ns", &err), &al_driver_ns);
	assert_ptr_equal(al_driver_find("vm", &err), &al_driver_vm);
	assert_null(al_driver_find("kvm", &err));
	assert_int_equal(err.code, AL_EINVAL);
	assert_null(al_driver_find(NULL, &err));
}

/* Nothing probed yet: ns, and vm's reason. */
static void test_vm_not_ready(void **state)
{
	(void)state;
	al_driver_status st = status(NULL, NULL);
	assert_true(st.ns_enabled);
	assert_false(st.vm_usable);
	assert_string_equal(st.default_driver, "ns");
	assert_string_equal(st.vm_accel, "tcg");
	if (access(AL_VM_QEMU, X_OK) == 0)
		assert_non_null(strstr(st.vm_why, "no guest kernel"));
	else
		assert_non_null(strstr(st.vm_why, "not installed"));

	/* The operator's choice stands, whatever the host can do now:
	 * creates are then told why vm cannot run. */
	st = status(NULL, "vm");
	assert_string_equal(st.default_driver, "vm");
	assert_false(st.vm_usable);
	/* ns disabled: vm is all there is. */
	st = status("vm", NULL);
	assert_false(st.ns_enabled);
	assert_string_equal(st.default_driver, "vm");
	/* vm disabled: said so, whatever the probe found. */
	st = status("ns", NULL);
	assert_false(st.vm_usable);
	assert_string_equal(st.vm_why, "disabled by AIRLOCK_DRIVERS=ns");
	assert_string_equal(st.default_driver, "ns");
}

/* vm usable: the default only where KVM runs guests. */
static void test_vm_usable(void **state)
{
	(void)state;
	if (access(AL_VM_QEMU, X_OK) < 0) {
		print_message("skip: " AL_VM_QEMU " is not installed\n");
		skip();
	}
	al_err err = {0};
	assert_int_equal(run("mkdir -p %s/vm/kernel && touch "
			     "%s/vm/kernel/vmlinuz %s/vm/initrd.img",
			     sd, sd, sd),
			 0);
	assert_int_equal(al_vm_accel_save(sd, AL_VM_TCG, &err), 0);
	al_driver_status st = status(NULL, NULL);
	assert_true(st.vm_usable);
	assert_string_equal(st.vm_accel, "tcg");
	assert_string_equal(st.default_driver, "ns");

	assert_int_equal(al_vm_accel_save(sd, AL_VM_KVM, &err), 0);
	st = status(NULL, NULL);
	assert_true(st.vm_usable);
	assert_string_equal(st.vm_accel, "kvm");
	assert_string_equal(st.default_driver, "vm");
	st = status(NULL, "ns");
	assert_string_equal(st.default_driver, "ns");

	/* What airlock-controller --init recorded against vm. */
	assert_int_equal(al_vm_status_save(sd, "no VM snapshot", &err), 0);
	st = status(NULL, NULL);
	assert_false(st.vm_usable);
	assert_string_equal(st.vm_why, "no VM snapshot");
	assert_string_equal(st.default_driver, "ns");
	assert_int_equal(run("rm -rf %s/vm", sd), 0);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(sd) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	run("rm -rf %s", sd);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_vm_not_ready),
		cmocka_unit_test(test_vm_usable),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
