/* probe: what the red-team suite runs as root inside a sandbox, for the
 * attempts busybox cannot make. Each prints one line "<what>: <outcome>"
 * and exits 0 when the kernel refused, 1 when the attempt succeeded
 * (an escape), 2 on a usage or setup error.
 *   probe handle          open_by_handle_at: "/" by its own handle, and a
 *                         forged handle of the btrfs top-level subvolume
 *   probe ptrace PID      PTRACE_ATTACH, PTRACE_SEIZE, /proc/PID/mem,
 *                         process_vm_readv
 *   probe inotify N SECS  make up to N inotify instances, print how many,
 *                         hold them SECS seconds (exit 0 when >= 1)
 * Network attempts (test_egress.py): each prints what happened and the
 * suite judges it against what the upstream world saw.
 *   probe dns SERVER PORT udp|tcp NAME   one A query
 *   probe tcp ADDR PORT DATA              connect, send, print the reply
 *   probe udp ADDR PORT DATA              one datagram, wait for a reply
 *   probe tls ADDR PORT SNI CAFILE REQ    TLS (verified for SNI against
 *                         CAFILE), send REQ, print every status line
 *                         and the first body's length and SHA-256
 *   probe spoof SRC DST PORT NAME         a UDP DNS query for NAME from a
 *                         forged source address (raw IPv4 socket)
 *   probe ether IFACE SRCMAC SRC DST NAME the same query in an Ethernet
 *                         frame with a forged source MAC (AF_PACKET)
 *   probe flood SERVER ADDR SECS MARK  for SECS seconds as fast as it
 *                         goes: UDP DNS queries to SERVER:53 for
 *                         MARK-<n>.forbidden.test (64 in flight) and TCP
 *                         connections to ADDR:80 (16 in flight); prints
 *                         "flood: dns sent S answered A addressed X; tcp
 *                         tried T connected C data D" and exits 1 when
 *                         an answer had an address or a connection got
 *                         a byte back (what the gateway must deny)
 *   probe dnsd PORT IP SECS  a resolver on 127.0.0.1:PORT answering
 *                         every A query with IP, for SECS seconds
 *   probe scan HEX        the bytes HEX encodes, looked for in every
 *                         regular file (all of / but /proc, /sys and /dev
 *                         apart from /dev/shm) and every other process's
 *                         environ, cmdline and readable memory; exit 1
 *                         on a hit (the credential tests: a value the
 *                         guest must never hold)
 * With PROBE_SAVE set, tls also writes everything it read there.
 * DATA and REQ take \r and \n escapes. ADDR may be IPv6, or a name
 * (from /etc/hosts, else the first nameserver of /etc/resolv.conf). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int handle(void)
{
	struct {
		struct file_handle fh;
		unsigned char buf[128];
	} h;
	int mount_id, escaped = 0;
	h.fh.handle_bytes = sizeof h.buf;
	if (name_to_handle_at(AT_FDCWD, "/", &h.fh, &mount_id, 0) < 0) {
		printf("name_to_handle_at /: %s\n", strerror(errno));
	} else {
		int root = open("/", O_RDONLY | O_DIRECTORY);
		int fd = open_by_handle_at(root, &h.fh, O_RDONLY);
		printf("open_by_handle_at own root: %s\n",
		       fd >= 0 ? "OPENED" : strerror(errno));
		escaped |= fd >= 0;
	}
	/* btrfs FILEID_BTRFS_WITHOUT_PARENT: objectid 256 (a subvolume's
	 * root directory) of root 5, the top level: the whole pool. */
	struct {
		struct file_handle fh;
		unsigned char buf[20];
	} f = {.fh = {.handle_bytes = 20, .handle_type = 0x4d}};
	unsigned long long objectid = 256, root_objectid = 5;
	memcpy(f.fh.f_handle, &objectid, 8);
	memcpy(f.fh.f_handle + 8, &root_objectid, 8); /* gen: 0 */
	int root = open("/", O_RDONLY | O_DIRECTORY);
	int fd = open_by_handle_at(root, &f.fh, O_RDONLY);
	printf("open_by_handle_at forged pool root: %s\n",
	       fd >= 0 ? "OPENED" : strerror(errno));
	escaped |= fd >= 0;
	return escaped;
}

