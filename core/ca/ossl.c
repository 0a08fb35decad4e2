/* See ossl.h. */
#include "ca/ossl.h"

#include <openssl/err.h>

int al_gw_ossl_err(al_err *err, al_code code, const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();
	ERR_error_string_n(e, buf, sizeof buf);
	ERR_clear_error();
	return al_err_set(err, code, 0, "%s: %s", what,
			  e != 0 ? buf : "failed");
}
