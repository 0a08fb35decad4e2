#include "template/airlockfile.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <openssl/evp.h>

/* Every string of a parsed file lives in one arena, so a failure half-way
 * through an instruction frees everything with the arena and no error path
 * has to track partial allocations. */
typedef struct arena_chunk {
	struct arena_chunk *next;
	size_t used;
	size_t cap;
	max_align_t data[];
} arena_chunk;

#define ARENA_CHUNK (64 * 1024)

typedef struct parser {
	al_airlockfile *af;
	arena_chunk *arena;
	size_t cap_steps;
	size_t cap_env;
	const char *workdir;
	const char *user;
	const char *group;
	int line; /* first physical line of the current instruction */
	al_err *err;
} parser;

static void *arena_alloc(parser *p, size_t n)
{
	n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	arena_chunk *c = p->arena;
	if (c == NULL || c->cap - c->used < n) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		c = malloc(sizeof *c + cap);
		if (c == NULL)
			return NULL;
		c->next = p->arena;
		c->used = 0;
		c->cap = cap;
		p->arena = c;
	}
	void *r = (char *)c->data + c->used;
	c->used += n;
	return r;
}

static char *arena_strndup(parser *p, const char *s, size_t n)
{
	char *r = arena_alloc(p, n + 1);
	if (r == NULL)
		return NULL;
	memcpy(r, s, n);
	r[n] = '\0';
	return r;
}

static void arena_free(arena_chunk *c)
{
	while (c != NULL) {
		arena_chunk *next = c->next;
		free(c);
		c = next;
	}
}

