/* Files of airlock-agent: FILE_READ, FILE_WRITE (+ FILE_DATA, FILE_END)
 * and FILE_LIST. Paths are taken as given (absolute): the agent sees the
 * sandbox's own root, which is what confines them. */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"

/* Entries listed at most; a bigger directory is reported truncated. */
#define MAX_LIST 100000

static uint8_t chunk[AGENT_CHUNK];

void agent_file_free(agent_req *r)
{
	if (r->fd >= 0) {
		close(r->fd);
		r->fd = -1;
	}
	if (r->tmp != NULL) {
		/* A write that did not reach FILE_END leaves nothing. */
		unlink(r->tmp);
		free(r->tmp);
		r->tmp = NULL;
	}
	free(r->path);
	r->path = NULL;
}

static void fail_req(agent *a, agent_req *r, const al_err *err)
{
	uint32_t id = r->id;
	agent_req_remove(a, r);
	agent_send_err(a, id, err);
}

/* ---- FILE_READ ---- */

void agent_file_read(agent *a, const al_frame *f)
{
	al_err err;
	al_file_req q;
	const char *path = q.path;
	agent_req *r;
	struct stat st;

	if (al_file_req_unpack(f->payload, f->len, &q, &err) < 0)
		goto fail;
	r = agent_req_new(a, f->id, REQ_FREAD, &err);
	if (r == NULL)
		goto fail;
	/* O_NONBLOCK: opening a FIFO must not hang the agent. */
	r->fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (r->fd < 0) {
		al_err_sys(&err, agent_code_from_errno(errno), errno, "open %s",
			   path);
		fail_req(a, r, &err);
		return;
	}
	if (fstat(r->fd, &st) < 0) {
		al_err_sys(&err, AL_ESYS, errno, "stat %s", path);
		fail_req(a, r, &err);
	} else if (!S_ISREG(st.st_mode)) {
		al_err_set(&err, AL_EPATH, 0, "%s is %s", path,
			   S_ISDIR(st.st_mode) ? "a directory"
					       : "not a regular file");
		fail_req(a, r, &err);
	}
	return;
fail:
	agent_send_err(a, f->id, &err);
}

bool agent_file_pump(agent *a)
{
	bool more = false;
	agent_req *next;
	for (agent_req *r = a->reqs; r != NULL; r = next) {
		next = r->next;
		if (r->kind != REQ_FREAD)
			continue;
		if (agent_out_full(a))
			return true;
		ssize_t n = read(r->fd, chunk, sizeof chunk);
		if (n > 0) {
			agent_send(a, AL_F_FILE_DATA, r->id, chunk, (size_t)n);
			more = true;
		} else if (n == 0) {
			agent_send(a, AL_F_FILE_END, r->id, NULL, 0);
			agent_req_remove(a, r);
		} else if (errno == EINTR || errno == EAGAIN) {
			more = true;
		} else {
			al_err err;
			al_err_sys(&err, AL_ESYS, errno, "read");
			fail_req(a, r, &err);
		}
	}
	return more;
}

/* ---- FILE_WRITE ---- */

/* mkdir -p dir, mode 0755 for what it creates. */
static int make_parents(char *dir, al_err *err)
{
	for (char *p = dir + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		int rc = mkdir(dir, 0755);
		int e = errno;
		*p = c;
		if (rc < 0 && e != EEXIST)
			return al_err_sys(err, agent_code_from_errno(e), e,
					  "mkdir %.*s", (int)(p - dir), dir);
		if (c == '\0')
			return 0;
	}
}

/* FILE_WRITE: the content goes to a hidden temporary file in the target's
 * own directory (so the final rename cannot cross a filesystem), which
 * agent_file_end renames over the target once it is complete and on disk.
 * Until then the target, if any, is untouched; a write that never
 * completes is unlinked (agent_file_free). */
