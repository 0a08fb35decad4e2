#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int status;
} code_table[AL_CODE_MAX] = {
	[AL_OK] = {"ok", 200},
	[AL_EINVAL] = {"invalid_request", 400},
	[AL_EAUTH] = {"unauthorized", 401},
	[AL_EPERM] = {"forbidden", 403},
	[AL_ENOENT] = {"not_found", 404},
	[AL_ESTATE] = {"conflict", 409},
	[AL_EEXIST] = {"already_exists", 409},
	[AL_ETOOBIG] = {"too_large", 413},
	[AL_EPATH] = {"invalid_path", 422},
	[AL_ETIMEDOUT] = {"timeout", 504},
	[AL_EPROTO] = {"bad_gateway", 502},
	[AL_EUNAVAIL] = {"unavailable", 503},
	[AL_ENOSPACE] = {"insufficient_storage", 507},
	[AL_ENOMEM] = {"out_of_memory", 500},
	[AL_ESYS] = {"system_error", 500},
	[AL_EDB] = {"database_error", 500},
	[AL_EINTERNAL] = {"internal", 500},
	[AL_EQUOTA] = {"quota_exceeded", 429},
	[AL_EDISABLED] = {"disabled", 422},
	[AL_ENOTSUP] = {"not_supported", 422},
	[AL_EMEMORY] = {"memory_not_supported", 422},
};

static void err_vset(al_err *err, al_code code, int sys_errno,
		     int with_strerror, const char *fmt, va_list ap)
{
	if (err == NULL)
		return;
	err->code = code;
	err->sys_errno = sys_errno;
	int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	if (with_strerror && n >= 0 && (size_t)n < sizeof err->msg)
		snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s",
			 strerror(sys_errno));
}

int al_err_set(al_err *err, al_code code, int sys_errno, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(err, code, sys_errno, 0, fmt, ap);
	va_end(ap);
	return -1;
}

int al_err_sys(al_err *err, al_code code, int sys_errno, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(err, code, sys_errno, 1, fmt, ap);
	va_end(ap);
	return -1;
}

void al_err_wrap(al_err *err, const char *fmt, ...)
{
	if (err == NULL)
		return;
	char old[sizeof err->msg];
	memcpy(old, err->msg, sizeof old);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof err->msg - 2)
		return;
	/* Truncation of the old message is fine: the prefix matters most. */
	size_t room = sizeof err->msg - (size_t)n;
	err->msg[n] = ':';
	err->msg[n + 1] = ' ';
	size_t oldlen = strnlen(old, sizeof old);
	if (oldlen > room - 3)
		oldlen = room - 3;
	memcpy(err->msg + n + 2, old, oldlen);
	err->msg[(size_t)n + 2 + oldlen] = '\0';
}

void al_err_clear(al_err *err)
{
	if (err == NULL)
		return;
	err->code = AL_OK;
	err->sys_errno = 0;
	err->msg[0] = '\0';
}

const char *al_code_name(al_code code)
{
	if ((unsigned)code >= AL_CODE_MAX)
		return "internal";
	return code_table[code].name;
}

int al_code_http_status(al_code code)
{
	if ((unsigned)code >= AL_CODE_MAX)
		return 500;
	return code_table[code].status;
}

al_code al_code_from_name(const char *name)
{
	if (name == NULL)
		return AL_EINTERNAL;
	for (int c = 0; c < AL_CODE_MAX; c++)
		if (strcmp(code_table[c].name, name) == 0)
			return (al_code)c;
	return AL_EINTERNAL;
}