static int perr(parser *p, al_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Errors name the instruction's line first: the API relays the message. */
static int perr(parser *p, al_code code, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (p->line > 0)
		return al_err_set(p->err, code, 0, "line %d: %s", p->line, msg);
	return al_err_set(p->err, code, 0, "%s", msg);
}

static int oom(parser *p)
{
	return perr(p, AL_ENOMEM, "out of memory");
}

/* Copy at most max bytes of s for an error message without cutting a
 * UTF-8 sequence in two (messages end up in JSON). */
static const char *excerpt(const char *s, size_t n, char *buf, size_t bufsz)
{
	if (n > bufsz - 4) {
		n = bufsz - 4;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
		memcpy(buf, s, n);
		memcpy(buf + n, "...", 4);
	} else {
		memcpy(buf, s, n);
		buf[n] = '\0';
	}
	return buf;
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static int is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int is_alpha_(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 if invalid (overlong
 * forms, surrogates and code points above U+10FFFF are invalid). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* A physical line may hold UTF-8 text and TABs, nothing else: no NUL, no
 * stray CR, no escape sequences that would end up in build logs. */
static int check_bytes(parser *p, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		if ((u[i] < 0x20 && u[i] != '\t') || u[i] == 0x7f)
			return perr(p, AL_EINVAL,
				    "control character 0x%02x is not allowed",
				    u[i]);
		size_t l = utf8_len(u + i, n - i);
		if (l == 0)
			return perr(p, AL_EINVAL, "invalid UTF-8");
		i += l;
	}
	return 0;
}

/* --- paths --- */

/* Append component c[0..n) to the absolute path out (length *len),
 * folding "." and ".." (never above "/"). */
static int path_push(char *out, size_t *len, const char *c, size_t n)
{
	if (n == 0 || (n == 1 && c[0] == '.'))
		return 0;
	if (n == 2 && c[0] == '.' && c[1] == '.') {
		while (*len > 1 && out[*len - 1] != '/')
			(*len)--;
		if (*len > 1)
			(*len)--;
		out[*len] = '\0';
		return 0;
	}
	size_t need = *len + (*len > 1 ? 1 : 0) + n;
	if (need > AL_AF_PATH_MAX)
		return -1;
	if (*len > 1)
		out[(*len)++] = '/';
	memcpy(out + *len, c, n);
	*len += n;
	out[*len] = '\0';
	return 0;
}

/* Resolve path against base (an absolute, normalized path) into out,
 * which holds AL_AF_PATH_MAX + 1 bytes. */
static int path_resolve(const char *base, const char *path, char *out)
{
	size_t len = 1;
	out[0] = '/';
	out[1] = '\0';
	if (path[0] != '/') {
		const char *b = base;
		while (*b != '\0') {
			size_t n = strcspn(b, "/");
			if (path_push(out, &len, b, n) < 0)
				return -1;
			b += n;
			if (*b == '/')
				b++;
		}
	}
	const char *s = path;
	while (*s != '\0') {
		size_t n = strcspn(s, "/");
		if (path_push(out, &len, s, n) < 0)
			return -1;
		s += n;
		if (*s == '/')
			s++;
	}
	return 0;
}

static int has_ctl(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* --- JSON exec form --- */

/* 1 with *argv_out / *argc_out when args is a JSON array of strings, 0
 * when args is not a JSON array at all (shell form), -1 when it is an
 * array but not one of non-empty-able strings. */
static int parse_json_array(parser *p, const char *args, const char *what,
			    const char ***argv_out, size_t *argc_out)
{
	if (args[0] != '[')
		return 0;
	size_t len = strlen(args);
	json_tokener *tok = json_tokener_new_ex(4);
	if (tok == NULL)
		return oom(p);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
					    JSON_TOKENER_VALIDATE_UTF8);
	json_object *arr = json_tokener_parse_ex(tok, args, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (arr == NULL || jerr != json_tokener_success) {
		json_object_put(arr);
		return 0;
	}
	while (end < len && is_blank(args[end]))
		end++;
	if (end != len || !json_object_is_type(arr, json_type_array)) {
		json_object_put(arr);
		return 0;
	}
	size_t n = json_object_array_length(arr);
	int rc = -1;
	if (n == 0) {
		perr(p, AL_EINVAL, "%s: empty JSON array", what);
		goto out;
	}
	const char **argv = arena_alloc(p, (n + 1) * sizeof *argv);
	if (argv == NULL) {
		oom(p);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(arr, i);
		if (!json_object_is_type(e, json_type_string)) {
			perr(p, AL_EINVAL,
			     "%s: JSON array must hold only strings", what);
			goto out;
		}
		const char *s = json_object_get_string(e);
		size_t sl = (size_t)json_object_get_string_len(e);
		if (strlen(s) != sl) {
			perr(p, AL_EINVAL, "%s: NUL byte in JSON string", what);
			goto out;
		}
		argv[i] = arena_strndup(p, s, sl);
		if (argv[i] == NULL) {
			oom(p);
			goto out;
		}
	}
	argv[n] = NULL;
	*argv_out = argv;
	*argc_out = n;
	rc = 1;
out:
	json_object_put(arr);
	return rc;
}

/* Split s (modified in place) at blanks into an arena array. */
static char **split_words(parser *p, char *s, size_t *n_out)
{
	size_t max = strlen(s) / 2 + 2;
	char **w = arena_alloc(p, max * sizeof *w);
	if (w == NULL)
		return NULL;
	size_t n = 0;
	while (*s != '\0') {
		while (is_blank(*s))
			*s++ = '\0';
		if (*s == '\0')
			break;
		w[n++] = s;
		while (*s != '\0' && !is_blank(*s))
			s++;
	}
	w[n] = NULL;
	*n_out = n;
	return w;
}

/* --- instructions --- */

static int parse_from(parser *p, al_af_step *st, char *args)
{
	size_t n;
	char **w = split_words(p, args, &n);
	if (w == NULL)
		return oom(p);
	const char *image = NULL;
	const char *include = NULL;
	char ex[64];
	for (size_t i = 0; i < n; i++) {
		if (strncmp(w[i], "--include=", 10) == 0) {
			if (include != NULL)
				return perr(p, AL_EINVAL,
					    "FROM: --include given twice");
			include = w[i] + 10;
		} else if (w[i][0] == '-') {
			return perr(p, AL_EINVAL, "FROM: unknown option '%s'",
				    excerpt(w[i], strlen(w[i]), ex, sizeof ex));
		} else if (image != NULL) {
			return perr(p, AL_EINVAL,
				    "FROM takes one base (scratch, "
				    "debian:bookworm or a template name)");
		} else {
			image = w[i];
		}
	}
	if (image == NULL)
		return perr(p, AL_EINVAL,
			    "FROM needs a base (scratch, "
			    "debian:bookworm or a template name)");
	al_af_from *f = &st->from;
	if (strcmp(image, "scratch") == 0) {
		f->base = AL_AF_BASE_SCRATCH;
	} else if (strcmp(image, "debian:bookworm") == 0) {
		f->base = AL_AF_BASE_DEBIAN;
		f->suite = "bookworm";
	} else {
		size_t l = strlen(image);
		int ok = l >= 1 && l <= AL_AF_NAME_MAX;
		for (size_t i = 0; ok && i < l; i++)
			ok = is_lower_alnum(image[i]) || image[i] == '-';
		if (!ok)
			return perr(p, AL_EINVAL,
				    "FROM: unsupported base '%s' (scratch, "
				    "debian:bookworm or a template name "
				    "[a-z0-9-]{1,63})",
				    excerpt(image, l, ex, sizeof ex));
		f->base = AL_AF_BASE_TEMPLATE;
		f->template_name = image;
	}
	if (include == NULL)
		return 0;
	if (f->base != AL_AF_BASE_DEBIAN)
		return perr(p, AL_EINVAL,
			    "FROM: --include applies only to debian:bookworm");
	size_t np = 1;
	for (const char *c = include; *c != '\0'; c++)
		np += *c == ',';
	if (np > AL_AF_MAX_PACKAGES)
		return perr(p, AL_EINVAL, "FROM: more than %d packages",
			    AL_AF_MAX_PACKAGES);
	const char **pk = arena_alloc(p, (np + 1) * sizeof *pk);
	if (pk == NULL)
		return oom(p);
	size_t k = 0;
	const char *c = include;
	for (;;) {
		size_t l = strcspn(c, ",");
		int ok = l >= 1 && l <= 128 && is_lower_alnum(c[0]);
		for (size_t i = 1; ok && i < l; i++)
			ok = is_lower_alnum(c[i]) || c[i] == '+' ||
			     c[i] == '.' || c[i] == '-';
		if (!ok)
			return perr(p, AL_EINVAL,
				    "FROM: invalid package name '%s'",
				    excerpt(c, l, ex, sizeof ex));
		pk[k] = arena_strndup(p, c, l);
		if (pk[k] == NULL)
			return oom(p);
		k++;
		c += l;
		if (*c == '\0')
			break;
		c++;
	}
	pk[k] = NULL;
	f->packages = pk;
	f->npackages = k;
	return 0;
}

static int parse_cmd(parser *p, al_af_step *st, char *args, const char *kw)
{
	const char **argv;
	size_t argc;
	int r = parse_json_array(p, args, kw, &argv, &argc);
	if (r < 0)
		return -1;
	if (r == 1) {
		st->cmd.exec_form = 1;
		st->cmd.argv = argv;
		st->cmd.argc = argc;
		return 0;
	}
	argv = arena_alloc(p, 4 * sizeof *argv);
	if (argv == NULL)
		return oom(p);
	argv[0] = "/bin/sh";
	argv[1] = "-c";
	argv[2] = args;
	argv[3] = NULL;
	st->cmd.exec_form = 0;
	st->cmd.argv = argv;
	st->cmd.argc = 3;
	return 0;
}

/* Normalize a COPY source: relative, no "..", "." and empty components
 * dropped; "." for the whole context. */
static const char *copy_src(parser *p, const char *s)
{
	char ex[64];
	size_t l = strlen(s);
	if (l == 0) {
		perr(p, AL_EINVAL, "COPY: empty source path");
		return NULL;
	}
	if (l > AL_AF_PATH_MAX) {
		perr(p, AL_EINVAL, "COPY: source path longer than %d bytes",
		     AL_AF_PATH_MAX);
		return NULL;
	}
	if (has_ctl(s)) {
		perr(p, AL_EINVAL, "COPY: control character in a source path");
		return NULL;
	}
	if (s[0] == '/') {
		perr(p, AL_EINVAL,
		     "COPY: source '%s' must be relative to the build context",
		     excerpt(s, l, ex, sizeof ex));
		return NULL;
	}
	char *out = arena_alloc(p, l + 2);
	if (out == NULL) {
		oom(p);
		return NULL;
	}
	size_t o = 0;
	const char *c = s;
	while (*c != '\0') {
		size_t n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.') {
			perr(p, AL_EINVAL,
			     "COPY: source '%s' leaves the build context "
			     "('..' is not allowed)",
			     excerpt(s, l, ex, sizeof ex));
			return NULL;
		}
		if (n > 0 && !(n == 1 && c[0] == '.')) {
			if (o > 0)
				out[o++] = '/';
			memcpy(out + o, c, n);
			o += n;
		}
		c += n;
		if (*c == '/')
			c++;
	}
	if (o == 0)
		out[o++] = '.';
	out[o] = '\0';
	return out;
}

static int parse_copy(parser *p, al_af_step *st, char *args)
{
	char ex[64];
	st->copy.chmod = -1;
	while (args[0] == '-' && args[1] == '-') {
		size_t l = strcspn(args, " \t");
		if (l > 8 && strncmp(args, "--chmod=", 8) == 0) {
			if (st->copy.chmod >= 0)
				return perr(p, AL_EINVAL,
					    "COPY: --chmod given twice");
			long v = 0;
			size_t i = 8;
			for (; i < l && i < 8 + 5; i++) {
				if (args[i] < '0' || args[i] > '7')
					break;
				v = v * 8 + (args[i] - '0');
			}
			if (i != l || v > 07777)
				return perr(p, AL_EINVAL,
					    "COPY: --chmod takes octal bits "
					    "(at most 07777)");
			st->copy.chmod = (int)v;
		} else {
			return perr(p, AL_EINVAL,
				    "COPY: unsupported option '%s'",
				    excerpt(args, l, ex, sizeof ex));
		}
		args += l;
		while (is_blank(*args))
			args++;
	}
	const char **w;
	size_t n;
	int r = parse_json_array(p, args, "COPY", &w, &n);
	if (r < 0)
		return -1;
	if (r == 0) {
		w = (const char **)split_words(p, args, &n);
		if (w == NULL)
			return oom(p);
	}
	if (n < 2)
		return perr(p, AL_EINVAL,
			    "COPY needs a source and a destination");
	const char **src = arena_alloc(p, n * sizeof *src);
	if (src == NULL)
		return oom(p);
	for (size_t i = 0; i + 1 < n; i++) {
		src[i] = copy_src(p, w[i]);
		if (src[i] == NULL)
			return -1;
	}
	src[n - 1] = NULL;

	const char *d = w[n - 1];
	size_t dl = strlen(d);
	if (dl == 0 || dl > AL_AF_PATH_MAX)
		return perr(p, AL_EINVAL,
			    "COPY: destination must be 1 to %d bytes",
			    AL_AF_PATH_MAX);
	if (has_ctl(d))
		return perr(p, AL_EINVAL,
			    "COPY: control character in the destination");
	/* Docker's rule: a trailing '/' (or a final "." or "..") names a
	 * directory to copy into. */
	const char *last = strrchr(d, '/');
	last = last != NULL ? last + 1 : d;
	int is_dir = d[dl - 1] == '/' || strcmp(last, ".") == 0 ||
		     strcmp(last, "..") == 0;
	if (n > 2 && !is_dir)
		return perr(p, AL_EINVAL,
			    "COPY with several sources needs a destination "
			    "ending in '/'");
	char res[AL_AF_PATH_MAX + 2];
	if (path_resolve(p->workdir, d, res) < 0)
		return perr(p, AL_EINVAL, "COPY: destination too long");
	size_t rl = strlen(res);
	if (strcmp(res, "/") == 0)
		is_dir = 1;
	else if (is_dir)
		res[rl++] = '/';
	st->copy.src = src;
	st->copy.nsrc = n - 1;
	st->copy.dest = arena_strndup(p, res, rl);
	st->copy.dest_is_dir = is_dir;
	return st->copy.dest == NULL ? oom(p) : 0;
}

static int valid_env_key(const char *k, size_t n)
{
	if (n == 0 || !is_alpha_(k[0]))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!is_alpha_(k[i]) && !is_digit(k[i]))
			return 0;
	return 1;
}

static int env_add(parser *p, const char *k, size_t kl, const char *v,
		   size_t vl)
{
	al_airlockfile *af = p->af;
	if (af->nenv == AL_AF_MAX_ENV)
		return perr(p, AL_EINVAL, "more than %d ENV variables",
			    AL_AF_MAX_ENV);
	if (af->nenv == p->cap_env) {
		size_t cap = p->cap_env != 0 ? p->cap_env * 2 : 16;
		al_af_env *e = realloc(af->env, cap * sizeof *e);
		if (e == NULL)
			return oom(p);
		af->env = e;
		p->cap_env = cap;
	}
	const char *key = arena_strndup(p, k, kl);
	const char *val = arena_strndup(p, v, vl);
	if (key == NULL || val == NULL)
		return oom(p);
	af->env[af->nenv].key = key;
	af->env[af->nenv].value = val;
	af->nenv++;
	return 0;
}

/* ENV KEY=VALUE ...: a value is one word made of plain bytes, '\'-escaped
 * bytes, "double quoted" (with \" and \\) and 'single quoted' pieces. */
static int parse_env(parser *p, al_af_step *st, char *args)
{
	char ex[64];
	size_t first = p->af->nenv;
	size_t w0 = strcspn(args, " \t");
	if (memchr(args, '=', w0) == NULL) {
		/* Legacy form: ENV KEY the rest of the line. */
		if (!valid_env_key(args, w0))
			return perr(p, AL_EINVAL, "ENV: invalid name '%s'",
				    excerpt(args, w0, ex, sizeof ex));
		const char *v = args + w0;
		while (is_blank(*v))
			v++;
		if (*v == '\0')
			return perr(p, AL_EINVAL,
				    "ENV %s needs a value (ENV KEY=VALUE)",
				    excerpt(args, w0, ex, sizeof ex));
		if (env_add(p, args, w0, v, strlen(v)) < 0)
			return -1;
		goto done;
	}
	char *val = arena_alloc(p, strlen(args) + 1);
	if (val == NULL)
		return oom(p);
	const char *s = args;
	while (*s != '\0') {
		size_t kl = strcspn(s, "= \t");
		if (s[kl] != '=' || !valid_env_key(s, kl))
			return perr(p, AL_EINVAL,
				    "ENV: expected NAME=VALUE at '%s'",
				    excerpt(s, strcspn(s, " \t"), ex,
					    sizeof ex));
		const char *k = s;
		s += kl + 1;
		size_t vl = 0;
		while (*s != '\0' && !is_blank(*s)) {
			if (*s == '\\' && s[1] != '\0') {
				val[vl++] = s[1];
				s += 2;
			} else if (*s == '"') {
				s++;
				while (*s != '\0' && *s != '"') {
					if (*s == '\\' &&
					    (s[1] == '"' || s[1] == '\\'))
						s++;
					val[vl++] = *s++;
				}
				if (*s != '"')
					return perr(p, AL_EINVAL,
						    "ENV: unterminated quote");
				s++;
			} else if (*s == '\'') {
				s++;
				while (*s != '\0' && *s != '\'')
					val[vl++] = *s++;
				if (*s != '\'')
					return perr(p, AL_EINVAL,
						    "ENV: unterminated quote");
				s++;
			} else {
				val[vl++] = *s++;
			}
		}
		if (env_add(p, k, kl, val, vl) < 0)
			return -1;
		while (is_blank(*s))
			s++;
	}
done:
	/* af->env may still move: the pointer is fixed up at the end. */
	st->env = (const al_af_env *)(uintptr_t)first;
	st->env_n = p->af->nenv - first;
	return 0;
}

static int parse_workdir(parser *p, al_af_step *st, char *args)
{
	char res[AL_AF_PATH_MAX + 2];
	if (strlen(args) > AL_AF_PATH_MAX ||
	    path_resolve(p->workdir, args, res) < 0)
		return perr(p, AL_EINVAL, "WORKDIR: path too long");
	st->path = arena_strndup(p, res, strlen(res));
	if (st->path == NULL)
		return oom(p);
	p->workdir = st->path;
	return 0;
}

static int valid_user(const char *s, size_t n)
{
	if (n == 0 || n > 32 || s[0] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_alpha_(s[i]) && !is_digit(s[i]) && s[i] != '.' &&
		    s[i] != '-')
			return 0;
	return 1;
}

static int parse_user(parser *p, al_af_step *st, char *args)
{
	char ex[64];
	size_t l = strlen(args);
	if (strcspn(args, " \t") != l)
		return perr(p, AL_EINVAL, "USER takes one user[:group]");
	const char *colon = strchr(args, ':');
	size_t ul = colon != NULL ? (size_t)(colon - args) : l;
	if (!valid_user(args, ul) ||
	    (colon != NULL && !valid_user(colon + 1, strlen(colon + 1))))
		return perr(p, AL_EINVAL,
			    "USER: invalid user[:group] '%s' (names or ids "
			    "of at most 32 of [A-Za-z0-9_.-])",
			    excerpt(args, l, ex, sizeof ex));
	st->user_name = arena_strndup(p, args, ul);
	if (st->user_name == NULL)
		return oom(p);
	st->user_group = NULL;
	if (colon != NULL) {
		st->user_group = colon + 1;
	}
	p->user = st->user_name;
	p->group = st->user_group;
	return 0;
}

static const struct {
	const char *name;
	al_af_kind kind;
} keywords[] = {
	{"FROM", AL_AF_FROM},	    {"RUN", AL_AF_RUN},
	{"COPY", AL_AF_COPY},	    {"ENV", AL_AF_ENV},
	{"WORKDIR", AL_AF_WORKDIR}, {"USER", AL_AF_USER},
	{"START", AL_AF_START},	    {"READY", AL_AF_READY},
};

const char *al_airlockfile_kind_name(al_af_kind kind)
{
	for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
		if (keywords[i].kind == kind)
			return keywords[i].name;
	return "?";
}

static int kw_equal(const char *s, size_t n, const char *kw)
{
	if (strlen(kw) != n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		if (c != kw[i])
			return 0;
	}
	return 1;
}

/* One logical line, joined and trimmed (non-empty). */
static int instruction(parser *p, const char *line, size_t len)
{
	al_airlockfile *af = p->af;
	char ex[64];
	size_t kl = 0;
	while (kl < len && !is_blank(line[kl]))
		kl++;
	int kind = -1;
	for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
		if (kw_equal(line, kl, keywords[i].name))
			kind = (int)keywords[i].kind;
	if (kind < 0)
		return perr(p, AL_EINVAL, "unknown instruction '%s'",
			    excerpt(line, kl, ex, sizeof ex));
	const char *kw = keywords[0].name;
	for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
		if ((int)keywords[i].kind == kind)
			kw = keywords[i].name;
	if (af->nsteps == AL_AF_MAX_STEPS)
		return perr(p, AL_EINVAL, "more than %d instructions",
			    AL_AF_MAX_STEPS);
	if (af->nsteps == 0 && kind != AL_AF_FROM)
		return perr(p, AL_EINVAL,
			    "the first instruction must be FROM, not %s", kw);
	if (af->nsteps > 0 && kind == AL_AF_FROM)
		return perr(p, AL_EINVAL, "FROM may appear only once");
	for (size_t i = 0; i < af->nsteps; i++)
		if ((kind == AL_AF_START || kind == AL_AF_READY) &&
		    af->steps[i].kind == (al_af_kind)kind)
			return perr(p, AL_EINVAL,
				    "only one %s is allowed (the first is on "
				    "line %d)",
				    kw, af->steps[i].line);

	size_t a = kl;
	while (a < len && is_blank(line[a]))
		a++;
	if (a == len)
		return perr(p, AL_EINVAL, "%s needs arguments", kw);

	if (af->nsteps == p->cap_steps) {
		size_t cap = p->cap_steps != 0 ? p->cap_steps * 2 : 16;
		al_af_step *s = realloc(af->steps, cap * sizeof *s);
		if (s == NULL)
			return oom(p);
		af->steps = s;
		p->cap_steps = cap;
	}
	al_af_step *st = &af->steps[af->nsteps];
	memset(st, 0, sizeof *st);
	st->kind = (al_af_kind)kind;
	st->line = p->line;
	st->text = arena_strndup(p, line, len);
	char *args = arena_strndup(p, line + a, len - a);
	if (st->text == NULL || args == NULL)
		return oom(p);

	int r;
	switch (st->kind) {
	case AL_AF_FROM:
		r = parse_from(p, st, args);
		break;
	case AL_AF_RUN:
	case AL_AF_START:
	case AL_AF_READY:
		r = parse_cmd(p, st, args, kw);
		break;
	case AL_AF_COPY:
		r = parse_copy(p, st, args);
		break;
	case AL_AF_ENV:
		r = parse_env(p, st, args);
		break;
	case AL_AF_WORKDIR:
		r = parse_workdir(p, st, args);
		break;
	case AL_AF_USER:
		r = parse_user(p, st, args);
		break;
	default:
		r = perr(p, AL_EINTERNAL, "unhandled instruction");
		break;
	}
	if (r < 0)
		return -1;
	st->workdir = p->workdir;
	st->user = p->user;
	st->group = p->group;
	st->nenv = af->nenv;
	af->nsteps++;
	return 0;
}

/* Next physical line of buf from *pos, without its LF (and CR). */
static void next_line(const char *buf, size_t len, size_t *pos, const char **s,
		      size_t *n)
{
	const char *start = buf + *pos;
	const char *nl = memchr(start, '\n', len - *pos);
	size_t l = nl != NULL ? (size_t)(nl - start) : len - *pos;
	*pos += l + (nl != NULL ? 1 : 0);
	if (l > 0 && start[l - 1] == '\r')
		l--;
	*s = start;
	*n = l;
}

static int skippable(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && is_blank(s[i]))
		i++;
	return i == n || s[i] == '#';
}

