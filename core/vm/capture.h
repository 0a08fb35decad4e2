/* vm capture: a running vm's memory and devices saved as "its template's
 * RAM plus the pages the guest wrote since", and loaded back into a new
 * QEMU (the lifecycle's suspend, snapshots and fork; the driver's
 * capture() and a start's restore_dir, core/driver.h).
 *
 * Every vm maps its template's RAM privately (vm/mem.h): a page the guest
 * never wrote is still the template's, a written one is an anonymous
 * copy. So a capture reads /proc/<qemu>/pagemap over QEMU's RAM mapping
 * (found in /proc/<qemu>/maps by the device and inode of the sealed memfd
 * it was given), and saves only the written pages, read from
 * /proc/<qemu>/mem; its cost follows what the guest wrote, not its size.
 * A restore starts QEMU on the template's memfd again (its pages stay
 * shared with every other clone), writes the saved pages into its RAM
 * mapping (copy-on-write there too) before the device state is loaded,
 * and runs it.
 *
 * Files of a capture directory DIR (all 0600, fsynced; the guest's
 * memory is as private as the guest):
 *   DIR/devstate  device state (QMP xen-save-devices-state): every
 *                 device and vCPU, no RAM, a few KB
 *   DIR/mem       guest RAM, AL_VM_MEM_MB MiB: a reflink of the
 *                 template snapshot's mem with every written page
 *                 overwritten (a second capture of the same machine
 *                 reflinks the first and rewrites only the pages that
 *                 changed since)
 *   DIR/pages     bitmap, bit i (byte i/8, bit i%8) set when page i of
 *                 mem is not the template's: what a restore writes
 *   DIR/meta      "key=value" lines: what a restore checks before it
 *                 loads anything (AL_VMCAP_META_* below)
 *
 * Only the host writes these files; still, a restore reads them as
 * bounded, strictly parsed input. The pages of a guest are copied
 * byte for byte at offsets of the host's own computing: nothing the
 * guest wrote is ever used as a size or offset. The shim touches no
 * memory of QEMU's but the one RAM mapping it identified, bounded by its
 * size. */
#ifndef AL_VM_CAPTURE_H
#define AL_VM_CAPTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/config.h"
#include "base/err.h"
#include "driver.h"
#include "vm/guest.h"
#include "vm/machine.h"

/* The layout above; raised when it changes. A capture is loadable only
 * under the same layout, AL_VM_SNAPSHOT_FORMAT (devices, init and agent
 * protocol), QEMU version, accelerator and vCPU count, and with the very
 * template RAM it was taken against. */
#define AL_VMCAP_LAYOUT "1"
#define AL_VMCAP_PAGE 4096u
#define AL_VMCAP_META_MAX 4096

/* What a capture was taken from and under: DIR/meta. */
typedef struct al_vmcap_meta {
	char layout[8];
	char format[8];		/* AL_VM_SNAPSHOT_FORMAT */
	char qemu[96];		/* al_vm_machine_version */
	char accel[8];		/* "tcg", "kvm" */
	uint64_t vcpus;		/* -smp */
	uint64_t ram;		/* guest RAM bytes (AL_VM_MEM_MB MiB) */
	char base[AL_PATH_MAX]; /* the template snapshot dir (VMDIR or
				 * VMDIR/vcpus-N) whose mem it is relative to */
	/* base/mem as it was: a rebuilt template has another file there. */
	uint64_t base_ino, base_size, base_mtime_ns;
	uint64_t dirty_pages; /* bits set in DIR/pages */
} al_vmcap_meta;

/* Format m as DIR/meta's text into out (NUL terminated); its length, or
 * -1 when it does not fit. */
int al_vmcap_meta_format(const al_vmcap_meta *m, char *out, size_t len);
/* Parse DIR/meta's text: every key once, known keys only, values in
 * range; AL_ESTATE naming the line otherwise (an unreadable capture is
 * one a start cannot resume). */
int al_vmcap_meta_parse(const char *text, size_t len, al_vmcap_meta *m,
			al_err *err);

/* The template RAM a machine was started on, and its last capture: what
 * its next capture is relative to. Kept by the driver for the machine's
 * life (al_vmcap_base_free). */
