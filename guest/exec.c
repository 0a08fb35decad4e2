/* Processes of airlock-agent: EXEC, STDIN, SIGNAL and the EXIT report.
 *
 * Each process leads its own session and process group, so a timeout or
 * SIGNAL reaches everything it started and left in that group. What
 * left it (setsid, a daemon) lives on until the sandbox ends, unless
 * the exec asked for kill_on_exit: then the process runs below a reaper
 * (reaper.c) that kills all its descendants when it ends. EXIT is sent
 * once the process is reaped and what it wrote has been drained from its
 * pipes; a background grandchild that keeps a pipe open does not hold
 * the EXIT back (its later output is lost, as documented for the API). */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"

/* Reads of AGENT_CHUNK taken from a pipe after its process was reaped. */
#define DRAIN_READS 16

static const char *const base_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"TERM=xterm",
};
#define N_BASE_ENV (sizeof base_env / sizeof *base_env)

static uint8_t chunk[AGENT_CHUNK];

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

void agent_exec_free(agent_req *r)
{
	close_fd(&r->out_fd);
	close_fd(&r->err_fd);
	close_fd(&r->in_fd);
}

/* argv from cmd (checked by al_exec_unpack). The strings stay owned by
 * the JSON object. */
static char **build_argv(json_object *cmd, al_err *err)
{
	size_t n = json_object_array_length(cmd);
	char **argv = calloc(n + 1, sizeof *argv);
	if (argv == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		argv[i] = (char *)json_object_get_string(
			json_object_array_get_idx(cmd, i));
	return argv;
}

static bool env_key_overridden(json_object *env, const char *entry)
{
	if (env == NULL)
		return false;
	size_t klen = strcspn(entry, "=");
	json_object_object_foreach(env, k, v)
	{
		(void)v;
		if (strlen(k) == klen && memcmp(k, entry, klen) == 0)
			return true;
	}
	return false;
}

/* The base environment plus env (which wins; checked by
 * al_exec_unpack), as KEY=VALUE strings. */
static char **build_envp(json_object *env, al_err *err)
{
	size_t n = env != NULL ? (size_t)json_object_object_length(env) : 0;
	char **envp = calloc(N_BASE_ENV + n + 1, sizeof *envp);
	if (envp == NULL) {
		al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
		return NULL;
	}
	size_t i = 0;
	for (size_t b = 0; b < N_BASE_ENV; b++) {
		if (env_key_overridden(env, base_env[b]))
			continue;
		envp[i] = strdup(base_env[b]);
		if (envp[i++] == NULL)
			goto oom;
	}
	if (env != NULL) {
		json_object_object_foreach(env, k, v)
		{
			if (asprintf(&envp[i], "%s=%s", k,
				     json_object_get_string(v)) < 0) {
				envp[i] = NULL;
				goto oom;
			}
			i++;
		}
	}
	return envp;
oom:
	al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	for (size_t j = 0; envp[j] != NULL; j++)
		free(envp[j]);
	free(envp);
	return NULL;
}

static void free_strv(char **v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/* ---- "user": who the process runs as ----------------------------------
 *
 * "name[:group]" or "uid[:gid]", resolved from the sandbox's own
 * /etc/passwd and /etc/group: the agent is static, so there is no NSS,
 * and the files are the sandbox's (untrusted) data, read with bounds. A
 * name that is not there is an error; a numeric uid that is not there is
 * taken as is, with gid 0, as Docker does. Supplementary groups are the
 * group file's memberships of the user name (plus the primary group). */

#define USER_FILE_MAX (4u << 20)
#define USER_SPEC_MAX 256
#define USER_MAX_GROUPS 64

typedef struct run_as {
	bool set;
	uid_t uid;
	gid_t gid;
	gid_t groups[USER_MAX_GROUPS];
	size_t ngroups;
	char home[256]; /* from passwd, "" if unknown */
} run_as;

/* Whole regular file into a NUL-terminated buffer; NULL if missing,
 * not a regular file or too big (a FIFO planted at /etc/passwd must not
 * block the agent). */
static char *read_small_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > (off_t)USER_FILE_MAX) {
		close(fd);
		return NULL;
	}
	size_t cap = (size_t)st.st_size + 1, len = 0;
	char *buf = malloc(cap);
	if (buf == NULL) {
		close(fd);
		return NULL;
	}
	while (len < cap - 1) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

/* Parse a decimal id (no sign, no blanks, < 2^32 - 1). */
static bool parse_id(const char *s, size_t n, uint32_t *out)
{
	if (n == 0 || n > 10)
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v >= UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* Split line (NUL-terminated, no '\n') at ':' into at most max fields. */
static size_t split_fields(char *line, char **f, size_t max)
{
	size_t n = 0;
	f[n++] = line;
	for (char *p = line; *p != '\0' && n < max; p++) {
		if (*p == ':') {
			*p = '\0';
			f[n++] = p + 1;
		}
	}
	return n;
}

/* passwd entry by name (byname) or by uid; fills uid, gid, home and the
 * name (for group memberships). 1 found, 0 not found. */
static int passwd_lookup(char *db, const char *name, bool byname, uint32_t uid,
			 run_as *ra, char *uname, size_t ulen)
{
	if (db == NULL)
		return 0;
	for (char *line = db, *next; line != NULL && *line != '\0';
	     line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		char *f[7];
		if (split_fields(line, f, 7) != 7)
			continue;
		uint32_t u, g;
		if (!parse_id(f[2], strlen(f[2]), &u) ||
		    !parse_id(f[3], strlen(f[3]), &g))
			continue;
		if (byname ? strcmp(f[0], name) != 0 : u != uid)
			continue;
		ra->uid = u;
		ra->gid = g;
		snprintf(ra->home, sizeof ra->home, "%s", f[5]);
		snprintf(uname, ulen, "%s", f[0]);
		return 1;
	}
	return 0;
}

/* Group by name: 1 found (gid set), 0 not. Also collects the groups
 * whose member list holds uname into ra->groups. */
static int group_scan(char *db, const char *gname, uint32_t *gid,
		      const char *uname, run_as *ra)
{
	int found = 0;
	if (db == NULL)
		return 0;
	for (char *line = db, *next; line != NULL && *line != '\0';
	     line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		char *f[4];
		if (split_fields(line, f, 4) != 4)
			continue;
		uint32_t g;
		if (!parse_id(f[2], strlen(f[2]), &g))
			continue;
		if (gname != NULL && !found && strcmp(f[0], gname) == 0) {
			*gid = g;
			found = 1;
		}
		if (uname == NULL || uname[0] == '\0')
			continue;
		for (char *m = f[3], *e; m != NULL && *m != '\0'; m = e) {
			e = strchr(m, ',');
			if (e != NULL)
				*e++ = '\0';
			if (strcmp(m, uname) == 0 &&
			    ra->ngroups < USER_MAX_GROUPS)
				ra->groups[ra->ngroups++] = g;
		}
	}
	return found;
}

static int resolve_user(const char *spec, run_as *ra, al_err *err)
{
	memset(ra, 0, sizeof *ra);
	if (spec == NULL)
		return 0;
	size_t n = strlen(spec);
	if (n == 0 || n > USER_SPEC_MAX)
		return al_err_set(err, AL_EINVAL, 0,
				  "field \"user\" must be 1 to %d bytes",
				  USER_SPEC_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)spec[i];
		if (c < 0x21 || c == 0x7f || c == '\n')
			return al_err_set(err, AL_EINVAL, 0,
					  "field \"user\" holds a blank or "
					  "control character");
	}
	char ubuf[USER_SPEC_MAX + 1], uname[256] = "";
	snprintf(ubuf, sizeof ubuf, "%s", spec);
	char *group = strchr(ubuf, ':');
	if (group != NULL)
		*group++ = '\0';
	if (ubuf[0] == '\0' || (group != NULL && group[0] == '\0'))
		return al_err_set(err, AL_EINVAL, 0,
				  "field \"user\" must be name[:group] or "
				  "uid[:gid]");

	char *pw = read_small_file("/etc/passwd");
	uint32_t id;
	int rc = -1;
	if (parse_id(ubuf, strlen(ubuf), &id)) {
		if (!passwd_lookup(pw, NULL, false, id, ra, uname,
				   sizeof uname)) {
			ra->uid = id;
			ra->gid = 0;
		}
	} else if (!passwd_lookup(pw, ubuf, true, 0, ra, uname, sizeof uname)) {
		al_err_set(err, AL_EINVAL, 0,
			   "user \"%s\" is not in the sandbox's /etc/passwd",
			   ubuf);
		goto out;
	}

	char *gr = read_small_file("/etc/group");
	uint32_t gid = ra->gid;
	int gfound = group_scan(gr, group, &gid, uname, ra);
	free(gr);
	if (group != NULL) {
		uint32_t g;
		if (parse_id(group, strlen(group), &g)) {
			gid = g;
		} else if (!gfound) {
			al_err_set(err, AL_EINVAL, 0,
				   "group \"%s\" is not in the sandbox's "
				   "/etc/group",
				   group);
			goto out;
		}
		ra->gid = gid;
	}
	if (ra->ngroups < USER_MAX_GROUPS)
		ra->groups[ra->ngroups++] = ra->gid;
	ra->set = true;
	rc = 0;
out:
	free(pw);
	return rc;
}

/* HOME of a user from passwd, unless the request's env sets it. */
static int apply_home(char **envp, const run_as *ra, al_err *err)
{
	if (!ra->set || ra->home[0] != '/')
		return 0;
	for (size_t i = 0; envp[i] != NULL; i++) {
		if (strcmp(envp[i], "HOME=/root") != 0)
			continue;
		char *h;
		if (asprintf(&h, "HOME=%s", ra->home) < 0)
			return al_err_set(err, AL_ENOMEM, ENOMEM,
					  "out of memory");
		free(envp[i]);
		envp[i] = h;
		return 0;
	}
	return 0;
}

/* In the child between fork and exec: only simple calls, and every
 * failure ends the child with a shell's exit status. */
static void __attribute__((noreturn))
child(char **argv, char **envp, const char *cwd, const run_as *ra, int in_fd,
      int out_fd, int err_fd)
{
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* Ignored dispositions survive exec; the agent's must not. */
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	setsid();
	if (in_fd < 0)
		in_fd = open("/dev/null", O_RDONLY);
	if (in_fd < 0 || dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 ||
	    dup2(err_fd, 2) < 0)
		_exit(126);
	/* The agent marks its own fds close-on-exec; this also covers any
	 * fd it inherited without the flag. Closing them outright would
	 * close the start pipe too early. */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	/* The agent is kept out of the OOM killer's reach (driver_ns.c,
	 * guest/init/init.c) and this child inherited that: what it runs
	 * must not be, or an OOM would find nothing to kill. Before the uid
	 * change, while a guest's root may still lower the floor too. */
	int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom < 0 || write(oom, "0", 1) != 1) {
		dprintf(2, "airlock-agent: resetting oom_score_adj: %s\n",
			strerror(errno));
		_exit(126);
	}
	close(oom);
	/* Groups, then gid, then uid: each later call needs the privilege
	 * the previous ones keep. Failing closed: never run as root by
	 * accident. */
	if (ra->set) {
		if (setgroups(ra->ngroups, ra->groups) < 0 ||
		    setgid(ra->gid) < 0 || setuid(ra->uid) < 0) {
			dprintf(2, "airlock-agent: switching to uid %u: %s\n",
				(unsigned)ra->uid, strerror(errno));
			_exit(126);
		}
	}
	if (chdir(cwd) < 0) {
		dprintf(2, "airlock-agent: cd %s: %s\n", cwd, strerror(errno));
		_exit(126);
	}
	extern char **environ;
	environ = envp;
	execvp(argv[0], argv);
	int e = errno;
	dprintf(2, "airlock-agent: %s: %s\n", argv[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/* child()'s arguments through agent_reaper_main. */
typedef struct child_args {
	char **argv, **envp;
	const char *cwd;
	const run_as *ra;
	int in_fd, out_fd, err_fd;
} child_args;

static void __attribute__((noreturn)) child_start(void *arg)
{
	const child_args *c = arg;
	child(c->argv, c->envp, c->cwd, c->ra, c->in_fd, c->out_fd, c->err_fd);
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

void agent_exec_start(agent *a, const al_frame *f)
{
	al_err err;
	char **argv = NULL;
	char **envp = NULL;
	int p_out[2] = {-1, -1}, p_err[2] = {-1, -1}, p_in[2] = {-1, -1};
	int p_sync[2] = {-1, -1};
	agent_req *r = NULL;
	struct stat st;
	run_as ra;
	al_exec_msg m;
	const char *cwd;

	if (al_exec_unpack(f->payload, f->len, &m, &err) < 0)
		goto fail;
	argv = build_argv(m.cmd, &err);
	if (argv == NULL)
		goto fail;
	envp = build_envp(m.env, &err);
	if (envp == NULL)
		goto fail;
	if (resolve_user(m.user, &ra, &err) < 0 ||
	    apply_home(envp, &ra, &err) < 0)
		goto fail;
	cwd = m.cwd != NULL ? m.cwd : "/";
	if (agent_check_path(cwd, &err) < 0)
		goto fail;
	if (stat(cwd, &st) < 0) {
		al_err_sys(&err, agent_code_from_errno(errno), errno, "cwd %s",
			   cwd);
		goto fail;
	}
	if (!S_ISDIR(st.st_mode)) {
		al_err_set(&err, AL_EPATH, 0, "cwd %s is not a directory", cwd);
		goto fail;
	}
	r = agent_req_new(a, f->id, REQ_PROC, &err);
	if (r == NULL)
		goto fail;
	if (pipe2(p_out, O_CLOEXEC) < 0 || pipe2(p_err, O_CLOEXEC) < 0 ||
	    pipe2(p_sync, O_CLOEXEC) < 0 ||
	    (m.stdin_open && pipe2(p_in, O_CLOEXEC) < 0)) {
		al_err_sys(&err, AL_ESYS, errno, "pipe");
		goto fail;
	}
	pid_t pid = fork();
	if (pid < 0) {
		al_err_sys(&err, AL_ESYS, errno, "fork");
		goto fail;
	}
	if (pid == 0) {
		child_args ca = {argv,	  envp,	    cwd,     &ra,
				 p_in[0], p_out[1], p_err[1]};
		if (m.kill_on_exit)
			agent_reaper_main(p_sync[1], child_start, &ca);
		child_start(&ca);
	}

	close_fd(&p_out[1]);
	close_fd(&p_err[1]);
	close_fd(&p_in[0]);
	close_fd(&p_sync[1]);
	/* Wait until the child has exec'd (or failed and exited): until it
	 * has its own process group and default signal dispositions, a
	 * SIGNAL from the host could miss it or be ignored. A reaper first
	 * writes the pid of the command it forked. */
	int cmd = 0;
	size_t got = 0;
	char extra;
	for (;;) {
		int full = got >= sizeof cmd;
		ssize_t n = read(p_sync[0], full ? &extra : (char *)&cmd + got,
				 full ? 1 : sizeof cmd - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close_fd(&p_sync[0]);
	r->pid = pid;
	if (m.kill_on_exit) {
		r->reaper = pid;
		/* No command pid: the reaper could not fork it and ends
		 * at once; signals go to the reaper meanwhile. */
		if (got == sizeof cmd && cmd > 0)
			r->pid = (pid_t)cmd;
	}
	r->out_fd = p_out[0];
	r->err_fd = p_err[0];
	r->in_fd = p_in[1];
	if (set_nonblock(r->out_fd) < 0 || set_nonblock(r->err_fd) < 0 ||
	    (r->in_fd >= 0 && set_nonblock(r->in_fd) < 0))
		al_warn("exec %u: cannot make pipes non-blocking: %s", f->id,
			strerror(errno));
	if (m.timeout_ms > 0)
		r->deadline_ms = al_now_ms() + m.timeout_ms;

	json_object *res = json_object_new_object();
	if (res != NULL) {
		json_object_object_add(res, "pid", json_object_new_int(r->pid));
		agent_send_json(a, AL_F_STARTED, f->id, res);
		json_object_put(res);
	}
	free(argv);
	free_strv(envp);
	al_exec_msg_free(&m);
	return;

fail:
	for (int i = 0; i < 2; i++) {
		close_fd(&p_out[i]);
		close_fd(&p_err[i]);
		close_fd(&p_in[i]);
		close_fd(&p_sync[i]);
	}
	if (r != NULL)
		agent_req_remove(a, r);
	free(argv);
	free_strv(envp);
	al_exec_msg_free(&m);
	agent_send_err(a, f->id, &err);
}

static agent_req *find_proc(agent *a, uint32_t id)
{
	agent_req *r = agent_req_find(a, id);
	return r != NULL && r->kind == REQ_PROC ? r : NULL;
}

void agent_exec_stdin_ready(agent *a, agent_req *r)
{
	(void)a;
	if (r->in_fd < 0)
		return;
	int rc = al_buf_flush(&r->inq, r->in_fd, NULL);
	if (rc < 0) {
		/* The process closed its stdin: what is left has no reader. */
		al_buf_free(&r->inq);
		close_fd(&r->in_fd);
		return;
	}
	if (rc == 0 && r->in_close)
		close_fd(&r->in_fd);
}

void agent_exec_stdin(agent *a, const al_frame *f)
{
	agent_req *r = find_proc(a, f->id);
	/* Stdin racing with the exit of its process is normal: drop it. */
	if (r == NULL || r->in_fd < 0 || r->in_close)
		return;
	if (f->len == 0) {
		r->in_close = true;
	} else if (al_buf_append(&r->inq, f->payload, f->len, NULL) < 0) {
		/* Cannot happen while take_frames honours the backlog mark;
		 * losing bytes silently would be worse than closing. */
		al_warn("exec %u: stdin queue overflow, closing stdin", r->id);
		al_buf_free(&r->inq);
		close_fd(&r->in_fd);
		return;
	}
	agent_exec_stdin_ready(a, r);
}

bool agent_exec_stdin_backlog(const agent *a)
{
	for (const agent_req *r = a->reqs; r != NULL; r = r->next)
		if (r->kind == REQ_PROC && r->in_fd >= 0 &&
		    al_buf_pending(&r->inq) >= AGENT_STDIN_HIGH)
			return true;
	return false;
}

static void kill_group(agent_req *r, int sig)
{
	if (r->pid <= 0 || r->reaped)
		return;
	/* The group first; the leader alone if it left its group. */
	if (kill(-r->pid, sig) < 0)
		kill(r->pid, sig);
}

static int parse_signal(const al_frame *f, int *sig, al_err *err)
{
	json_object *o = agent_parse_obj(f, err);
	json_object *v;
	if (o == NULL)
		return -1;
	if (!json_object_object_get_ex(o, "signal", &v) ||
	    !json_object_is_type(v, json_type_int)) {
		json_object_put(o);
		return al_err_set(err, AL_EINVAL, 0,
				  "field \"signal\" must be an integer");
	}
	int64_t s = json_object_get_int64(v);
	json_object_put(o);
	if (s < 1 || s >= NSIG)
		return al_err_set(err, AL_EINVAL, 0,
				  "signal %lld is out of range", (long long)s);
	*sig = (int)s;
	return 0;
}

void agent_exec_signal(agent *a, const al_frame *f)
{
	al_err err;
	int sig = 0;
	bool live = agent_req_find(a, f->id) != NULL;
	agent_req *r = find_proc(a, f->id);

	if (parse_signal(f, &sig, &err) < 0) {
		/* An ERROR would end the live request in the host's eyes
		 * while its process runs on. */
		if (live)
			al_warn("SIGNAL for %u ignored: %s", f->id, err.msg);
		else
			agent_send_err(a, f->id, &err);
		return;
	}
	/* A signal racing with the exit of its process is normal. */
	if (r == NULL)
		return;
	kill_group(r, sig);
}

void agent_exec_reap(agent *a)
{
	struct signalfd_siginfo_buf {
		uint8_t b[128];
	} sib[16];
	/* Drain the signalfd; the waitpid loop below is what counts, since
	 * several SIGCHLDs coalesce into one. */
	while (read(a->sigfd, sib, sizeof sib) > 0)
		;
	for (;;) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid <= 0)
			break;
		for (agent_req *r = a->reqs; r != NULL; r = r->next) {
			pid_t own = r->reaper > 0 ? r->reaper : r->pid;
			if (r->kind == REQ_PROC && own == pid && !r->reaped) {
				r->reaped = true;
				r->status = st;
				r->deadline_ms = 0;
				break;
			}
		}
		/* Anything else was an orphan re-parented to us. */
	}
}

/* Read one chunk: 1 = sent, -1 = nothing yet, 0 = EOF or error (the fd
 * is closed then). */
static int pipe_read(agent *a, agent_req *r, int which)
{
	int *fd = which == 1 ? &r->out_fd : &r->err_fd;
	if (*fd < 0)
		return 0;
	ssize_t n = read(*fd, chunk, sizeof chunk);
	if (n > 0) {
		agent_send(a, which == 1 ? AL_F_STDOUT : AL_F_STDERR, r->id,
			   chunk, (size_t)n);
		return 1;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -1;
	close_fd(fd);
	return 0;
}

void agent_exec_pipe_ready(agent *a, agent_req *r, int which)
{
	(void)pipe_read(a, r, which);
}

int agent_exec_timeouts(agent *a)
{
	int64_t now = al_now_ms();
	int64_t next = -1;
	for (agent_req *r = a->reqs; r != NULL; r = r->next) {
		if (r->kind != REQ_PROC || r->reaped || r->deadline_ms == 0)
			continue;
		if (now >= r->deadline_ms) {
			kill_group(r, SIGKILL);
			r->timed_out = true;
			r->deadline_ms = 0;
			continue;
		}
		int64_t left = r->deadline_ms - now;
		if (next < 0 || left < next)
			next = left;
	}
	if (next > 60000)
		next = 60000;
	return (int)next;
}

void agent_exec_shift_deadlines(agent *a, int64_t ms)
{
	for (agent_req *r = a->reqs; r != NULL; r = r->next)
		if (r->kind == REQ_PROC && r->deadline_ms != 0)
			r->deadline_ms += ms;
}

static void send_exit(agent *a, agent_req *r)
{
	al_exit_msg m = {.exit_code = -1};
	al_err err = {0};
	if (WIFSIGNALED(r->status)) {
		int sig = WTERMSIG(r->status);
		const char *abbrev = sigabbrev_np(sig);
		if (abbrev != NULL)
			snprintf(m.signal, sizeof m.signal, "SIG%.12s", abbrev);
		else
			snprintf(m.signal, sizeof m.signal, "SIG%d", sig);
		m.timed_out = r->timed_out;
	} else {
		m.exit_code = WEXITSTATUS(r->status);
	}
	char *txt = al_exit_pack(&m, &err);
	if (txt == NULL) {
		al_error("reporting exit of %u: %s", r->id, err.msg);
		return;
	}
	agent_send(a, AL_F_EXIT, r->id, txt, strlen(txt));
	free(txt);
}

void agent_exec_finish(agent *a)
{
	agent_req *next;
	for (agent_req *r = a->reqs; r != NULL; r = next) {
		next = r->next;
		if (r->kind != REQ_PROC || !r->reaped)
			continue;
		/* All the process wrote is in the pipes now; a grandchild
		 * may still hold them open and write on, so bounded. */
		for (int which = 1; which <= 2; which++)
			for (int i = 0; i < DRAIN_READS; i++)
				if (pipe_read(a, r, which) != 1)
					break;
		send_exit(a, r);
		agent_req_remove(a, r);
	}
}

void agent_exec_kill_all(agent *a)
{
	for (agent_req *r = a->reqs; r != NULL; r = r->next)
		if (r->kind == REQ_PROC)
			kill_group(r, SIGKILL);
}