static int trace(pid_t pid)
{
	int escaped = 0;
	long r = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
	printf("PTRACE_ATTACH %d: %s\n", (int)pid,
	       r == 0 ? "ATTACHED" : strerror(errno));
	escaped |= r == 0;
	if (r == 0)
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	r = ptrace(PTRACE_SEIZE, pid, NULL, NULL);
	printf("PTRACE_SEIZE %d: %s\n", (int)pid,
	       r == 0 ? "SEIZED" : strerror(errno));
	escaped |= r == 0;
	if (r == 0)
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	char path[64], byte;
	snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDONLY);
	printf("open %s: %s\n", path, fd >= 0 ? "OPENED" : strerror(errno));
	escaped |= fd >= 0;
	/* Any address: a refusal comes before the address is looked at. */
	struct iovec local = {&byte, 1}, remote = {(void *)0x400000, 1};
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	printf("process_vm_readv %d: %s\n", (int)pid,
	       n >= 0 || errno == EFAULT ? "ALLOWED" : strerror(errno));
	escaped |= n >= 0 || errno == EFAULT;
	return escaped;
}

static int inotify(int n, int secs)
{
	int got = 0, e = 0;
	for (; got < n; got++) {
		if (inotify_init1(IN_CLOEXEC) < 0) {
			e = errno;
			break;
		}
	}
	printf("inotify instances: %d of %d%s%s\n", got, n, e ? ", then " : "",
	       e ? strerror(e) : "");
	fflush(stdout);
	if (secs > 0)
		sleep((unsigned)secs);
	return got >= 1 ? 0 : 1;
}

/* ------------------------------------------------------------- network */

static size_t unescape(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	for (; *in && n < cap; in++) {
		if (in[0] == '\\' &&
		    (in[1] == 'r' || in[1] == 'n' || in[1] == '\\')) {
			out[n++] = in[1] == 'r'	  ? '\r'
				   : in[1] == 'n' ? '\n'
						  : '\\';
			in++;
		} else {
			out[n++] = *in;
		}
	}
	return n;
}

/* addr:port of either family into ss; its length, 0 when unparsable. */
static socklen_t sockaddr_of(const char *addr, int port,
			     struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		return sizeof *a4;
	}
	if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		return sizeof *a6;
	}
	return 0;
}

static size_t dns_query(const char *name, unsigned char *q, size_t cap);

/* name as a client library would find it: /etc/hosts first, then one
 * UDP query to the first nameserver of /etc/resolv.conf; 0 when found
 * (the address written to ip). */
static int lookup(const char *name, char *ip, size_t cap)
{
	char line[512], a[64], n[256], server[64] = "";
	FILE *f = fopen("/etc/hosts", "r");
	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "%63s %255s", a, n) == 2 &&
		    strcasecmp(n, name) == 0 && a[0] != '#') {
			snprintf(ip, cap, "%s", a);
			fclose(f);
			return 0;
		}
	if (f != NULL)
		fclose(f);
	f = fopen("/etc/resolv.conf", "r");
	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "nameserver %63s", server) == 1)
			break;
	if (f != NULL)
		fclose(f);
	/* PROBE_DNS_PORT: a resolver of the guest's own that could not have
	 * port 53 (ns: binding it takes a capability root inside lacks). */
	const char *port = getenv("PROBE_DNS_PORT");
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(port ? atoi(port) : 53)};
	if (inet_pton(AF_INET, server, &to.sin_addr) != 1)
		return -1;
	unsigned char q[600], r[2048];
	size_t qn = dns_query(name, q, sizeof q);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct timeval tv = {.tv_sec = 3};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	ssize_t got = -1;
	if (fd >= 0 &&
	    sendto(fd, q, qn, 0, (struct sockaddr *)&to, sizeof to) > 0)
		got = recv(fd, r, sizeof r, 0);
	if (fd >= 0)
		close(fd);
	/* The first A record's data: the answer's last 4 bytes when the
	 * answer holds one record of type A. */
	if (got < (ssize_t)qn + 16 || (r[3] & 15) != 0 || r[7] == 0)
		return -1;
	snprintf(ip, cap, "%d.%d.%d.%d", r[got - 4], r[got - 3], r[got - 2],
		 r[got - 1]);
	return 0;
}

