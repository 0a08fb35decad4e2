/* vmmem: the guest RAM every restored VM of a template starts from.
 *
 * A template's base snapshot keeps guest RAM in VMDIR/mem. A clone maps
 * it privately (copy-on-write), but QEMU 7.2 opens that file read-write
 * even then, and a jailed QEMU must not be able to write the pages every
 * later clone starts from. So clones get the RAM as a memfd sealed
 * against writes, growth and shrinking (F_SEAL_WRITE/GROW/SHRINK/SEAL):
 * QEMU may open and map it privately; a write(2) or a shared writable
 * mapping fails, for root too.
 *
 * One sealed copy per template version is made and held by the
 * controller, which hands it to every shim that restores a clone over
 * STATE/run/vm-mem.sock (SCM_RIGHTS): clones share its pages. A shim that
 * cannot reach the controller makes a private sealed copy (correct, but
 * those pages are not shared) and logs it. */
#ifndef AL_VMMEM_H
#define AL_VMMEM_H

#include "base/err.h"

#define AL_VMMEM_SOCK "vm-mem.sock"
#define AL_VMMEM_SEALS_ALL 0x000f /* F_SEAL_SEAL|SHRINK|GROW|WRITE */

/* A new memfd holding the file at path, sealed. */
int al_vmmem_sealed_copy(const char *path, al_err *err);

/* 1 if fd is a memfd with every seal above set. */
int al_vmmem_is_sealed(int fd);

/* The sealed RAM of the template snapshot in vmdir: the controller's
 * shared copy, asked at run_dir/vm-mem.sock, else a private one
 * (*shared = 0). */
int al_vmmem_get(const char *run_dir, const char *vmdir, int *shared,
		 al_err *err);

typedef struct al_vmmem_server al_vmmem_server;

/* Serve sealed copies of VMDIR/mem for vmdirs under pool_dir, from a
 * thread, to root peers on run_dir/vm-mem.sock. */
al_vmmem_server *al_vmmem_serve(const char *run_dir, const char *pool_dir,
				al_err *err);
/* Drop copies whose file is gone or changed (old template versions). */
void al_vmmem_prune(al_vmmem_server *s);
void al_vmmem_stop(al_vmmem_server *s);

#endif
