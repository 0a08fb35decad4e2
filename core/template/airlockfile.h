/* airlockfile: the parser of an Airlockfile, the Dockerfile subset a
 * template is built from. The bytes come from an API client: hostile.
 *
 * Syntax. One instruction per logical line; a physical line ending in '\'
 * (trailing blanks allowed after it) continues on the next one, and
 * comment or blank lines inside a continuation are skipped. Lines whose
 * first non-blank byte is '#' are comments. Keywords are case-insensitive.
 * Lines may end in CRLF. The file must be UTF-8 without control bytes
 * other than TAB.
 *
 *   FROM scratch | FROM <template> | FROM debian:bookworm [--include=p1,p2]
 *                     first instruction, exactly once. <template> is
 *                     [a-z0-9-]{1,63}; packages [a-z0-9][a-z0-9+.-]*.
 *   RUN <shell command> | RUN ["prog", "arg", ...]
 *   COPY [--chmod=0755] <src>... <dest> | COPY [--chmod=..] ["src", "dest"]
 *                     srcs are relative to the build context (no '/' at
 *                     the start, no ".." component); several srcs need a
 *                     dest ending in '/'. A relative dest is resolved
 *                     against the WORKDIR in effect.
 *   ENV KEY=VALUE [KEY2="V 2" ...] | ENV KEY VALUE (rest of the line)
 *   WORKDIR <path>    relative paths resolve against the previous WORKDIR
 *   USER <name-or-uid>[:<group-or-gid>]
 *   START <command>   shell or exec form, at most once: run after create
 *   READY <command>   shell or exec form, at most once: readiness check
 *
 * A JSON array after RUN/START/READY/COPY is the exec form; a line that
 * starts with '[' but is not a JSON array (like "RUN [ -f x ] && y") is
 * shell form, as in Docker. The shell form's argv is
 * {"/bin/sh", "-c", <command>}.
 *
 * Errors. Every parse error names the 1-based line of the offending
 * instruction (its first physical line) in the message ("line 3: unknown
 * instruction 'FOO'") and in *err_line, so the API can answer 400 naming
 * it. All of them are AL_EINVAL except a file over AL_AF_MAX_BYTES
 * (AL_ETOOBIG, line 0) and AL_ENOMEM. A file without any instruction
 * fails with line 0.
 *
 * Cache keys. al_airlockfile_step_key() hashes a step's parsed form (not
 * its spelling: whitespace, case of the keyword and comments do not
 * matter) with its parent's key and, for COPY, the hash of the copied
 * files (al_context_hash_srcs() in core/template/context.h). */
#ifndef AL_AIRLOCKFILE_H
#define AL_AIRLOCKFILE_H

#include <stddef.h>

#include "base/err.h"

#define AL_AF_MAX_BYTES (1024 * 1024) /* whole file */
#define AL_AF_MAX_STEPS 1000	      /* instructions, FROM included */
#define AL_AF_MAX_LINE (64 * 1024)    /* logical line, continuations joined */
#define AL_AF_NAME_MAX 63	      /* template name */
#define AL_AF_PATH_MAX 4096	      /* COPY src/dest, WORKDIR */
#define AL_AF_MAX_ENV 4096	      /* ENV pairs in the whole file */
#define AL_AF_MAX_PACKAGES 512	      /* FROM debian --include */
#define AL_AF_KEY_HEX 65	      /* 64 hex digits + NUL */

typedef enum al_af_kind {
	AL_AF_FROM = 0,
	AL_AF_RUN,
	AL_AF_COPY,
	AL_AF_ENV,
	AL_AF_WORKDIR,
	AL_AF_USER,
	AL_AF_START,
	AL_AF_READY,
} al_af_kind;

typedef enum al_af_base {
	AL_AF_BASE_SCRATCH = 0, /* empty filesystem */
	AL_AF_BASE_TEMPLATE,	/* another template, by name */
	AL_AF_BASE_DEBIAN,	/* debootstrap of suite + packages */
} al_af_base;

