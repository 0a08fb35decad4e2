/* uidrange: host uid ranges, each held by one live owner on the host.
 *
 * A pool is a block of host uids cut into equal slots; slot i is held
 * while an exclusive flock on <dir>/<i> is held. Locks die with their
 * holder (close, exit, crash), so a slot is never lost and never shared
 * by two live holders, whichever Airlock state dir they run under. The
 * lock directory is on tmpfs (/run): every lock is gone after a reboot.
 *
 * Three pools today, apart from each other and from the ranges Debian
 * gives users and containers (/etc/subuid starts at 100000), systemd's
 * (dynamic users below 65536, nspawn's containers up to 0x6FFFFFFF, the
 * foreign range at 0x7FFE0000) and 2^31 and above (uids some tools take
 * for negative numbers):
 *   vm: one uid per jailed QEMU, [1900000000, +65536)  (vm/jail.h)
 *   ns: 65536 uids per ns sandbox's user namespace,
 *       [0x72000000, +2048 x 65536) = [1912602624, 2046820352)
 *   gw: one uid per sandbox's egress gateway (core/net/gwlaunch.h),
 *       [1900065536, +65536), right after vm's; the mint service
 *       (controller/mint.h) serves only root and this range */
#ifndef AL_UIDRANGE_H
#define AL_UIDRANGE_H

#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

typedef struct al_uidrange_pool {
	const char *dir; /* lock directory: root-owned, mode 0700 */
	uint32_t base;	 /* first uid of slot 0 */
	uint32_t size;	 /* uids per slot */
	uint32_t slots;
	const char *what; /* what holds a slot, for "all in use" */
} al_uidrange_pool;

typedef struct al_uidrange {
	uid_t base;  /* first uid of the slot held; 0 when none is held */
	int lock_fd; /* the flock that holds it: closing it frees the slot */
} al_uidrange;

#define AL_UIDRANGE_VM_BASE 1900000000u
#define AL_UIDRANGE_VM_COUNT 65536u
#define AL_UIDRANGE_GW_BASE 1900065536u
#define AL_UIDRANGE_GW_COUNT 65536u
#define AL_UIDRANGE_NS_BASE 0x72000000u
#define AL_UIDRANGE_NS_SIZE 65536u
#define AL_UIDRANGE_NS_SLOTS 2048u

extern const al_uidrange_pool al_uidrange_vm;
extern const al_uidrange_pool al_uidrange_ns;
extern const al_uidrange_pool al_uidrange_gw;

/* Take a slot no other live holder on this host has; the search starts
 * at a place derived from hint (a sandbox id) so holders rarely contend.
 * The slot is held while r->lock_fd is open (by this process and by any
 * child that inherits it). */
int al_uidrange_take(const al_uidrange_pool *p, const char *hint,
		     al_uidrange *r, al_err *err);
/* Free the slot; harmless on an empty or already dropped range. */
void al_uidrange_drop(al_uidrange *r);

#endif