/* A connected socket (3 s to connect, 4 s per read), or -1 with a line
 * saying why. addr may be a name (lookup). */
static int dial(const char *what, const char *addr, int port, int type)
{
	struct sockaddr_storage ss;
	char found[64];
	socklen_t len = sockaddr_of(addr, port, &ss);
	if (len == 0 && lookup(addr, found, sizeof found) == 0) {
		printf("%s: %s is %s\n", what, addr, found);
		len = sockaddr_of(found, port, &ss);
	}
	if (len == 0) {
		printf("%s %s: not an address\n", what, addr);
		return -1;
	}
	int fd = socket(ss.ss_family, type | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		printf("%s %s:%d: socket: %s\n", what, addr, port,
		       strerror(errno));
		return -1;
	}
	int r = connect(fd, (struct sockaddr *)&ss, len);
	if (r < 0 && errno == EINPROGRESS) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int e = 0;
		socklen_t el = sizeof e;
		if (poll(&p, 1, 3000) != 1) {
			e = ETIMEDOUT;
		} else {
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
		}
		errno = e;
		r = e ? -1 : 0;
	}
	if (r < 0) {
		printf("%s %s:%d: connect: %s\n", what, addr, port,
		       strerror(errno));
		close(fd);
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	struct timeval tv = {.tv_sec = 4};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	return fd;
}

static size_t dns_query(const char *name, unsigned char *q, size_t cap)
{
	size_t n = 12;
	memset(q, 0, 12);
	q[0] = 0x52, q[1] = 0x54, q[2] = 0x01, q[5] = 1; /* id, RD, QD=1 */
	while (*name && n + 70 < cap) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);
		if (l > 63)
			l = 63;
		q[n++] = (unsigned char)l;
		memcpy(q + n, name, l);
		n += l;
		name += l + (dot != NULL);
	}
	q[n++] = 0;
	q[n++] = 0, q[n++] = 1, q[n++] = 0, q[n++] = 1; /* A, IN */
	return n;
}

static void dns_print(const unsigned char *a, ssize_t n)
{
	if (n < 12) {
		printf("short answer (%zd bytes)\n", n);
		return;
	}
	int rcode = a[3] & 15, an = a[6] << 8 | a[7];
	/* Skip the question, then find the first A record. */
	ssize_t i = 12;
	while (i < n && a[i])
		i += a[i] + 1;
	i += 5;
	for (; an > 0 && i + 12 <= n; an--) {
		if (a[i] & 0xc0)
			i += 2;
		else
			while (i < n && a[i])
				i += a[i] + 1, i += a[i] == 0;
		int type = a[i] << 8 | a[i + 1],
		    rdlen = a[i + 8] << 8 | a[i + 9];
		i += 10;
		if (type == 1 && rdlen == 4 && i + 4 <= n) {
			printf("answer %d.%d.%d.%d\n", a[i], a[i + 1], a[i + 2],
			       a[i + 3]);
			return;
		}
		i += rdlen;
	}
	printf("rcode %d, no address\n", rcode);
}

static int dns(const char *server, int port, const char *proto,
	       const char *name)
{
	unsigned char q[600], a[4096];
	size_t qn = dns_query(name, q + 2, sizeof q - 2);
	int tcp = strcmp(proto, "tcp") == 0;
	int fd = dial("dns", server, port, tcp ? SOCK_STREAM : SOCK_DGRAM);
	if (fd < 0)
		return 0;
	ssize_t n;
	if (tcp) {
		q[0] = (unsigned char)(qn >> 8), q[1] = (unsigned char)qn;
		n = send(fd, q, qn + 2, MSG_NOSIGNAL);
		if (n > 0) {
			n = recv(fd, a, 2, MSG_WAITALL);
			if (n == 2)
				n = recv(fd, a, sizeof a, 0);
		}
	} else {
		n = send(fd, q + 2, qn, 0);
		if (n > 0)
			n = recv(fd, a, sizeof a, 0);
	}
	if (n <= 0) {
		printf("dns %s:%d/%s: %s\n", server, port, proto,
		       n == 0 ? "closed" : strerror(errno));
		close(fd);
		return 0;
	}
	printf("dns %s:%d/%s: ", server, port, proto);
	dns_print(a, n);
	close(fd);
	return 1;
}