/* FROM. */
typedef struct al_af_from {
	al_af_base base;
	const char *template_name; /* AL_AF_BASE_TEMPLATE, else NULL */
	const char *suite; /* AL_AF_BASE_DEBIAN: "bookworm", else NULL */
	const char *const *packages; /* --include list, in the order given */
	size_t npackages;	     /* 0 when no --include */
} al_af_from;

/* RUN, START, READY. argv is NULL-terminated and never empty. */
typedef struct al_af_cmd {
	int exec_form;		 /* 1: JSON array as written; 0: shell form */
	const char *const *argv; /* shell form: {"/bin/sh", "-c", cmd} */
	size_t argc;
} al_af_cmd;

/* COPY. */
typedef struct al_af_copy {
	const char *const *src; /* normalized, relative; "." is the context */
	size_t nsrc;		/* >= 1 */
	/* Absolute and normalized ("." and ".." folded, never above "/"),
	 * resolved against WORKDIR. It ends in '/' exactly when the
	 * destination is a directory to copy into (written with a trailing
	 * '/' or "."), which is what al_context_copy() expects. */
	const char *dest;
	int dest_is_dir;
	int chmod; /* --chmod bits (<= 07777), or -1 when absent */
} al_af_copy;

typedef struct al_af_env {
	const char *key;   /* [A-Za-z_][A-Za-z0-9_]* */
	const char *value; /* unquoted, may be empty */
} al_af_env;

typedef struct al_af_step {
	al_af_kind kind;
	int line;	  /* first physical line, 1-based */
	const char *text; /* the instruction as written, continuations
			   * joined and trimmed: for logs */

	/* Arguments: the member for kind, the others zero. */
	al_af_from from;      /* FROM */
	al_af_cmd cmd;	      /* RUN, START, READY */
	al_af_copy copy;      /* COPY */
	const al_af_env *env; /* ENV: its pairs (inside af->env) */
	size_t env_n;
	const char *path;	/* WORKDIR: resolved, absolute */
	const char *user_name;	/* USER: user as written */
	const char *user_group; /* USER: group as written, or NULL */

	/* The state in effect once this step is done: what a RUN step runs
	 * with. Defaults: workdir "/", user "root", group NULL, no env. */
	const char *workdir;
	const char *user;
	const char *group;
	size_t nenv; /* af->env[0..nenv) apply, a later key wins */
} al_af_step;

typedef struct al_airlockfile {
	al_af_step *steps; /* every instruction in order; steps[0] is FROM */
	size_t nsteps;
	const al_af_from *from;	 /* &steps[0].from */
	const al_af_step *start; /* START step, or NULL */
	const al_af_step *ready; /* READY step, or NULL */
	al_af_env *env;		 /* every ENV pair in file order */
	size_t nenv;
	/* Final state, what the template's sandboxes run with:
	 * steps[nsteps - 1].workdir / .user / .group / .nenv. */
	void *arena_; /* private: owns every string above */
} al_airlockfile;

/* Parse buf[0..len) (need not be NUL-terminated). On failure returns NULL,
 * fills err ("line N: ...") and sets *err_line (if not NULL) to N, or to
 * 0 when the error is not tied to a line. */
al_airlockfile *al_airlockfile_parse(const char *buf, size_t len, int *err_line,
				     al_err *err);
void al_airlockfile_free(al_airlockfile *af);

/* The environment of af->env[0..nenv) as a NULL-terminated "KEY=VALUE"
 * array, one entry per key (a later ENV wins, first-seen order). One
 * allocation: release it with free(). */
char **al_airlockfile_envp(const al_airlockfile *af, size_t nenv, al_err *err);

/* "FROM", "RUN", ... */
const char *al_airlockfile_kind_name(al_af_kind kind);

/* Cache key of step: lowercase hex sha256 over a canonical encoding of
 * parent_key (NULL for a step without parent, e.g. FROM scratch; the
 * builder passes the base template version's key for FROM <template>),
 * the step's kind and parsed arguments, and extra_hash (NULL, or for COPY
 * the hex hash of the copied files). Equal inputs give equal keys; any
 * change in one of them changes the key. out gets 64 hex digits + NUL. */
int al_airlockfile_step_key(const char *parent_key, const al_af_step *step,
			    const char *extra_hash, char out[AL_AF_KEY_HEX],
			    al_err *err);

#endif