void agent_file_write(agent *a, const al_frame *f)
{
	al_err err;
	al_file_req q;
	agent_req *r;

	if (al_file_req_unpack(f->payload, f->len, &q, &err) < 0) {
		agent_send_err(a, f->id, &err);
		return;
	}
	const char *path = q.path;
	const char *slash = strrchr(path, '/');
	const char *base = slash + 1;
	if (base[0] == '\0' || strcmp(base, ".") == 0 ||
	    strcmp(base, "..") == 0) {
		al_err_set(&err, AL_EPATH, 0, "%s does not name a file", path);
		agent_send_err(a, f->id, &err);
		return;
	}
	r = agent_req_new(a, f->id, REQ_FWRITE, &err);
	if (r == NULL) {
		agent_send_err(a, f->id, &err);
		return;
	}
	size_t dlen = (size_t)(slash - path);
	char *tmp = NULL;
	r->path = strdup(path);
	/* The temporary name is short so a base name near NAME_MAX fits. */
	if (r->path == NULL ||
	    asprintf(&tmp, "%.*s/.airlock-tmp-XXXXXX", (int)dlen, path) < 0) {
		al_err_set(&err, AL_ENOMEM, ENOMEM, "out of memory");
		goto fail;
	}
	if (dlen > 0) {
		tmp[dlen] = '\0';
		int rc = make_parents(tmp, &err);
		tmp[dlen] = '/';
		if (rc < 0)
			goto fail;
	}
	r->fd = mkostemp(tmp, O_CLOEXEC);
	if (r->fd < 0) {
		int e = errno;
		al_err_sys(&err, agent_code_from_errno(e), e,
			   "create a file beside %s", path);
		goto fail;
	}
	r->tmp = tmp; /* from here on agent_file_free unlinks it */
	tmp = NULL;
	if (fchmod(r->fd, (mode_t)q.mode) < 0) {
		al_err_sys(&err, AL_ESYS, errno, "chmod %s", path);
		goto fail;
	}
	return;
fail:
	free(tmp);
	fail_req(a, r, &err);
}

/* The write request of f, or NULL: data for a request that already
 * failed (and was answered) is dropped quietly. */
static agent_req *find_write(agent *a, const al_frame *f)
{
	agent_req *r = agent_req_find(a, f->id);
	if (r == NULL)
		return NULL;
	if (r->kind != REQ_FWRITE) {
		al_warn("%s for request %u which is not a file write",
			al_frame_type_name(f->type), f->id);
		return NULL;
	}
	return r;
}

void agent_file_data(agent *a, const al_frame *f)
{
	agent_req *r = find_write(a, f);
	if (r == NULL)
		return;
	size_t done = 0;
	while (done < f->len) {
		ssize_t n = write(r->fd, f->payload + done, f->len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			al_err err;
			al_err_sys(&err, agent_code_from_errno(errno), errno,
				   "write %s", r->path);
			fail_req(a, r, &err);
			return;
		}
		done += (size_t)n;
	}
	r->bytes += f->len;
}

/* fsync the directory holding path, so the rename that put a file
 * there survives a crash of the machine. Best effort: the file is whole
 * and in place either way. */
static void sync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%.*s",
		 slash == path ? 1 : (int)(slash - path), path);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (fsync(fd) < 0 && errno != EINVAL))
		al_warn("fsync %s: %s", dir, strerror(errno));
	if (fd >= 0)
		close(fd);
}

void agent_file_end(agent *a, const al_frame *f)
{
	al_err err;
	agent_req *r = find_write(a, f);
	if (r == NULL)
		return;
	/* Whole and durable before it takes the target's name. */
	if (fsync(r->fd) < 0) {
		al_err_sys(&err, agent_code_from_errno(errno), errno,
			   "write %s", r->path);
		fail_req(a, r, &err);
		return;
	}
	int fd = r->fd;
	r->fd = -1;
	if (close(fd) < 0) {
		al_err_sys(&err, AL_ESYS, errno, "write %s", r->path);
		fail_req(a, r, &err);
		return;
	}
	if (rename(r->tmp, r->path) < 0) {
		al_err_sys(&err, agent_code_from_errno(errno), errno,
			   "rename to %s", r->path);
		fail_req(a, r, &err);
		return;
	}
	free(r->tmp);
	r->tmp = NULL;
	sync_parent(r->path);
	uint64_t bytes = r->bytes;
	uint32_t id = r->id;
	agent_req_remove(a, r);
	char *res = al_file_result_pack(bytes, &err);
	if (res == NULL) {
		agent_send_err(a, id, &err);
		return;
	}
	agent_send(a, AL_F_RESULT, id, res, strlen(res));
	free(res);
}

