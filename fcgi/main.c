/* airlock-fcgi: the /v1 API as a FastCGI server.
 *
 *   airlock-fcgi --socket PATH [--socket-group GROUP] [--workers N]
 *                [--threads T] [--migrate] [--api-key-file PATH] [--setup]
 *
 * The master opens the unix socket (mode 0600, or 0660 owned by GROUP:
 * nginx's), forks N worker processes of T threads
 * each (FCGX_Accept_r) and restarts a worker that dies. --migrate applies
 * the database migrations first, --api-key-file bootstraps the admin key;
 * --setup does only those two and exits.
 *
 * Exit codes: 0 ok, 100 usage or configuration, 111 temporary failure
 * (database unreachable, socket cannot be opened). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fcgiapp.h>

#include "base/config.h"
#include "base/log.h"
#include "cred/credcrypt.h"
#include "http.h"
#include "model/auth.h"
#include "model/db.h"
#include "proto/agentproto.h"
#include "sandbox/sandbox_ops.h"

#define EXIT_USAGE 100
#define EXIT_TEMP 111
#define WORKERS_MAX 64
#define THREADS_MAX 256
#define LISTEN_BACKLOG 4096

static al_config cfg;
static int listen_fd = -1;

static void __attribute__((noreturn, format(printf, 2, 3)))
die(int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	al_error("%s", msg);
	exit(code);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: airlock-fcgi --socket PATH [--socket-group GROUP]\n"
		"                    [--workers N] [--threads T]\n"
		"                    [--migrate] [--api-key-file PATH]\n"
		"       airlock-fcgi --setup [--api-key-file PATH]\n");
	exit(EXIT_USAGE);
}

static int parse_count(const char *s, int max)
{
	char *end = NULL;
	long v = strtol(s, &end, 10);
	if (end == NULL || *end != '\0' || v < 1 || v > max)
		return -1;
	return (int)v;
}

/* Sanitized copy for the access log: printable ASCII, bounded. */
static void log_safe(char *dst, size_t dstlen, const char *src)
{
	size_t o = 0;
	for (size_t i = 0; src != NULL && src[i] != '\0' && o + 1 < dstlen;
	     i++) {
		unsigned char c = (unsigned char)src[i];
		dst[o++] = (c < 0x20 || c >= 0x7f || c == ' ') ? '?' : (char)c;
	}
	dst[o] = '\0';
}

/* Route path: DOCUMENT_URI (decoded and normalised by nginx) or the path
 * of REQUEST_URI, with the AIRLOCK_PREFIX location prefix removed. */
static int request_path(al_req *r, al_err *err)
{
	const char *p = fcgi_req_param(r, "DOCUMENT_URI");
	size_t n;
	if (p != NULL && p[0] != '\0') {
		n = strlen(p);
	} else {
		p = fcgi_req_param(r, "REQUEST_URI");
		if (p == NULL)
			p = "/";
		n = strcspn(p, "?");
	}
	size_t pl;
	const char *prefix = fcgi_req_prefix(r, &pl);
	if (pl > 0 && n >= pl && strncmp(p, prefix, pl) == 0 &&
	    (n == pl || p[pl] == '/')) {
		p += pl;
		n -= pl;
	}
	if (n >= sizeof r->path)
		return al_err_set(err, AL_ENOENT, 0, "no such endpoint");
	memcpy(r->path, p, n);
	r->path[n] = '\0';
	if (n == 0)
		snprintf(r->path, sizeof r->path, "/");
	/* "/v1/sandboxes/" routes like "/v1/sandboxes". */
	if (n > 1 && r->path[n - 1] == '/')
		r->path[n - 1] = '\0';
	return 0;
}

/* An answer given before a streamed body was read (files: an unknown
 * sandbox, a bad path) leaves the rest of it in flight: a small one is
 * read and dropped, so that nginx ends the upstream request cleanly and
 * keeps the client's connection alive; a large one is left to nginx,
 * which closes the connection. */
#define DRAIN_MAX (1u << 20)
static void drain_body(al_req *r)
{
	const char *cl = fcgi_req_param(r, "CONTENT_LENGTH");
	char *end = NULL;
	unsigned long long len = cl != NULL ? strtoull(cl, &end, 10) : 0;
	if (cl == NULL || end == cl || len == 0 || len > DRAIN_MAX)
		return;
	char buf[4096];
	while (FCGX_GetStr(buf, sizeof buf, r->fcgi->in) > 0)
		;
}

