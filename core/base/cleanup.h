/* cleanup: scope-bound release of locals (GCC/Clang cleanup attribute).
 * Ownership leaves a scope through al_steal() / al_steal_fd(). Never keep
 * an al_auto* local live across a Lua call that can raise (longjmp). */
#ifndef AL_CLEANUP_H
#define AL_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void al_cleanup_free(void *p)
{
	free(*(void **)p);
}
static inline void al_cleanup_fd(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void al_cleanup_file(FILE **f)
{
	if (*f != NULL)
		fclose(*f);
}

#define al_autofree __attribute__((cleanup(al_cleanup_free)))
#define al_autofd __attribute__((cleanup(al_cleanup_fd)))
#define al_autofile __attribute__((cleanup(al_cleanup_file)))

static inline void *al_steal_ptr(void *pp)
{
	void **p = (void **)pp;
	void *v = *p;
	*p = NULL;
	return v;
}
#define al_steal(pp) al_steal_ptr(pp)

static inline int al_steal_fd(int *fd)
{
	int v = *fd;
	*fd = -1;
	return v;
}

#endif