typedef struct al_vmcap_base {
	char snapdir[AL_PATH_MAX]; /* "" when it has none (a cold boot) */
	int tmpl_fd;		   /* snapdir/mem, opened at the start */
	uint64_t tmpl_ino, tmpl_size, tmpl_mtime_ns;
	dev_t ram_dev; /* the sealed memfd QEMU maps its RAM from */
	ino_t ram_ino;
	uint64_t ram; /* its size: the RAM mapping's */
	unsigned vcpus;
	al_vm_accel accel;
	/* The last capture of this machine's memory (or the one it was
	 * restored from): its mem, kept open, and its page bitmap. -1 and
	 * NULL before the first. */
	int prev_fd;
	uint8_t *prev_pages;
} al_vmcap_base;

void al_vmcap_base_init(al_vmcap_base *b);
void al_vmcap_base_free(al_vmcap_base *b);
/* Before a machine's RAM is asked for: open snapdir/mem, the template
 * RAM it will be started on, and note what it is. */
int al_vmcap_base_open(al_vmcap_base *b, const char *snapdir, unsigned vcpus,
		       al_vm_accel accel, al_err *err);
/* Once the sealed memfd ram_fd (vm/mem.h) is at hand: note its identity,
 * and check that it is a copy of the file opened (same size, and the
 * path still names that file, so no rebuild of the template swapped it
 * in between). AL_ESTATE otherwise. */
int al_vmcap_base_bind(al_vmcap_base *b, int ram_fd, al_err *err);

/* Find QEMU's guest RAM in the text of its /proc/<pid>/maps: the one
 * private writable mapping of the whole of file (dev, ino) from offset
 * 0, ram bytes long. AL_EPROTO when there is none or more than one (a
 * QEMU that mapped it again or in parts is not one to read from).
 * Exposed for tests and fuzzing. */
int al_vmcap_find_ram(const char *maps, size_t len, dev_t dev, ino_t ino,
		      uint64_t ram, uint64_t *start, al_err *err);

/* /proc/<pid> of the process pidfd follows, opened while it lives (so
 * that a reused pid cannot stand in for it); pidfd -1: unchecked (a
 * test's own process). AL_ESTATE when it is gone. */
int al_vmcap_proc_open(pid_t pid, int pidfd, al_err *err);

/* The pages of the process's (proc: al_vmcap_proc_open) mapping of file
 * (dev, ino), found as al_vmcap_find_ram does and checked against its
 * map_files, that were written since it was mapped: bit i of map (ram /
 * 4096 bits, zeroed by the caller) for page i. *start is the mapping's
 * address. Exposed for tests and benches. */
int al_vmcap_dirty_pages(int proc, dev_t dev, ino_t ino, uint64_t ram,
			 uint8_t *map, uint64_t *start, al_err *err);

/* Save the stopped machine m (QMP stop done; AL_ESTATE if it runs) into
 * dir, an existing empty directory: the files above. m's guest stays
 * stopped. On success b's last capture is this one; on failure the
 * files it made are removed and b is unchanged. */
int al_vmcap_save(al_vm_machine *m, al_vmcap_base *b, const char *dir,
		  al_capture_stats *st, al_err *err);

/* A capture to restore, opened and checked (al_vmcap_open) before any
 * QEMU starts. */
typedef struct al_vmcap_load {
	al_vmcap_meta meta;
	int mem_fd;		   /* dir/mem */
	int state_fd;		   /* dir/devstate */
	uint8_t *pages;		   /* dir/pages */
	const al_vmcap_base *base; /* the RAM the new QEMU maps */
	size_t written;		   /* pages written into it */
} al_vmcap_load;

/* Open the capture in dir for a machine about to start on b's template
 * RAM (al_vmcap_base_open done): read its meta and check its layout,
 * format, accelerator and vCPUs against b's, and that it was taken
 * against b's very template file; open mem, devstate and pages (sizes
 * checked). AL_ESTATE, naming what differs, when the capture cannot be
 * resumed here as it is (the caller starts the disk cold instead);
 * AL_ENOENT when a file is missing. */
int al_vmcap_open(const char *dir, const al_vmcap_base *b, al_vmcap_load *ld,
		  al_err *err);
void al_vmcap_close(al_vmcap_load *ld);

/* The al_vm_before_load of a restore of ld (arg): checks QEMU's version
 * against the meta (AL_ESTATE) and writes the saved pages into its RAM
 * mapping. */
int al_vmcap_before_load(al_vm_machine *m, void *arg, al_err *err);

/* After a restore of ld: b's last capture is ld's (its mem and pages
 * move to b). */
void al_vmcap_base_take(al_vmcap_base *b, al_vmcap_load *ld);

#endif
