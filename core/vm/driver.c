/* vm driver: every sandbox its own QEMU microvm and guest kernel (the
 * al_driver_vm of core/driver.h).
 *
 * A sandbox's rootfs (a snapshot of its template's subvolume) holds the
 * symlink .airlock-vm to the template's VM directory (vm/snapshot.h).
 * start() does one of three:
 *
 *  - resumes, when the spec has a restore_dir, the machine a capture()
 *    saved there (vm/capture.h: the template's RAM plus the pages the
 *    guest had written, and its device state), on the disk in the rootfs
 *    (.airlock-disk.ext4 as it was snapshotted after the capture). Its
 *    init and agent run already: the caller RESUMEs the agent and gives
 *    it its identity (adopt). A capture this host cannot resume is
 *    AL_ESTATE, for the caller to start the disk cold instead;
 *  - restores, when the template has a base snapshot, after reflinking
 *    the template's disk.ext4 into the rootfs: QEMU starts with
 *    -incoming defer and maps the template's guest RAM (vm/mem.h)
 *    privately (share=off: copy-on-write, every clone shares the
 *    unchanged pages); over QMP the device state (~64 KB) is loaded with
 *    x-ignore-shared and the guest continued. It resumes inside the guest
 *    init, which was waiting for its host when the snapshot was taken;
 *  - otherwise boots the kernel cold (seconds under TCG) on that disk,
 *    or on the rootfs's own when the spec says own_disk (a resume that
 *    fell back).
 *
 * Unless it resumed, the host then sends the init its GO line (clock,
 * hostname, fresh entropy, the sandbox's MAC; guest/init/init.c) on the
 * virtio-serial port "airlock", whose QEMU end is a socketpair. The init
 * starts airlock-agent on the port, and that socket becomes
 * h->agent_fd: the agent's HELLO is the first thing on it.
 *
 * QEMU itself (command line, jail, launch, migration) is vm/machine.h's;
 * here it runs inside a cgroup leaf named after the sandbox with memory
 * (guest RAM + emulator), thread and CPU limits. */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/config.h"
#include "base/file.h"
#include "base/log.h"
#include "host/cgroup.h"
#include "net/slot.h"
#include "proto/agentproto.h"
#include "vm/capture.h"
#include "vm/machine.h"
#include "vm/mem.h"
#include "vm/net.h"
#include "vm/probe.h"
#include "vm/shape.h"
#include "vm/snapshot.h"

typedef struct vm_priv {
	al_vm_machine m;
	al_vm_accel accel;
	uint64_t disk_size; /* bytes of its disk image, as QEMU sees it */
	unsigned vcpus;	    /* its snapshot's (vm/shape.h) */
	al_vmcap_base cap;  /* what its captures are relative to */
} vm_priv;

/* ---- small helpers ---- */

static int hostname_ok(const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;
	if (n == 0 || n > 63 || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-'))
			return 0;
	}
	return 1;
}

/* Absolute, no "..", nothing the kernel command line would split. */
static int guest_path_ok(const char *s)
{
	if (s == NULL || s[0] != '/' || strlen(s) > 200 ||
	    strstr(s, "/..") != NULL)
		return 0;
	for (const char *p = s; *p != '\0'; p++)
		if (*p <= ' ' || *p == '"' || *p > '~')
			return 0;
	return 1;
}

/* The sandbox's disk from its template's, cheaply (al_file_clone): a
 * full pool is the operator's to fix, not a bug, and says so. */
static int disk_clone(const char *src, const char *dst, uint64_t *size,
		      al_err *err)
{
	if (al_file_clone(src, dst, 0, size, err) == 0)
		return 0;
	if (err->code == AL_EUNAVAIL)
		return al_err_set(err, AL_EUNAVAIL, 0,
				  "the sandbox pool is full (cloning the disk "
				  "image)");
	return -1;
}