static void http_print(const char *buf, size_t n, int closed);

static void print_reply(const char *what, const char *buf, ssize_t n)
{
	printf("%s: reply %zd bytes: ", what, n);
	for (ssize_t i = 0; i < n && i < 60; i++)
		putchar(buf[i] >= 32 && buf[i] < 127 ? buf[i] : '.');
	putchar('\n');
}

static int stream(const char *proto, const char *addr, int port,
		  const char *data)
{
	static char out[65536], in[65536];
	int udp = strcmp(proto, "udp") == 0;
	int fd = dial(proto, addr, port, udp ? SOCK_DGRAM : SOCK_STREAM);
	if (fd < 0)
		return 0;
	size_t n = unescape(data, out, sizeof out);
	if (send(fd, out, n, MSG_NOSIGNAL) < 0) {
		printf("%s %s:%d: send: %s\n", proto, addr, port,
		       strerror(errno));
		close(fd);
		return 0;
	}
	ssize_t r = recv(fd, in, sizeof in, 0);
	if (r <= 0) {
		printf("%s %s:%d: %s\n", proto, addr, port,
		       r == 0 ? "connected, closed without a reply"
			      : strerror(errno));
		close(fd);
		return 0;
	}
	/* TCP: all of it, until the peer closes or goes quiet; an HTTP
	 * answer is framed as for tls. */
	ssize_t more = 0;
	while (!udp && (size_t)r < sizeof in &&
	       (more = recv(fd, in + r, sizeof in - (size_t)r, 0)) > 0)
		r += more;
	print_reply(proto, in, r);
	if (r > 7 && memcmp(in, "HTTP/1.", 7) == 0)
		http_print(in, (size_t)r, more == 0);
	close(fd);
	return 1;
}

/* The responses that came back, framed by Content-Length: each one's
 * status, then the first one's body: length and SHA-256. */
