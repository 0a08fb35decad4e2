/* forge_frames SECONDS [PID]: take the agent's channel to the shim (its
 * fd 3, through pidfd_getfd) and send session ERROR frames on it as fast
 * as it can for SECONDS: a hostile guest flooding the shim's log. Without
 * PID it runs inside a vm guest as root and finds the agent (a child of
 * init); in an ns jail the agent is out of reach from inside (not
 * dumpable, pidfd_getfd refused), so the test runs this on the host with
 * the agent's host PID, standing in for a compromised agent. Prints
 * "sent N" and exits 0, or exits 3 saying why the channel could not be
 * had. Built static by the test. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The channel is the agent's, non-blocking: wait for room, and finish
 * a frame once begun (a torn frame would end the session). */
static int send_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			poll(&pfd, 1, 1000);
			continue;
		}
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* The lowest pid whose name is airlock-agent: the agent itself (what it
 * runs has its own names once exec'd). */
static int agent_pid(void)
{
	int best = -1;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		int pid = atoi(e->d_name);
		char p[64], comm[32] = "";
		if (pid <= 0)
			continue;
		snprintf(p, sizeof p, "/proc/%d/comm", pid);
		FILE *f = fopen(p, "r");
		if (f == NULL)
			continue;
		if (fgets(comm, sizeof comm, f) != NULL &&
		    strcmp(comm, "airlock-agent\n") == 0 &&
		    (best < 0 || pid < best))
			best = pid;
		fclose(f);
	}
	if (d != NULL)
		closedir(d);
	return best;
}

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 20;
	int pid = argc > 2 ? atoi(argv[2]) : agent_pid();
	int pfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	int fd = pfd >= 0 ? (int)syscall(SYS_pidfd_getfd, pfd, 3, 0) : -1;
	if (fd < 0) {
		printf("no channel: %s\n", strerror(errno));
		return 3;
	}
	static const char body[] =
		"{\"code\":\"internal\",\"message\":\"forged session error\"}";
	unsigned char frame[16 + sizeof body];
	put32(frame, 0x414c4631u);
	frame[4] = 0;
	frame[5] = 15; /* AL_F_ERROR */
	frame[6] = frame[7] = 0;
	put32(frame + 8, 0);
	put32(frame + 12, sizeof body - 1);
	memcpy(frame + 16, body, sizeof body - 1);
	time_t end = time(NULL) + secs;
	unsigned long sent = 0;
	while (time(NULL) < end) {
		for (int i = 0; i < 256; i++) {
			if (send_all(fd, frame, 16 + sizeof body - 1) < 0) {
				printf("write: %s after %lu\n", strerror(errno),
				       sent);
				return 4;
			}
			sent++;
		}
	}
	printf("sent %lu\n", sent);
	return 0;
}