bool agent_file_abort(agent *a, const al_frame *f)
{
	agent_req *r = agent_req_find(a, f->id);
	if (r == NULL || (r->kind != REQ_FWRITE && r->kind != REQ_FREAD))
		return false;
	/* agent_file_free (through remove) unlinks a write's temp file. */
	agent_req_remove(a, r);
	return true;
}

/* ---- FILE_LIST ---- */

static int cmp_names(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static const char *type_of(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

static json_object *list_dir(int dfd, const char *path, al_err *err)
{
	DIR *d = fdopendir(dfd);
	if (d == NULL) {
		close(dfd);
		al_err_sys(err, AL_ESYS, errno, "opendir %s", path);
		return NULL;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	bool truncated = false;
	json_object *res = NULL;
	struct dirent *de;

	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (n == MAX_LIST) {
			truncated = true;
			break;
		}
		if (n == cap) {
			size_t ncap = cap != 0 ? cap * 2 : 64;
			char **nn = realloc(names, ncap * sizeof *nn);
			if (nn == NULL)
				goto oom;
			names = nn;
			cap = ncap;
		}
		names[n] = strdup(de->d_name);
		if (names[n] == NULL)
			goto oom;
		n++;
	}
	if (n > 0)
		qsort(names, n, sizeof *names, cmp_names);

	res = json_object_new_object();
	json_object *arr = json_object_new_array();
	if (res == NULL || arr == NULL) {
		json_object_put(arr);
		goto oom;
	}
	json_object_object_add(res, "entries", arr);
	/* Stay under the frame limit: budget each entry at its worst
	 * escaped size (\u00XX per byte) plus the fixed fields. */
	size_t budget = AL_FRAME_MAX_PAYLOAD - 4096;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		size_t cost = strlen(names[i]) * 6 + 128;
		if (cost > budget) {
			truncated = true;
			break;
		}
		/* An entry that vanished since readdir is simply gone. */
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		budget -= cost;
		json_object *e = json_object_new_object();
		if (e == NULL)
			goto oom;
		json_object_object_add(e, "name",
				       json_object_new_string(names[i]));
		json_object_object_add(
			e, "type", json_object_new_string(type_of(st.st_mode)));
		json_object_object_add(e, "size",
				       json_object_new_int64(st.st_size));
		json_object_object_add(e, "mode",
				       json_object_new_int(st.st_mode & 07777));
		json_object_object_add(e, "mtime",
				       json_object_new_int64(st.st_mtime));
		json_object_array_add(arr, e);
	}
	if (truncated)
		json_object_object_add(res, "truncated",
				       json_object_new_boolean(true));
	goto out;
oom:
	json_object_put(res);
	res = NULL;
	al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory listing %s", path);
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return res;
}

void agent_file_list(agent *a, const al_frame *f)
{
	al_err err;
	al_file_req q;
	const char *path = q.path;
	json_object *res = NULL;

	if (al_file_req_unpack(f->payload, f->len, &q, &err) < 0)
		goto fail;
	if (agent_req_find(a, f->id) != NULL) {
		al_err_set(&err, AL_EEXIST, 0, "request id %u is already live",
			   f->id);
		goto fail;
	}
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		int e = errno;
		if (e == ENOTDIR)
			al_err_set(&err, AL_EPATH, 0, "%s is not a directory",
				   path);
		else
			al_err_sys(&err, agent_code_from_errno(e), e, "open %s",
				   path);
		goto fail;
	}
	res = list_dir(dfd, path, &err);
	if (res == NULL)
		goto fail;
	agent_send_json(a, AL_F_RESULT, f->id, res);
	json_object_put(res);
	return;
fail:
	agent_send_err(a, f->id, &err);
}