void al_airlockfile_free(al_airlockfile *af)
{
	if (af == NULL)
		return;
	arena_free(af->arena_);
	free(af->steps);
	free(af->env);
	free(af);
}

al_airlockfile *al_airlockfile_parse(const char *buf, size_t len, int *err_line,
				     al_err *err)
{
	parser p = {0};
	p.err = err;
	p.workdir = "/";
	p.user = "root";
	if (err_line != NULL)
		*err_line = 0;
	if (len > AL_AF_MAX_BYTES) {
		al_err_set(err, AL_ETOOBIG, 0,
			   "Airlockfile is larger than %d bytes",
			   AL_AF_MAX_BYTES);
		return NULL;
	}
	if (buf == NULL)
		len = 0;
	p.af = calloc(1, sizeof *p.af);
	char *lb = malloc(AL_AF_MAX_LINE + 1);
	if (p.af == NULL || lb == NULL) {
		free(p.af);
		free(lb);
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		return NULL;
	}

	size_t pos = 0;
	int lineno = 0;
	int rc = 0;
	while (rc == 0 && pos < len) {
		const char *s;
		size_t n;
		next_line(buf, len, &pos, &s, &n);
		p.line = ++lineno;
		if (check_bytes(&p, s, n) < 0) {
			rc = -1;
			break;
		}
		if (skippable(s, n))
			continue;
		int first = lineno;
		size_t ll = 0;
		for (;;) {
			size_t e = n;
			while (e > 0 && is_blank(s[e - 1]))
				e--;
			int cont = e > 0 && s[e - 1] == '\\';
			size_t take = cont ? e - 1 : n;
			if (take > AL_AF_MAX_LINE - ll) {
				p.line = first;
				rc = perr(&p, AL_EINVAL,
					  "instruction longer than %d bytes",
					  AL_AF_MAX_LINE);
				break;
			}
			memcpy(lb + ll, s, take);
			ll += take;
			if (!cont)
				break;
			/* Comment and blank lines inside a continuation are
			 * dropped, as Docker does. */
			int more = 0;
			while (pos < len) {
				next_line(buf, len, &pos, &s, &n);
				p.line = ++lineno;
				if (check_bytes(&p, s, n) < 0) {
					rc = -1;
					break;
				}
				if (!skippable(s, n)) {
					more = 1;
					break;
				}
			}
			if (rc < 0 || !more)
				break;
		}
		if (rc < 0)
			break;
		size_t b = 0;
		while (b < ll && is_blank(lb[b]))
			b++;
		while (ll > b && is_blank(lb[ll - 1]))
			ll--;
		p.line = first;
		if (ll > b)
			rc = instruction(&p, lb + b, ll - b);
	}
	free(lb);
	if (rc == 0 && p.af->nsteps == 0) {
		p.line = 0;
		rc = perr(&p, AL_EINVAL,
			  "the Airlockfile has no instructions (it must "
			  "start with FROM)");
	}
	p.af->arena_ = p.arena;
	if (rc < 0) {
		if (err_line != NULL)
			*err_line = p.line;
		al_airlockfile_free(p.af);
		return NULL;
	}
	al_airlockfile *af = p.af;
	af->from = &af->steps[0].from;
	for (size_t i = 0; i < af->nsteps; i++) {
		al_af_step *st = &af->steps[i];
		if (st->kind == AL_AF_ENV)
			st->env = af->env + (uintptr_t)st->env;
		if (st->kind == AL_AF_START)
			af->start = st;
		if (st->kind == AL_AF_READY)
			af->ready = st;
	}
	return af;
}

