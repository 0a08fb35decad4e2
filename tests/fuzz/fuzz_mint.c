/* Fuzz the mint service's wire messages (controller/mint.c reads
 * requests from gateways, which run hostile guests' traffic; gateways
 * read responses). First byte: 0 = request, else response. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ca/ca.h"
#include "ca/mint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	if (data[0] == 0) {
		al_mint_req req;
		(void)al_mint_req_need(p, n);
		if (al_mint_req_unpack(p, n, &req, NULL) == 0) {
			/* What passes is a mintable name and a point on
			 * P-256, the request is complete, and it ends with
			 * the point. */
			if (al_ca_name_check(req.name, NULL) != 0 ||
			    al_ca_point_check(req.point, sizeof req.point,
					      NULL) != 0 ||
			    al_mint_req_need(p, n) != 0 ||
			    n != 4 + 1 + strlen(req.name) + 2 +
					    AL_MINT_SPKI_LEN ||
			    memcmp(p + n - sizeof req.point, req.point,
				   sizeof req.point) != 0)
				abort();
		}
	} else {
		X509 *x = NULL;
		al_err err = {0};
		if (al_mint_resp_unpack(p, n, &x, &err) == 0) {
			if (x == NULL)
				abort();
			X509_free(x);
		} else if (x != NULL || err.code == AL_OK) {
			abort();
		}
	}
	return 0;
}