static void http_print(const char *buf, size_t n, int closed)
{
	const char *body = NULL;
	size_t blen = 0, at = 0;
	printf("statuses:");
	while (at + 12 <= n && memcmp(buf + at, "HTTP/1.", 7) == 0) {
		printf(" %.3s", buf + at + 9);
		const char *end = memmem(buf + at, n - at, "\r\n\r\n", 4);
		if (end == NULL)
			break;
		size_t head = (size_t)(end + 4 - (buf + at));
		const char *cl = memmem(buf + at, head, "Content-Length: ", 16);
		size_t len = cl ? (size_t)atol(cl + 16) : n - at - head;
		if (len > n - at - head)
			len = n - at - head;
		if (body == NULL)
			body = buf + at + head, blen = len;
		at += head + len;
	}
	printf("%s\n", closed ? " closed" : " open");
	if (body == NULL)
		return;
	unsigned char md[32];
	unsigned mdlen = 0;
	EVP_Digest(body, blen, md, &mdlen, EVP_sha256(), NULL);
	printf("body %zu bytes sha256 ", blen);
	for (unsigned i = 0; i < mdlen; i++)
		printf("%02x", md[i]);
	printf(" starts ");
	for (size_t i = 0; i < blen && i < 60; i++)
		putchar(body[i] >= 32 && body[i] < 127 ? body[i] : '.');
	putchar('\n');
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define FLOOD_DNS 64 /* queries in flight */
#define FLOOD_TCP 16 /* connections in flight */

/* One of the flood's connections: its socket (-1: none) and whether its
 * request went out. */
struct flood_conn {
	int fd;
	int asked;
};

/* A new non-blocking connection to to; 1 if one was started. */
static int flood_dial(const struct sockaddr_in *to, struct flood_conn *c)
{
	c->asked = 0;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (c->fd < 0)
		return 0;
	if (connect(c->fd, (const struct sockaddr *)to, sizeof *to) < 0 &&
	    errno != EINPROGRESS) {
		close(c->fd);
		c->fd = -1;
	}
	return 1;
}

/* Decisions as fast as the guest can ask for them (see the top). */
static int flood(const char *server, const char *addr, int secs,
		 const char *mark)
{
	struct sockaddr_in ns = {.sin_family = AF_INET, .sin_port = htons(53)};
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(80)};
	int u = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	if (inet_pton(AF_INET, server, &ns.sin_addr) != 1 ||
	    inet_pton(AF_INET, addr, &to.sin_addr) != 1 || u < 0 ||
	    connect(u, (struct sockaddr *)&ns, sizeof ns) < 0) {
		printf("flood: bad address or socket: %s\n", strerror(errno));
		return 2;
	}
	char req[256];
	int reqlen = snprintf(req, sizeof req,
			      "GET /%s HTTP/1.1\r\nHost: forbidden.test\r\n"
			      "\r\n",
			      mark);
	long sent = 0, answered = 0, addressed = 0, lost = 0;
	long tried = 0, connected = 0, data = 0;
	struct flood_conn tcp[FLOOD_TCP];
	for (int i = 0; i < FLOOD_TCP; i++)
		tried += flood_dial(&to, &tcp[i]);
	long long end = now_ms() + secs * 1000LL;
	while (now_ms() < end) {
		while (sent - answered - lost < FLOOD_DNS) {
			char name[128];
			unsigned char q[300];
			snprintf(name, sizeof name, "%s-%ld.forbidden.test",
				 mark, sent);
			size_t qn = dns_query(name, q, sizeof q);
			if (send(u, q, qn, 0) < 0)
				break;
			sent++;
		}
		struct pollfd p[1 + FLOOD_TCP];
		p[0] = (struct pollfd){.fd = u, .events = POLLIN};
		for (int i = 0; i < FLOOD_TCP; i++)
			p[1 + i] = (struct pollfd){.fd = tcp[i].fd,
						   .events = tcp[i].asked
								     ? POLLIN
								     : POLLOUT};
		if (poll(p, 1 + FLOOD_TCP, 50) < 0)
			break;
		unsigned char a[1024];
		while (recv(u, a, sizeof a, 0) >= 12) {
			answered++;
			/* An answer record: a name let through. */
			if ((a[6] << 8 | a[7]) > 0)
				addressed++;
		}
		/* Queries the gateway did not answer are not waited for. */
		if (p[0].revents == 0 && sent - answered - lost >= FLOOD_DNS)
			lost += FLOOD_DNS / 2;
		for (int i = 0; i < FLOOD_TCP; i++) {
			struct flood_conn *c = &tcp[i];
			if (c->fd >= 0 && p[1 + i].revents == 0)
				continue;
			int e = 0;
			socklen_t el = sizeof e;
			if (c->fd >= 0 && !c->asked &&
			    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &el) ==
				    0 &&
			    e == 0 &&
			    send(c->fd, req, (size_t)reqlen, MSG_NOSIGNAL) ==
				    reqlen) {
				/* Connected (to the gateway): now its answer. */
				connected++;
				c->asked = 1;
				continue;
			}
			char b;
			if (c->fd >= 0 && c->asked &&
			    recv(c->fd, &b, 1, MSG_DONTWAIT) == 1)
				data++;
			if (c->fd >= 0)
				close(c->fd);
			tried += flood_dial(&to, c);
		}
	}
	for (int i = 0; i < FLOOD_TCP; i++)
		if (tcp[i].fd >= 0)
			close(tcp[i].fd);
	close(u);
	printf("flood: dns sent %ld answered %ld addressed %ld; tcp tried %ld"
	       " connected %ld data %ld\n",
	       sent, answered, addressed, tried, connected, data);
	return addressed > 0 || data > 0;
}

/* A resolver of the guest's own on 127.0.0.1:port: every A query is
 * answered with ip, for secs seconds (a spoofed answer). */