char **al_airlockfile_envp(const al_airlockfile *af, size_t nenv, al_err *err)
{
	if (nenv > af->nenv)
		nenv = af->nenv;
	/* O(n^2) over at most AL_AF_MAX_ENV pairs. keep[i]: pair i is the
	 * first of its key; it takes the value of the last one. */
	size_t count = 0;
	size_t bytes = 0;
	size_t *last = calloc(nenv + 1, sizeof *last);
	if (last == NULL) {
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < nenv; i++) {
		size_t first = i;
		for (size_t j = 0; j < i; j++)
			if (strcmp(af->env[j].key, af->env[i].key) == 0) {
				first = j;
				break;
			}
		if (first == i) {
			last[i] = i + 1;
			count++;
		} else {
			last[first] = i + 1;
		}
	}
	for (size_t i = 0; i < nenv; i++)
		if (last[i] != 0)
			bytes += strlen(af->env[i].key) +
				 strlen(af->env[last[i] - 1].value) + 2;
	char **envp = malloc((count + 1) * sizeof *envp + bytes);
	if (envp == NULL) {
		free(last);
		al_err_set(err, AL_ENOMEM, 0, "out of memory");
		return NULL;
	}
	char *o = (char *)(envp + count + 1);
	size_t k = 0;
	for (size_t i = 0; i < nenv; i++) {
		if (last[i] == 0)
			continue;
		envp[k++] = o;
		size_t kl = strlen(af->env[i].key);
		const char *v = af->env[last[i] - 1].value;
		size_t vl = strlen(v);
		memcpy(o, af->env[i].key, kl);
		o[kl] = '=';
		memcpy(o + kl + 1, v, vl);
		o[kl + 1 + vl] = '\0';
		o += kl + vl + 2;
	}
	envp[k] = NULL;
	free(last);
	return envp;
}

