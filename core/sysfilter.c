#include "sysfilter.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/seccomp.h>
#include <seccomp.h>

#include "cleanup.h"

/* Syscalls a sandbox never needs and that reach past its namespaces into
 * the shared kernel (the Docker default profile's list, trimmed to what
 * is not already covered by the dropped capabilities alone). */
static const char *const denied[] = {
	"kexec_load",	 "kexec_file_load", "init_module",
	"finit_module",	 "delete_module",   "create_module",
	"bpf",		 "perf_event_open", "keyctl",
	"add_key",	 "request_key",	    "mount",
	"umount",	 "umount2",	    "pivot_root",
	"swapon",	 "swapoff",	    "reboot",
	"open_by_handle_at", "name_to_handle_at", "acct",
	"syslog",	 "settimeofday",    "stime",
	"clock_settime", "clock_adjtime",   "adjtimex",
	"quotactl",	 "quotactl_fd",	    "iopl",
	"ioperm",	 "lookup_dcookie",  "userfaultfd",
	"fsopen",	 "fsconfig",	    "fsmount",
	"fspick",	 "open_tree",	    "move_mount",
	"mount_setattr", "unshare",	    "setns",
	"vhangup",	 "uselib",	    "nfsservctl",
};

static const unsigned long ns_flags[] = {
	CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
	CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP,
};

static pthread_once_t prog_once = PTHREAD_ONCE_INIT;
static struct sock_fprog prog_built;
static const struct sock_fprog *prog_ptr;
static al_err prog_err;

static int build(scmp_filter_ctx ctx, al_err *err)
{
	int rc;
	/* Without these, a 64-bit process could reach the denied calls
	 * through int 0x80 or the x32 numbers. */
	static const uint32_t arches[] = {SCMP_ARCH_X86, SCMP_ARCH_X32};
	if (seccomp_arch_native() == SCMP_ARCH_X86_64) {
		for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++) {
			rc = seccomp_arch_add(ctx, arches[i]);
			if (rc < 0 && rc != -EEXIST)
				return al_err_sys(err, AL_ESYS, -rc,
						  "seccomp_arch_add");
		}
	}
	for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not known to this libseccomp */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
		if (rc < 0)
			return al_err_sys(err, AL_ESYS, -rc,
					  "seccomp rule for %s", denied[i]);
	}
	/* One rule per flag: libseccomp has no "masked not-equal", and
	 * rules for the same call and action are OR-ed. */
	for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
				      SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i],
					      ns_flags[i]));
		if (rc < 0)
			return al_err_sys(err, AL_ESYS, -rc,
					  "seccomp rule for clone");
	}
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3),
			      0);
	if (rc < 0)
		return al_err_sys(err, AL_ESYS, -rc, "seccomp rule for clone3");
	return 0;
}

static void build_once(void)
{
	al_err *err = &prog_err;
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (ctx == NULL) {
		al_err_set(err, AL_ESYS, 0, "seccomp_init failed");
		return;
	}
	al_autofd int fd = -1;
	if (build(ctx, err) < 0)
		goto out;
	/* libseccomp 2.5 exports only to an fd. */
	fd = memfd_create("al-seccomp", MFD_CLOEXEC);
	if (fd < 0) {
		al_err_sys(err, AL_ESYS, errno, "memfd_create");
		goto out;
	}
	int rc = seccomp_export_bpf(ctx, fd);
	if (rc < 0) {
		al_err_sys(err, AL_ESYS, -rc, "seccomp_export_bpf");
		goto out;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		al_err_sys(err, AL_ESYS, errno, "fstat seccomp memfd");
		goto out;
	}
	size_t len = (size_t)st.st_size;
	if (len == 0 || len % sizeof(struct sock_filter) != 0 ||
	    len / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		al_err_set(err, AL_EINTERNAL, 0, "seccomp program size %zu",
			   len);
		goto out;
	}
	struct sock_filter *insns = malloc(len);
	if (insns == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "seccomp program");
		goto out;
	}
	size_t off = 0;
	while (off < len) {
		ssize_t r = pread(fd, (char *)insns + off, len - off,
				  (off_t)off);
		if (r <= 0) {
			al_err_sys(err, AL_ESYS, r < 0 ? errno : EIO,
				   "read seccomp program");
			free(insns);
			goto out;
		}
		off += (size_t)r;
	}
	prog_built.len = (unsigned short)(len / sizeof(struct sock_filter));
	prog_built.filter = insns;
	prog_ptr = &prog_built;
out:
	seccomp_release(ctx);
}

const struct sock_fprog *al_sysfilter_jail_prog(al_err *err)
{
	pthread_once(&prog_once, build_once);
	if (prog_ptr == NULL) {
		if (err != NULL)
			*err = prog_err;
		return NULL;
	}
	return prog_ptr;
}

int al_sysfilter_install(const struct sock_fprog *prog)
{
	if (prog == NULL) {
		errno = EINVAL;
		return -1;
	}
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0) < 0
		       ? -1
		       : 0;
}