static int dnsd(int port, const char *ip, int secs)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in me = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &me.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof me) < 0) {
		printf("dnsd: %s\n", strerror(errno));
		return 2;
	}
	struct timeval tv = {.tv_sec = secs};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	unsigned char q[1024];
	struct sockaddr_in peer;
	socklen_t pl = sizeof peer;
	ssize_t n;
	while ((n = recvfrom(fd, q, sizeof q - 16, 0, (struct sockaddr *)&peer,
			     &pl)) >= 12) {
		q[2] |= 0x80, q[3] = 0x80, q[7] = 1; /* answer, 1 record */
		unsigned char rr[16] = {0xc0, 12, 0, 1,	 0, 1,
					0,    0,  0, 30, 0, 4};
		inet_pton(AF_INET, ip, rr + 12);
		memcpy(q + n, rr, 16);
		sendto(fd, q, (size_t)n + 16, 0, (struct sockaddr *)&peer, pl);
	}
	return 0;
}

static int tls(const char *addr, int port, const char *sni, const char *ca,
	       const char *req)
{
	static char out[65536];
	size_t cap = 64u << 20, n = 0;
	char *in = malloc(cap);
	int fd = dial("tls", addr, port, SOCK_STREAM);
	if (fd < 0 || in == NULL)
		return 0;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, ca, NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL *ssl = SSL_new(ctx);
	if (*sni) {
		SSL_set_tlsext_host_name(ssl, sni);
		SSL_set1_host(ssl, sni);
	}
	SSL_set_fd(ssl, fd);
	if (SSL_connect(ssl) != 1) {
		unsigned long e = ERR_get_error();
		printf("handshake failed: %s\n",
		       e ? ERR_reason_error_string(e) : strerror(errno));
		return 0;
	}
	printf("handshake ok\n");
	size_t len = unescape(req, out, sizeof out);
	if (SSL_write(ssl, out, (int)len) <= 0) {
		printf("write failed\n");
		return 0;
	}
	int r, closed = 0;
	while (n < cap) {
		r = SSL_read(ssl, in + n,
			     (int)(cap - n > 65536 ? 65536 : cap - n));
		if (r <= 0) {
			closed = SSL_get_error(ssl, r) ==
					 SSL_ERROR_ZERO_RETURN ||
				 errno != EAGAIN;
			break;
		}
		n += (size_t)r;
	}
	const char *save = getenv("PROBE_SAVE");
	FILE *f = save != NULL ? fopen(save, "w") : NULL;
	if (f != NULL) {
		fwrite(in, 1, n, f);
		fclose(f);
	}
	http_print(in, n, closed);
	return 1;
}

/* One UDP DNS query for name to dst:port in an IPv4 packet whose source
 * is src, built at ip (room for 600 bytes); its length. */
static size_t forged_query(unsigned char *ip, const char *src, const char *dst,
			   int port, const char *name)
{
	struct iphdr *h = (struct iphdr *)ip;
	struct udphdr *u = (struct udphdr *)(ip + sizeof *h);
	size_t qn = dns_query(name, ip + sizeof *h + sizeof *u, 500);
	size_t total = sizeof *h + sizeof *u + qn;
	memset(h, 0, sizeof *h);
	h->version = 4, h->ihl = 5, h->ttl = 64, h->protocol = IPPROTO_UDP;
	h->tot_len = htons((uint16_t)total);
	inet_pton(AF_INET, src, &h->saddr);
	inet_pton(AF_INET, dst, &h->daddr);
	unsigned sum = 0;
	for (int i = 0; i < 10; i++)
		sum += ((uint16_t *)h)[i];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	h->check = (uint16_t)~sum;
	u->source = htons(40053);
	u->dest = htons((uint16_t)port);
	u->len = htons((uint16_t)(sizeof *u + qn));
	u->check = 0;
	return total;
}

static int spoof(const char *src, const char *dst, int port, const char *name)
{
	unsigned char pkt[640];
	size_t n = forged_query(pkt, src, dst, port, name);
	int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (fd < 0) {
		printf("raw socket: %s\n", strerror(errno));
		return 0;
	}
	struct sockaddr_in to = {.sin_family = AF_INET};
	inet_pton(AF_INET, dst, &to.sin_addr);
	int sent = 0;
	for (int i = 0; i < 3; i++)
		sent += sendto(fd, pkt, n, 0, (struct sockaddr *)&to,
			       sizeof to) > 0;
	printf("raw socket: forged %s -> %s:%d sent %d of 3 (%s)\n", src, dst,
	       port, sent, sent ? "ok" : strerror(errno));
	return 0;
}