static int read_small(const char *path, char *buf, size_t len)
{
	al_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static void priv_free(vm_priv *p)
{
	if (p == NULL)
		return;
	al_vm_machine_release(&p->m);
	al_vmcap_base_free(&p->cap);
	free(p);
}

/* ---- the driver ---- */

/* What a sandbox's QEMU may use: the guest's RAM plus the emulator's
 * own (TCG's translation cache, device buffers), a few dozen threads,
 * and the sandbox's CPU share. */
#define VM_QEMU_OVERHEAD (512ull << 20)
#define VM_QEMU_PIDS 256u

static al_cgroup_limits vm_limits(const al_sandbox_spec *spec)
{
	al_cgroup_limits lim = {
		.memory_bytes = ((uint64_t)AL_VM_MEM_MB << 20) +
				VM_QEMU_OVERHEAD,
		.pids_max = VM_QEMU_PIDS,
		.cpu_shares = spec->limits.cpu_shares != 0
				      ? spec->limits.cpu_shares
				      : 1024,
		/* The guest's vCPU and QEMU's own threads, together. */
		.cpu_millis = spec->limits.cpu_millis,
	};
	return lim;
}

/* Whether the template in vmdir has a base snapshot to restore from
 * (else its disk is booted cold), and the accelerator it was taken
 * under. */
static int base_restorable(const char *id, const char *vmdir, char *accel_s,
			   size_t len)
{
	char mem[AL_PATH_MAX + 8], state[AL_PATH_MAX + 8],
		accel_p[AL_PATH_MAX + 8];
	snprintf(mem, sizeof mem, "%s/mem", vmdir);
	snprintf(state, sizeof state, "%s/state", vmdir);
	snprintf(accel_p, sizeof accel_p, "%s/accel", vmdir);
	if (access(state, R_OK) < 0 || access(mem, R_OK) < 0 ||
	    read_small(accel_p, accel_s, len) < 0)
		return 0;
	if (!al_vm_snapshot_current(vmdir)) {
		/* Taken by an older Airlock: its devices or init may not
		 * match. The controller rebuilds it at its next start. */
		al_warn("vm %s: template snapshot %s is of an older format: "
			"booting instead",
			id, vmdir);
		return 0;
	}
	return 1;
}

/* The template RAM the machine starts on, for its captures
 * (vm/capture.h): needed to resume one, else only logged when missing
 * (the sandbox runs; its captures are refused). */
static int base_open(const al_sandbox_spec *spec, const char *snapdir,
		     vm_priv *p, al_vm_accel accel, al_err *err)
{
	al_err why = {0};
	if (al_vmcap_base_open(&p->cap, snapdir, p->vcpus, accel, &why) == 0)
		return 0;
	if (spec->restore_dir != NULL) {
		*err = why;
		return -1;
	}
	al_warn("vm %s: no captures of it: %s", spec->id, why.msg);
	return 0;
}

static int base_bind(const al_sandbox_spec *spec, vm_priv *p, int mem_fd,
		     al_err *err)
{
	al_err why = {0};
	if (p->cap.tmpl_fd < 0 ||
	    al_vmcap_base_bind(&p->cap, mem_fd, &why) == 0)
		return 0;
	if (spec->restore_dir != NULL) {
		*err = why;
		return -1;
	}
	al_warn("vm %s: no captures of it: %s", spec->id, why.msg);
	al_vmcap_base_free(&p->cap);
	return 0;
}

/* The disk a resumed machine brings (the caller's snapshot of it). */
static int disk_size(const char *disk, uint64_t *size, al_err *err)
{
	struct stat st;
	if (lstat(disk, &st) < 0)
		return al_err_sys(err, AL_ENOENT, errno,
				  "the resumed machine's disk %s", disk);
	if (!S_ISREG(st.st_mode))
		return al_err_set(err, AL_EINVAL, 0,
				  "the resumed machine's disk %s is no file",
				  disk);
	*size = (uint64_t)st.st_size;
	return 0;
}

/* A capture that did not load is not resumable here: AL_ESTATE, so the
 * caller starts the sandbox's disk cold instead. Load (a timeout), or a
 * host short of memory, is not the capture's fault and says so. */
static void resume_failed(al_err *err)
{
	if (err->code != AL_ETIMEDOUT && err->code != AL_ENOMEM &&
	    err->code != AL_EUNAVAIL)
		err->code = AL_ESTATE;
	al_err_wrap(err, "resuming the capture");
}

static int vm_start(const al_sandbox_spec *spec, al_driver_handle *h,
		    al_err *err)
{
	if (h == NULL || spec == NULL)
		return al_err_set(err, AL_EINVAL, 0, "no spec or handle");
	h->init_pid = 0;
	h->agent_fd = -1;
	h->cgroup[0] = '\0';
	h->priv = NULL;
	h->agent_in = NULL;
	if (spec->id == NULL || !al_id_valid(spec->id))
		return al_err_set(err, AL_EINVAL, 0, "invalid sandbox id");
	if (!hostname_ok(spec->hostname))
		return al_err_set(err, AL_EINVAL, 0, "invalid hostname");
	if (spec->rootfs == NULL || spec->rootfs[0] != '/' ||
	    !guest_path_ok(spec->agent))
		return al_err_set(err, AL_EINVAL, 0,
				  "rootfs and agent must be absolute paths");

	char link[AL_PATH_MAX], vmdir[AL_PATH_MAX], disk[AL_PATH_MAX];
	char snapdir[AL_PATH_MAX], tdisk[AL_PATH_MAX], state[AL_PATH_MAX];
	char accel_s[8] = "";
	if (al_vm_path(link, sizeof link, err, "%s/" AL_VM_LINK, spec->rootfs) <
		    0 ||
	    al_vm_path(disk, sizeof disk, err, "%s/" AL_VM_DISK, spec->rootfs) <
		    0)
		return -1;
	ssize_t n = readlink(link, vmdir, sizeof vmdir - 1);
	if (n < 0)
		return al_err_sys(err, AL_ENOENT, errno,
				  "template has no VM image (%s)", link);
	vmdir[n] = '\0';
	if (vmdir[0] != '/' || (size_t)n >= sizeof vmdir - 16)
		return al_err_set(err, AL_EINVAL, 0, "bad %s link", AL_VM_LINK);
	/* The sandbox's own disk and no capture: only a boot fits it. */
	int restore = (spec->own_disk && spec->restore_dir == NULL)
			      ? 0
			      : base_restorable(spec->id, vmdir, accel_s,
						sizeof accel_s);
	/* A capture to resume (vm/capture.h): its RAM is relative to the
	 * template's snapshot, which must be there. */
	const char *resume = spec->restore_dir;
	int own_disk = resume != NULL || spec->own_disk;
	if (resume != NULL && !restore)
		return al_err_set(err, AL_ESTATE, 0,
				  "cannot resume the capture %s: the template "
				  "%s has no current snapshot",
				  resume, vmdir);
	al_vm_kernel kernel;
	al_config cfg;
	if (al_config_load(&cfg, err) < 0)
		return -1;
	vm_priv *p = calloc(1, sizeof *p);
	if (p == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	al_vm_machine_init(&p->m);
	al_vmcap_base_init(&p->cap);
	p->vcpus = al_vm_shape_vcpus(spec->limits.cpu_millis);
	al_autofd int agent_fd = -1, tap_fd = -1, state_fd = -1, mem_fd = -1;
	char runlink[AL_PATH_MAX] = "";
	int cg_made = 0, disk_made = 0;
	al_vmcap_load ld = {.mem_fd = -1, .state_fd = -1};
	uint8_t macb[6];
	char mac[AL_VM_MAC_STRLEN], net[AL_VM_NET_STRLEN];
	al_vm_launch l = {.agent = spec->agent,
			  .disk = disk,
			  .mem_fd = -1,
			  .vcpus = p->vcpus};
	/* The leaf first: a snapshot of the sandbox's shape that has to be
	 * made boots in it, charged to the sandbox. */
	al_cgroup_limits lim = vm_limits(spec);
	if (al_cgroup_create(spec->id, &lim, err) < 0)
		goto fail;
	cg_made = 1;
	snprintf(h->cgroup, sizeof h->cgroup, "%s", spec->id);
	l.cgroup = spec->id;
	l.accel = strcmp(accel_s, "kvm") == 0 ? AL_VM_KVM : AL_VM_TCG;
	/* A cold boot (no base snapshot) boots the template's disk. */
	int src = restore ? al_vm_shape_dir(vmdir, p->vcpus, l.accel,
					    cfg.state_dir, spec->id, snapdir,
					    sizeof snapdir, err)
			  : al_vm_path(snapdir, sizeof snapdir, err, "%s",
				       vmdir);
	if (src < 0)
		goto fail;
	if (al_vm_path(tdisk, sizeof tdisk, err, "%s/disk.ext4", snapdir) < 0 ||
	    al_vm_path(state, sizeof state, err, "%s/state", snapdir) < 0)
		goto fail;
	int64_t t0 = al_now_ms();
	if (restore) {
		l.mode = AL_VM_CLONE;
		l.devices_only = resume != NULL;
		if (base_open(spec, snapdir, p, l.accel, err) < 0)
			goto fail;
		if (resume != NULL) {
			if (al_vmcap_open(resume, &p->cap, &ld, err) < 0)
				goto fail;
			state_fd = al_steal_fd(&ld.state_fd);
		} else {
			state_fd = open(state, O_RDONLY | O_CLOEXEC);
		}
		if (state_fd < 0) {
			al_err_sys(err, AL_ENOENT, errno, "open %s", state);
			goto fail;
		}
		int shared;
		mem_fd = al_vmmem_get(cfg.run_dir, snapdir, &shared, err);
		if (mem_fd < 0)
			goto fail;
		l.mem_fd = mem_fd;
		if (base_bind(spec, p, mem_fd, err) < 0)
			goto fail;
	} else {
		if (al_vm_kernel_find(cfg.state_dir, &kernel, err) < 0)
			goto fail;
		l.mode = AL_VM_COLD;
		l.kernel = &kernel;
		l.accel = al_vm_accel_load(cfg.state_dir);
	}
	/* A resumed machine's disk is the one its capture went with. */
	if (own_disk ? disk_size(disk, &p->disk_size, err) < 0
		     : disk_clone(tdisk, disk, &p->disk_size, err) < 0)
		goto fail;
	disk_made = !own_disk;
	if (al_vm_mac_for_id(spec->id, macb, err) < 0)
		goto fail;
	al_vm_mac_format(macb, mac);
	al_vm_net_format(spec->net, net);
	/* The slot's rules accept the sandbox's MAC and no other; QEMU's
	 * NIC gets the tap (mode "none": no slot, a NIC without a peer). */
	if (spec->net != NULL) {
		if (al_netslot_set_mac(spec->net, macb, err) < 0)
			goto fail;
		tap_fd = al_netslot_tap_open(spec->net, err);
		if (tap_fd < 0)
			goto fail;
	}
	l.tap_fd = tap_fd;
	if (al_vmjail_uid_take(spec->id, &p->m.uid, err) < 0)
		goto fail;
	l.uid = p->m.uid.uid;
	if (al_vm_rundir_make(p->m.rundir, sizeof p->m.rundir, err) < 0)
		goto fail;
	l.rundir = p->m.rundir;
	/* Where the run directory is, for whoever releases the sandbox
	 * when its shim died without doing it (al_reap_sandbox). */
	if (al_vm_path(runlink, sizeof runlink, err, "%s/" AL_VM_RUNLINK,
		       spec->rootfs) == 0) {
		unlink(runlink);
		if (symlink(p->m.rundir, runlink) < 0)
			al_warn("vm %s: link %s: %s", spec->id, runlink,
				strerror(errno));
	}
	int rc = restore ? al_vm_machine_restore(&p->m, &l, state_fd,
						 resume != NULL
							 ? al_vmcap_before_load
							 : NULL,
						 &ld, &agent_fd, err)
			 : al_vm_machine_boot(&p->m, &l, &agent_fd, err);
	if (rc < 0 && resume != NULL)
		resume_failed(err);
	else if (rc < 0 && restore && err->code != AL_ETIMEDOUT) {
		/* A snapshot this QEMU cannot load (a damaged file, a QEMU
		 * changed under it): boot the template instead, seconds not
		 * milliseconds, and say why. A timeout is load, not a bad
		 * snapshot: it fails the create like any other. */
		al_vm_machine_explain(&p->m, 0, err);
		al_warn("vm %s: restoring %s failed (%s): booting it instead",
			spec->id, vmdir, err->msg);
		al_vm_machine_kill(&p->m, &agent_fd);
		restore = 0;
		unlink(disk);
		if (disk_clone(tdisk, disk, &p->disk_size, err) < 0 ||
		    al_vm_kernel_find(cfg.state_dir, &kernel, err) < 0)
			goto fail;
		l.mode = AL_VM_COLD;
		l.kernel = &kernel;
		l.mem_fd = -1;
		l.accel = al_vm_accel_load(cfg.state_dir);
		rc = al_vm_machine_boot(&p->m, &l, &agent_fd, err);
	}
	if (rc < 0)
		goto fail;
	int64_t t1 = al_now_ms();
	/* A resumed guest's init and agent run already (the agent paused,
	 * AL_F_PAUSE): no GO; the caller sends RESUME and IDENTITY. */
	if (resume == NULL &&
	    al_vm_machine_go(agent_fd, spec->hostname, mac, net, err) < 0)
		goto fail;
	if (resume != NULL)
		al_vmcap_base_take(&p->cap, &ld);
	al_info("vm %s: %u vCPU%s %s under %s in %lld ms%s", spec->id, p->vcpus,
		p->vcpus == 1 ? "" : "s",
		resume != NULL ? "resumed"
		: restore      ? "restored"
			       : "booted",
		al_vm_accel_name(l.accel), (long long)(t1 - t0),
		resume != NULL ? " from its capture" : "");
	p->accel = l.accel;
	h->init_pid = p->m.pid;
	h->agent_fd = al_steal_fd(&agent_fd);
	h->priv = p;
	al_vmcap_close(&ld);
	return 0;
fail:
	al_vm_machine_explain(&p->m, 0, err);
	al_err_wrap(err, "starting vm %s", spec->id);
	al_vmcap_close(&ld);
	priv_free(p);
	if (cg_made) {
		al_err tmp_err = {0};
		if (al_cgroup_destroy(spec->id, &tmp_err) < 0)
			al_warn("vm %s: %s", spec->id, tmp_err.msg);
	}
	h->cgroup[0] = '\0';
	if (disk_made)
		unlink(disk);
	if (runlink[0] != '\0')
		unlink(runlink);
	return -1;
}

static int vm_stop(al_driver_handle *h, al_err *err)
{
	(void)err;
	if (h == NULL)
		return 0;
	vm_priv *p = h->priv;
	if (h->agent_fd >= 0) {
		close(h->agent_fd);
		h->agent_fd = -1;
	}
	if (p != NULL) {
		al_vm_machine_quit(&p->m);
		/* Gone already, or SIGKILL now; reaped either way (ECHILD if
		 * the shim's SIGCHLD handling got there first). */
		priv_free(p);
	}
	h->priv = NULL;
	h->init_pid = 0;
	/* Last, and kept for a retry if the leaf is still emptying. */
	if (h->cgroup[0] != '\0') {
		if (al_cgroup_destroy(h->cgroup, err) < 0)
			return -1;
		h->cgroup[0] = '\0';
	}
	return 0;
}

/* Request ids of the driver's own requests to the agent (agentproto.h):
 * the shim's relay hands out ids from 1 upwards and has served none yet
 * when the driver asks (a standby serves none; a start grows before going
 * live). */
#define VM_IDENTITY_ID AL_REQ_ID_VM_IDENTITY
#define VM_DISK_ID AL_REQ_ID_VM_DISK_GROW
#define VM_ADOPT_TIMEOUT_MS 5000
/* The agent waits up to 5 s for the device; the resize itself is ms. */
#define VM_GROW_TIMEOUT_MS 15000

/* Send the agent one request and wait for its answer: 0 on RESULT. Sent
 * synchronously on h->agent_fd: the shim asks the driver only while no
 * request is in flight on the agent channel, so the answer is the next
 * frame of that id; stray output of the guest's own making is dropped.
 * Read through the owner's reader (h->agent_in), which may hold bytes. */
static int agent_call(al_driver_handle *h, uint16_t type, uint32_t id,
		      const char *body, size_t len, int timeout_ms, al_err *err)
{
	if (al_frame_send(h->agent_fd, type, id, body, len, err) < 0)
		return -1;
	al_frame_reader own;
	al_frame_reader_init(&own);
	al_frame_reader *rd = h->agent_in != NULL ? h->agent_in : &own;
	int64_t deadline = al_now_ms() + timeout_ms;
	int rc;
	for (;;) {
		al_frame f;
		if (al_frame_recv(h->agent_fd, rd, &f, deadline, err) < 0) {
			rc = -1;
			break;
		}
		if (f.id != id) {
			al_frame_free(&f);
			continue;
		}
		if (f.type == AL_F_RESULT) {
			rc = 0;
		} else {
			/* The guest's words, bounded and printable: for the
			 * log, never to act on. */
			char why[161] = "";
			for (size_t i = 0; f.type == AL_F_ERROR && i < f.len &&
					   i < sizeof why - 1;
			     i++) {
				char c = (char)f.payload[i];
				why[i] = c >= ' ' && c <= '~' ? c : '?';
				why[i + 1] = '\0';
			}
			rc = al_err_set(err, AL_EPROTO, 0,
					"the guest refused %s (%s %s)",
					al_frame_type_name(type),
					al_frame_type_name(f.type), why);
		}
		al_frame_free(&f);
		break;
	}
	al_frame_reader_free(&own);
	return rc;
}

/* Its vCPUs are its snapshot's, for good: only a sandbox of as many
 * takes it over. */
static int vm_fits(const al_driver_handle *h, const al_limits *l)
{
	const vm_priv *p = h != NULL ? h->priv : NULL;
	return p != NULL && p->vcpus == al_vm_shape_vcpus(l->cpu_millis);
}

/* A standby VM becomes sandbox spec->id: the agent sets the hostname,
 * reseeds the kernel RNG from the host and takes the host's clock (the
 * GO line gave it the standby's), by agent_call. The machine's rootfs
 * moved with the shim's rename; QEMU holds its disk open and needs
 * nothing else. */
static int vm_adopt(al_driver_handle *h, const al_sandbox_spec *spec,
		    al_err *err)
{
	if (h == NULL || h->priv == NULL || h->agent_fd < 0 || spec == NULL)
		return al_err_set(err, AL_ESTATE, 0, "vm not running");
	if (spec->id == NULL || !al_id_valid(spec->id) ||
	    !hostname_ok(spec->hostname))
		return al_err_set(err, AL_EINVAL, 0,
				  "invalid sandbox id or hostname");
	if (!vm_fits(h, &spec->limits))
		return al_err_set(err, AL_EINVAL, 0,
				  "this vm has %u vCPUs, sandbox %s needs %u",
				  ((const vm_priv *)h->priv)->vcpus, spec->id,
				  al_vm_shape_vcpus(spec->limits.cpu_millis));
	/* The standby's limits leaf takes the sandbox's name and share. */
	if (h->cgroup[0] != '\0' && strcmp(h->cgroup, spec->id) != 0) {
		if (al_cgroup_rename(h->cgroup, spec->id, err) < 0)
			return -1;
		snprintf(h->cgroup, sizeof h->cgroup, "%s", spec->id);
	}
	al_cgroup_limits lim = vm_limits(spec);
	if (h->cgroup[0] != '\0' &&
	    al_cgroup_set_limits(h->cgroup, &lim, err) < 0)
		return -1;
	char hex[AL_VM_ENTROPY_HEX];
	if (al_vm_entropy_hex(hex, err) < 0)
		return -1;
	/* The standby's NIC has the standby's MAC (its GO line): it takes
	 * the sandbox's, which the API reports and the gateway expects. */
	uint8_t macb[6];
	if (al_vm_mac_for_id(spec->id, macb, err) < 0) {
		explicit_bzero(hex, sizeof hex);
		return -1;
	}
	/* The slot's rules follow the MAC first: frames with the new one
	 * must pass once the guest uses it. */
	if (spec->net != NULL && al_netslot_set_mac(spec->net, macb, err) < 0) {
		explicit_bzero(hex, sizeof hex);
		return -1;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	al_vm_identity id = {
		.time_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
	};
	snprintf(id.hostname, sizeof id.hostname, "%s", spec->hostname);
	memcpy(id.entropy, hex, sizeof id.entropy);
	explicit_bzero(hex, sizeof hex);
	al_vm_mac_format(macb, id.mac);
	al_vm_net_format(spec->net, id.net);
	char *body = al_vm_identity_pack(&id, err);
	explicit_bzero(&id, sizeof id);
	if (body == NULL)
		return -1;
	size_t blen = strlen(body);
	int rc = agent_call(h, AL_F_IDENTITY, VM_IDENTITY_ID, body, blen,
			    VM_ADOPT_TIMEOUT_MS, err);
	explicit_bzero(body, blen);
	free(body);
	if (rc < 0)
		al_err_wrap(err, "adopting vm as %s", spec->id);
	return rc;
}

/* The guest's filesystem grows online: QEMU resizes the image (the guest
 * kernel gets a config interrupt and the new capacity), then the agent
 * grows the mounted ext4 to it. The size is the host's alone, from the
 * sandbox's limit; the guest only says whether it did it. */
static int vm_grow_disk(al_driver_handle *h, uint64_t bytes, al_err *err)
{
	vm_priv *p = h != NULL ? h->priv : NULL;
	if (p == NULL || p->m.qmp == NULL || h->agent_fd < 0)
		return al_err_set(err, AL_ESTATE, 0, "vm not running");
	uint64_t want = al_vm_disk_size(p->disk_size, bytes);
	if (want == p->disk_size)
		return 0;
	json_object *args = json_object_new_object();
	json_object_object_add(args, "device", json_object_new_string("vda"));
	json_object_object_add(args, "size",
			       json_object_new_int64((int64_t)want));
	int rc = al_qmp_run(p->m.qmp, "block_resize", args,
			    al_now_ms() + VM_GROW_TIMEOUT_MS, err);
	json_object_put(args);
	al_autofree char *body = rc == 0 ? al_disk_grow_pack("/", want, err)
					 : NULL;
	if (rc == 0 && body == NULL)
		rc = -1;
	if (rc == 0)
		rc = agent_call(h, AL_F_DISK_GROW, VM_DISK_ID, body,
				strlen(body), VM_GROW_TIMEOUT_MS, err);
	if (rc < 0) {
		al_err_wrap(err, "growing the vm's disk to %llu MiB",
			    (unsigned long long)(want >> 20));
		return -1;
	}
	p->disk_size = want;
	return 1;
}

static int vm_pause_resume(al_driver_handle *h, const char *cmd, al_err *err)
{
	vm_priv *p = h != NULL ? h->priv : NULL;
	if (p == NULL || p->m.qmp == NULL)
		return al_err_set(err, AL_ESTATE, 0, "vm not running");
	return al_qmp_run(p->m.qmp, cmd, NULL, al_now_ms() + 5000, err);
}

static int vm_pause(al_driver_handle *h, al_err *err)
{
	return vm_pause_resume(h, "stop", err);
}

static int vm_resume(al_driver_handle *h, al_err *err)
{
	return vm_pause_resume(h, "cont", err);
}

static int vm_capture(al_driver_handle *h, const char *dir,
		      al_capture_stats *st, al_err *err)
{
	vm_priv *p = h != NULL ? h->priv : NULL;
	if (p == NULL || dir == NULL || st == NULL)
		return al_err_set(err, AL_ESTATE, 0, "vm not running");
	return al_vmcap_save(&p->m, &p->cap, dir, st, err);
}

al_vm_machine *al_vm_driver_machine(const al_driver_handle *h)
{
	vm_priv *p = h != NULL ? h->priv : NULL;
	return p != NULL ? &p->m : NULL;
}

static const char *vm_accel(const al_driver_handle *h)
{
	const vm_priv *p = h != NULL ? h->priv : NULL;
	return al_vm_accel_name(p != NULL ? p->accel : AL_VM_TCG);
}

const al_driver al_driver_vm = {
	.name = "vm",
	.init_name = "virtual machine (QEMU)",
	.warm_up = 1,
	.start = vm_start,
	.stop = vm_stop,
	.adopt = vm_adopt,
	.fits = vm_fits,
	.net_kind = AL_NETSLOT_VM,
	.grow_disk = vm_grow_disk,
	.pause = vm_pause,
	.resume = vm_resume,
	.capture = vm_capture,
	.accel = vm_accel,
};