static void handle(FCGX_Request *fr, al_db **dbp)
{
	al_req *r = calloc(1, sizeof *r);
	al_err err;
	if (r == NULL) {
		static const char oom[] =
			"Status: 500 Internal Server Error\r\n\r\n";
		FCGX_PutStr(oom, sizeof oom - 1, fr->out);
		return;
	}
	r->fcgi = fr;
	r->cfg = &cfg;
	r->dbp = dbp;
	r->start_ms = al_now_ms();
	r->method = fcgi_req_param(r, "REQUEST_METHOD");
	if (r->method == NULL)
		r->method = "GET";

	/* nginx's view ($proxy_add_x_forwarded_for) when the snippet passes
	 * it, else the header itself; the first entry is the original
	 * client as the proxies in front reported it. */
	const char *xff = fcgi_req_param(r, "AIRLOCK_FORWARDED_FOR");
	if (xff == NULL || xff[0] == '\0')
		xff = fcgi_req_param(r, "HTTP_X_FORWARDED_FOR");
	char first[64];
	if (xff != NULL && xff[0] != '\0') {
		size_t n = strcspn(xff, ",");
		if (n >= sizeof first)
			n = sizeof first - 1;
		memcpy(first, xff, n);
		first[n] = '\0';
		log_safe(r->client, sizeof r->client, first);
	} else {
		log_safe(r->client, sizeof r->client,
			 fcgi_req_param(r, "REMOTE_ADDR"));
	}

	const char *qs = fcgi_req_param(r, "QUERY_STRING");
	if (request_path(r, &err) < 0 ||
	    al_query_parse(qs, &r->query, &err) < 0)
		fcgi_http_error(r, &err);
	else
		fcgi_route(r);
	if (!r->headers_sent)
		fcgi_http_errorf(r, AL_EINTERNAL, "no response");
	drain_body(r);

	/* The query may carry paths or filters; the log gets the path. */
	char method[16], path[256];
	log_safe(method, sizeof method, r->method);
	log_safe(path, sizeof path, r->path);
	al_info("%s %s %d %lldms %s", method, path, r->status,
		(long long)(al_now_ms() - r->start_ms),
		r->client[0] != '\0' ? r->client : "-");
	al_query_free(&r->query);
	free(r);
}

static void *worker_thread(void *arg)
{
	(void)arg;
	FCGX_Request fr;
	al_db *db = NULL;

	if (FCGX_InitRequest(&fr, listen_fd, 0) != 0) {
		al_error("FCGX_InitRequest failed");
		return NULL;
	}
	/* Connected before the first request, not during it (a burst after
	 * a restart would pay a connect per thread); a failure here is
	 * retried by the first request that needs the database. */
	al_err err;
	db = al_db_open(cfg.db_conninfo, &err);
	if (db == NULL)
		al_warn("PostgreSQL, connecting ahead: %s", err.msg);
	else
		al_sandbox_ops_warm(db, &cfg);
	for (;;) {
		if (FCGX_Accept_r(&fr) < 0) {
			/* Transient accept errors (EMFILE, ECONNABORTED):
			 * back off instead of spinning. */
			struct timespec ts = {0, 100 * 1000 * 1000};
			nanosleep(&ts, NULL);
			continue;
		}
		handle(&fr, &db);
		FCGX_Finish_r(&fr);
	}
	return NULL;
}

static void __attribute__((noreturn)) worker_main(int threads)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	/* A client that disconnects must not kill the worker. */
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_PDEATHSIG, SIGTERM);

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 512 * 1024);
	for (int i = 1; i < threads; i++) {
		pthread_t t;
		int e = pthread_create(&t, &attr, worker_thread, NULL);
		if (e != 0)
			al_warn("pthread_create: %s", strerror(e));
		else
			pthread_detach(t);
	}
	worker_thread(NULL);
	_exit(EXIT_TEMP);
}