static int ether(const char *ifname, const char *srcmac, const char *src,
		 const char *dst, const char *name)
{
	unsigned char frame[700];
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_IP));
	if (fd < 0) {
		printf("packet socket: %s\n", strerror(errno));
		return 0;
	}
	struct sockaddr_ll ll = {.sll_family = AF_PACKET,
				 .sll_protocol = htons(ETH_P_IP),
				 .sll_ifindex = (int)if_nametoindex(ifname),
				 .sll_halen = 6};
	memset(ll.sll_addr, 0xff, 6); /* broadcast: no neighbour needed */
	memset(frame, 0xff, 6);
	unsigned m[6];
	if (sscanf(srcmac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3],
		   &m[4], &m[5]) != 6)
		return 2;
	for (int i = 0; i < 6; i++)
		frame[6 + i] = (unsigned char)m[i];
	frame[12] = 0x08, frame[13] = 0;
	size_t n = 14 + forged_query(frame + 14, src, dst, 53, name);
	int sent = 0;
	for (int i = 0; i < 3; i++)
		sent += sendto(fd, frame, n, 0, (struct sockaddr *)&ll,
			       sizeof ll) > 0;
	printf("packet socket: forged %s %s -> %s sent %d of 3 (%s)\n", srcmac,
	       src, dst, sent, sent ? "ok" : strerror(errno));
	return 0;
}

/* ---- scan ---- */

#define SCAN_CHUNK (1u << 20)
#define SCAN_NEEDLE_MAX 256

static struct {
	unsigned char needle[SCAN_NEEDLE_MAX];
	size_t len;
	unsigned long files, procs, regions, unreadable, hits;
	unsigned long long bytes;
	char buf[SCAN_CHUNK + SCAN_NEEDLE_MAX];
} sc;

/* fd's bytes (mem: the limit bytes at off, by pread) searched for the
 * needle, the last len - 1 bytes kept across reads: 1 on a hit, 0 when
 * none, -1 when nothing could be read. */
static int scan_fd(int fd, int mem, off_t off, size_t limit)
{
	size_t keep = 0, total = 0;
	while (!mem || total < limit) {
		size_t want = SCAN_CHUNK;
		if (mem && limit - total < want)
			want = limit - total;
		ssize_t r = mem ? pread(fd, sc.buf + keep, want,
					off + (off_t)total)
				: read(fd, sc.buf + keep, want);
		if (r < 0)
			return total == 0 ? -1 : 0;
		if (r == 0)
			break;
		total += (size_t)r;
		sc.bytes += (size_t)r;
		size_t have = keep + (size_t)r;
		if (memmem(sc.buf, have, sc.needle, sc.len) != NULL)
			return 1;
		keep = have < sc.len - 1 ? have : sc.len - 1;
		memmove(sc.buf, sc.buf + have - keep, keep);
	}
	return 0;
}

static void scan_path(const char *path, const char *what)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int r = fd < 0 ? -1 : scan_fd(fd, 0, 0, 0);
	if (fd >= 0)
		close(fd);
	if (r < 0) {
		sc.unreadable++;
	} else if (r > 0) {
		sc.hits++;
		printf("hit: %s\n", what);
	}
}

static int scan_entry(const char *path, const struct stat *st, int type,
		      struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_D &&
	    (strcmp(path, "/proc") == 0 || strcmp(path, "/sys") == 0 ||
	     strcmp(path, "/dev") == 0))
		return FTW_SKIP_SUBTREE;
	if (type == FTW_F && S_ISREG(st->st_mode)) {
		sc.files++;
		scan_path(path, path);
	}
	return FTW_CONTINUE;
}

/* Every process but this one (it holds the needle): environ, cmdline and
 * each readable mapping of its memory. */
