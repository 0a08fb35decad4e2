#include "sandbox/machine_end.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

void al_machine_end_reason(const char *init_name, int wstatus,
			   const al_cgroup_memory *mem, uint64_t limit_bytes,
			   char *out, size_t outlen)
{
	if (WIFEXITED(wstatus)) {
		snprintf(out, outlen, "the sandbox's %s exited with %d",
			 init_name, WEXITSTATUS(wstatus));
		return;
	}
	int sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
	if (sig != SIGKILL || mem == NULL || mem->oom_kills == 0) {
		snprintf(out, outlen,
			 "the sandbox's %s was killed by signal %d", init_name,
			 sig);
		return;
	}
	uint64_t cg = mem->limit_bytes;
	if (limit_bytes == 0)
		limit_bytes = cg;
	if (limit_bytes == 0) {
		snprintf(out, outlen,
			 "out of memory: the kernel's OOM killer ended the "
			 "sandbox's %s",
			 init_name);
		return;
	}
	/* A vm's cgroup holds the guest's RAM and the emulator's own. */
	char whole[64] = "";
	if (cg > limit_bytes)
		snprintf(whole, sizeof whole,
			 " (%llu MiB with the machine's own)",
			 (unsigned long long)(cg >> 20));
	snprintf(out, outlen,
		 "out of memory: the sandbox's memory limit is %llu MiB%s; the "
		 "kernel's OOM killer ended its %s",
		 (unsigned long long)(limit_bytes >> 20), whole, init_name);
}