static pid_t spawn_worker(int threads, pid_t master)
{
	pid_t pid = fork();
	if (pid < 0) {
		al_error("fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		if (getppid() != master)
			_exit(0);
		worker_main(threads);
	}
	return pid;
}

/* Migrations and the admin key, before any worker takes a request. */
static void setup(int migrate, const char *key_file)
{
	al_err err;
	al_db *db = NULL;

	for (int attempt = 0;; attempt++) {
		db = al_db_open(cfg.db_conninfo, &err);
		if (db != NULL)
			break;
		if (attempt >= 50)
			die(EXIT_TEMP, "%s", err.msg);
		struct timespec ts = {0, 200 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (migrate && al_db_migrate(db, cfg.sql_dir, &err) < 0)
		die(err.code == AL_EUNAVAIL ? EXIT_TEMP : EXIT_USAGE,
		    "migrations from %s: %s", cfg.sql_dir, err.msg);
	if (key_file != NULL) {
		int created = 0;
		if (al_auth_bootstrap(db, key_file, &created, &err) < 0)
			die(EXIT_TEMP, "api key bootstrap: %s", err.msg);
		if (!created)
			al_info("an admin API key exists already");
	}
	al_db_close(db);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"socket", required_argument, NULL, 's'},
		{"workers", required_argument, NULL, 'w'},
		{"socket-group", required_argument, NULL, 'g'},
		{"threads", required_argument, NULL, 't'},
		{"migrate", no_argument, NULL, 'm'},
		{"api-key-file", required_argument, NULL, 'k'},
		{"setup", no_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *sock = NULL, *key_file = NULL, *group = NULL;
	int workers = 2, threads = 16, migrate = 0, setup_only = 0;
	al_err err;

	al_log_init("airlock-fcgi", AL_LOG_INFO);
	int c;
	while ((c = getopt_long(argc, argv, "s:g:w:t:mk:Sh", opts, NULL)) !=
	       -1) {
		switch (c) {
		case 's':
			sock = optarg;
			break;
		case 'g':
			group = optarg;
			break;
		case 'w':
			workers = parse_count(optarg, WORKERS_MAX);
			if (workers < 0)
				usage();
			break;
		case 't':
			threads = parse_count(optarg, THREADS_MAX);
			if (threads < 0)
				usage();
			break;
		case 'm':
			migrate = 1;
			break;
		case 'k':
			key_file = optarg;
			break;
		case 'S':
			setup_only = 1;
			migrate = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || (sock == NULL && !setup_only))
		usage();
	if (al_config_load(&cfg, &err) < 0)
		die(EXIT_USAGE, "configuration: %s", err.msg);

	if (migrate || key_file != NULL)
		setup(migrate, key_file);
	if (setup_only)
		return 0;
	/* Credentials are sealed with it: made now (once, whichever of
	 * the controller and this starts first) rather than on the first
	 * create, so a start without a writable keys/ fails at once. */
	al_keyring kr;
	int krc = al_keyring_load(&kr, cfg.state_dir, 1, &err);
	al_keyring_wipe(&kr);
	if (krc < 0)
		die(EXIT_TEMP, "master key: %s", err.msg);

	if (FCGX_Init() != 0)
		die(EXIT_TEMP, "FCGX_Init failed");
	struct stat st;
	if (lstat(sock, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			die(EXIT_USAGE, "%s exists and is not a socket", sock);
		unlink(sock);
	}
	/* The API's front door is nginx alone: the socket is created
	 * 0600 and opened to nginx's group only (anyone who can connect
	 * speaks FastCGI and sets the client address and prefix). */
	gid_t gid = (gid_t)-1;
	if (group != NULL) {
		struct group *gr = getgrnam(group);
		if (gr == NULL)
			die(EXIT_USAGE, "--socket-group %s: no such group",
			    group);
		gid = gr->gr_gid;
	}
	mode_t old_mask = umask(0177);
	/* Requests nginx may queue while every thread is busy: one client
	 * opening 2,000 streams at once overflowed 1,024 (nginx then answers
	 * 503). The kernel caps it at net.core.somaxconn. */
	listen_fd = FCGX_OpenSocket(sock, LISTEN_BACKLOG);
	umask(old_mask);
	if (listen_fd < 0)
		die(EXIT_TEMP, "cannot listen on %s", sock);
	if (gid != (gid_t)-1 &&
	    (chown(sock, (uid_t)-1, gid) < 0 || chmod(sock, 0660) < 0))
		die(EXIT_TEMP, "giving %s to group %s: %s", sock, group,
		    strerror(errno));

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	pid_t master = getpid();
	pid_t pids[WORKERS_MAX] = {0};
	time_t started[WORKERS_MAX] = {0};
	for (int i = 0; i < workers; i++) {
		pids[i] = spawn_worker(threads, master);
		started[i] = time(NULL);
	}
	al_info("listening on %s: %d workers x %d threads", sock, workers,
		threads);

	for (;;) {
		struct timespec tick = {1, 0};
		int sig = sigtimedwait(&set, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT)
			break;
		int status;
		pid_t dead;
		while ((dead = waitpid(-1, &status, WNOHANG)) > 0) {
			for (int i = 0; i < workers; i++) {
				if (pids[i] != dead)
					continue;
				al_warn("worker %d exited (status %d), "
					"restarting",
					(int)dead, status);
				pids[i] = 0;
			}
		}
		/* Restart, but not faster than once a second per slot, so
		 * a worker that dies at start cannot spin the host. */
		for (int i = 0; i < workers; i++) {
			if (pids[i] > 0 || time(NULL) - started[i] < 1)
				continue;
			pids[i] = spawn_worker(threads, master);
			started[i] = time(NULL);
		}
	}

	al_info("stopping");
	for (int i = 0; i < workers; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGTERM);
	for (int i = 0; i < workers; i++)
		if (pids[i] > 0)
			waitpid(pids[i], NULL, 0);
	unlink(sock);
	return 0;
}