static void scan_procs(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end != '\0' || pid <= 0 || pid == (long)getpid())
			continue;
		sc.procs++;
		char path[64], what[96];
		static const char *const files[] = {"environ", "cmdline"};
		for (size_t i = 0; i < 2; i++) {
			snprintf(path, sizeof path, "/proc/%ld/%s", pid,
				 files[i]);
			snprintf(what, sizeof what, "pid %ld %s", pid,
				 files[i]);
			scan_path(path, what);
		}
		snprintf(path, sizeof path, "/proc/%ld/maps", pid);
		FILE *maps = fopen(path, "re");
		snprintf(path, sizeof path, "/proc/%ld/mem", pid);
		int mem = open(path, O_RDONLY | O_CLOEXEC);
		char line[512];
		while (maps != NULL && mem >= 0 &&
		       fgets(line, sizeof line, maps) != NULL) {
			unsigned long long a, b;
			char perm[5];
			if (sscanf(line, "%llx-%llx %4s", &a, &b, perm) != 3 ||
			    perm[0] != 'r' || b > 0x7fffffffffffffffULL)
				continue;
			sc.regions++;
			int r = scan_fd(mem, 1, (off_t)a, (size_t)(b - a));
			if (r < 0) {
				sc.unreadable++;
			} else if (r > 0) {
				sc.hits++;
				printf("hit: pid %ld memory %llx-%llx\n", pid,
				       a, b);
			}
		}
		if (maps == NULL || mem < 0)
			sc.unreadable++;
		if (maps != NULL)
			fclose(maps);
		if (mem >= 0)
			close(mem);
	}
	if (d != NULL)
		closedir(d);
}

static int scan(const char *hex)
{
	size_t n = strlen(hex);
	if (n < 16 || n % 2 != 0 || n / 2 > SCAN_NEEDLE_MAX) {
		fprintf(stderr, "scan: 8..%d bytes, as hex\n", SCAN_NEEDLE_MAX);
		return 2;
	}
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
			fprintf(stderr, "scan: not hex\n");
			return 2;
		}
		sc.needle[i] = (unsigned char)v;
	}
	sc.len = n / 2;
	nftw("/", scan_entry, 64, FTW_PHYS | FTW_ACTIONRETVAL);
	nftw("/dev/shm", scan_entry, 64, FTW_PHYS | FTW_ACTIONRETVAL);
	scan_procs();
	printf("scan: %lu files, %lu processes, %lu memory regions, %llu "
	       "bytes, %lu unreadable, %lu hits\n",
	       sc.files, sc.procs, sc.regions, sc.bytes, sc.unreadable,
	       sc.hits);
	return sc.hits != 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && strcmp(argv[1], "handle") == 0)
		return handle();
	if (argc == 3 && strcmp(argv[1], "ptrace") == 0)
		return trace((pid_t)atoi(argv[2]));
	if (argc == 4 && strcmp(argv[1], "inotify") == 0)
		return inotify(atoi(argv[2]), atoi(argv[3]));
	if (argc == 6 && strcmp(argv[1], "dns") == 0)
		return dns(argv[2], atoi(argv[3]), argv[4], argv[5]);
	if (argc == 5 &&
	    (strcmp(argv[1], "tcp") == 0 || strcmp(argv[1], "udp") == 0))
		return stream(argv[1], argv[2], atoi(argv[3]), argv[4]);
	if (argc == 7 && strcmp(argv[1], "tls") == 0)
		return tls(argv[2], atoi(argv[3]), argv[4], argv[5], argv[6]);
	if (argc == 6 && strcmp(argv[1], "spoof") == 0)
		return spoof(argv[2], argv[3], atoi(argv[4]), argv[5]);
	if (argc == 6 && strcmp(argv[1], "flood") == 0)
		return flood(argv[2], argv[3], atoi(argv[4]), argv[5]);
	if (argc == 5 && strcmp(argv[1], "dnsd") == 0)
		return dnsd(atoi(argv[2]), argv[3], atoi(argv[4]));
	if (argc == 3 && strcmp(argv[1], "scan") == 0)
		return scan(argv[2]);
	if (argc == 7 && strcmp(argv[1], "ether") == 0)
		return ether(argv[2], argv[3], argv[4], argv[5], argv[6]);
	fprintf(stderr,
		"usage: probe handle | ptrace PID | inotify N SECS | "
		"dns | tcp | udp | tls | spoof | ether | flood | scan (see "
		"above)\n");
	return 2;
}
