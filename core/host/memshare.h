/* memshare: the share of a sandbox's memory limit that may outlive its
 * processes.
 *
 * Pages of a tmpfs, of a SysV shared memory segment or of a SysV message
 * queue are charged to the sandbox's memory cgroup but belong to no
 * process: the OOM killer cannot free them by killing anyone. Filled
 * without a bound (a tmpfs's default is half the host's RAM) they leave
 * the sandbox's processes, its agent among them, no memory at all. Each
 * such store gets a size inside the limit so that at least 3/16 of it
 * always stays for processes, where the OOM killer finds the offender:
 *
 *   /dev/shm (tmpfs)      half the limit (what programs that share
 *                         memory through it expect room for), an inode
 *                         per 64 KiB of it (each costs ~1 KiB besides)
 *   SysV shm (shmall)     a quarter (shmmax the same: one segment may
 *                         take it all)
 *   SysV msg (msgmni)     a sixteenth, in queues of the default 16 KiB
 *
 * The ns jail applies it (driver_ns.c); a vm's guest kernel keeps its own
 * RAM (guest/init/init.c sizes its tmpfs mounts). */
#ifndef AL_MEMSHARE_H
#define AL_MEMSHARE_H

#include <stddef.h>
#include <stdint.h>

/* One SysV message queue's bytes (the kernel's MSGMNB default, which
 * only a host CAP_SYS_RESOURCE may raise for a queue). */
#define AL_MEMSHARE_MSGMNB 16384u

typedef struct al_memshare {
	uint64_t shm_bytes;  /* /dev/shm size= */
	uint64_t shm_inodes; /* /dev/shm nr_inodes= */
	uint64_t sysv_bytes; /* kernel.shmmax */
	uint64_t sysv_pages; /* kernel.shmall, in pages of page_size */
	uint64_t msg_queues; /* kernel.msgmni */
} al_memshare;

/* The shares of limit_bytes (> 0) with pages of page_size bytes. */
void al_memshare_of(uint64_t limit_bytes, uint64_t page_size, al_memshare *out);

#endif
