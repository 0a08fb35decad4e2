/* Fuzz the build context unpacker: arbitrary bytes as a (maybe gzipped)
 * tar, unpacked into a fresh directory, then hashed and copied into a
 * second one as a COPY step would; nothing may appear beside them. */
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/rmtree.h"
#include "template/context.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Only c/ and r/ may exist in the parent directory. */
static void check_parent(const char *parent)
{
	DIR *d = opendir(parent);
	if (d == NULL)
		abort();
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 &&
		    strcmp(e->d_name, "..") != 0 &&
		    strcmp(e->d_name, "c") != 0 && strcmp(e->d_name, "r") != 0)
			abort();
	closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	char parent[64], ctx[80], root[80];
	snprintf(parent, sizeof parent, "%s/fuzz_context_XXXXXX", tmp);
	if (mkdtemp(parent) == NULL)
		abort();
	snprintf(ctx, sizeof ctx, "%s/c", parent);
	snprintf(root, sizeof root, "%s/r", parent);
	if (mkdir(ctx, 0700) < 0 || mkdir(root, 0700) < 0)
		abort();
	int fd = memfd_create("tar", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size ||
	    lseek(fd, 0, SEEK_SET) != 0)
		abort();
	al_err err = {0};
	al_context_limits lim = {.max_bytes = 1 << 20, .max_entries = 1000};
	if (al_context_unpack(fd, ctx, &lim, &err) == 0) {
		char h1[AL_CONTEXT_HASH_HEX], h2[AL_CONTEXT_HASH_HEX];
		if (al_context_hash(ctx, ".", h1, &err) < 0 ||
		    al_context_hash(ctx, ".", h2, &err) < 0 ||
		    strcmp(h1, h2) != 0)
			abort();
		/* May fail (e.g. a file where a directory goes), but must
		 * stay inside r/. */
		(void)al_context_copy(ctx, ".", root, "/", -1, getuid(),
				      getgid(), &err);
	} else if (err.code == AL_OK) {
		abort();
	}
	close(fd);
	check_parent(parent);
	if (al_rmtree(parent, &err) < 0)
		abort();
	return 0;
}