/* --- cache keys --- */

/* Each field is "<length>:<bytes>", so no two different field lists
 * encode to the same byte string. */
static int key_field(EVP_MD_CTX *c, const char *s)
{
	if (s == NULL)
		return EVP_DigestUpdate(c, "-", 1) == 1 ? 0 : -1;
	char len[32];
	int n = snprintf(len, sizeof len, "%zu:", strlen(s));
	if (EVP_DigestUpdate(c, len, (size_t)n) != 1 ||
	    EVP_DigestUpdate(c, s, strlen(s)) != 1)
		return -1;
	return 0;
}

static int key_num(EVP_MD_CTX *c, long long v)
{
	char num[32];
	snprintf(num, sizeof num, "%lld", v);
	return key_field(c, num);
}

static int key_step(EVP_MD_CTX *c, const al_af_step *st)
{
	int r = key_field(c, al_airlockfile_kind_name(st->kind));
	switch (st->kind) {
	case AL_AF_FROM:
		r |= key_num(c, st->from.base);
		r |= key_field(c, st->from.template_name);
		r |= key_field(c, st->from.suite);
		r |= key_num(c, (long long)st->from.npackages);
		for (size_t i = 0; i < st->from.npackages; i++)
			r |= key_field(c, st->from.packages[i]);
		break;
	case AL_AF_RUN:
	case AL_AF_START:
	case AL_AF_READY:
		r |= key_num(c, st->cmd.exec_form);
		r |= key_num(c, (long long)st->cmd.argc);
		for (size_t i = 0; i < st->cmd.argc; i++)
			r |= key_field(c, st->cmd.argv[i]);
		break;
	case AL_AF_COPY:
		r |= key_num(c, st->copy.chmod);
		r |= key_field(c, st->copy.dest);
		r |= key_num(c, (long long)st->copy.nsrc);
		for (size_t i = 0; i < st->copy.nsrc; i++)
			r |= key_field(c, st->copy.src[i]);
		break;
	case AL_AF_ENV:
		r |= key_num(c, (long long)st->env_n);
		for (size_t i = 0; i < st->env_n; i++) {
			r |= key_field(c, st->env[i].key);
			r |= key_field(c, st->env[i].value);
		}
		break;
	case AL_AF_WORKDIR:
		r |= key_field(c, st->path);
		break;
	case AL_AF_USER:
		r |= key_field(c, st->user_name);
		r |= key_field(c, st->user_group);
		break;
	default:
		return -1;
	}
	return r;
}

int al_airlockfile_step_key(const char *parent_key, const al_af_step *step,
			    const char *extra_hash, char out[AL_AF_KEY_HEX],
			    al_err *err)
{
	if (step == NULL || out == NULL)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "step_key: missing argument");
	if ((parent_key != NULL && strnlen(parent_key, 1025) > 1024) ||
	    (extra_hash != NULL && strnlen(extra_hash, 1025) > 1024))
		return al_err_set(err, AL_EINVAL, 0,
				  "step_key: key longer than 1024 bytes");
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (c == NULL)
		return al_err_set(err, AL_ENOMEM, 0, "out of memory");
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int r = EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 ? 0 : -1;
	r |= key_field(c, "airlock-step-v1");
	r |= key_field(c, parent_key);
	r |= key_step(c, step);
	r |= key_field(c, extra_hash);
	if (r == 0 && EVP_DigestFinal_ex(c, md, &mdlen) != 1)
		r = -1;
	EVP_MD_CTX_free(c);
	if (r != 0 || mdlen != 32)
		return al_err_set(err, AL_EINTERNAL, 0,
				  "step_key: sha256 failed");
	static const char hex[] = "0123456789abcdef";
	for (unsigned int i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
	return 0;
}
