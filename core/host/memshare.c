#include "host/memshare.h"

#define SHM_BYTES_PER_INODE (64u << 10)
/* Enough files for a program's few segments even at the smallest limit. */
#define SHM_MIN_INODES 256u

void al_memshare_of(uint64_t limit_bytes, uint64_t page_size, al_memshare *out)
{
	out->shm_bytes = limit_bytes / 2;
	out->shm_inodes = out->shm_bytes / SHM_BYTES_PER_INODE;
	if (out->shm_inodes < SHM_MIN_INODES)
		out->shm_inodes = SHM_MIN_INODES;
	out->sysv_bytes = limit_bytes / 4;
	out->sysv_pages = out->sysv_bytes / page_size;
	/* msgmni 0 would still allow nothing; one queue is the least a
	 * program asking for one can use. */
	out->msg_queues = limit_bytes / 16 / AL_MEMSHARE_MSGMNB;
	if (out->msg_queues == 0)
		out->msg_queues = 1;
}
