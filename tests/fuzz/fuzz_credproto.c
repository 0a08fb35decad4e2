/* Fuzz the credential channel's payloads (core/credproto): the
 * controller parses what gateways and shims send (HELLO, SET_ACK, TAKE,
 * USE, REFRESH), a gateway what arrives on fd 7 (SET, GRANT) and fd 6
 * (GW_CREDCHAN). First byte: which message; the rest is the payload.
 * What unpacks must pack again and unpack to the same thing. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cred/credproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void set_roundtrip(const al_cred_set *s)
{
	al_cred_set again;
	char *t = al_cred_set_pack(s, NULL);
	if (t == NULL || al_cred_set_unpack(t, strlen(t), &again, NULL) < 0 ||
	    again.n != s->n || again.version != s->version)
		abort();
	for (size_t i = 0; i < s->n; i++) {
		const al_cred *a = &s->creds[i], *b = &again.creds[i];
		if (strcmp(a->name, b->name) != 0 ||
		    a->value_len != b->value_len ||
		    memcmp(a->value, b->value, a->value_len) != 0 ||
		    a->nhosts != b->nhosts ||
		    strcmp(a->header, b->header) != 0 ||
		    a->rate_requests != b->rate_requests ||
		    a->scope != b->scope || al_cred_set_find(s, a->name) != a)
			abort();
	}
	free(t);
	al_cred_set_free(&again);
}

static void use_roundtrip(const al_cred_use *u)
{
	al_cred_use again;
	char *t = al_cred_use_pack(u, NULL);
	if (t == NULL || al_cred_use_unpack(t, strlen(t), &again, NULL) < 0 ||
	    memcmp(u, &again, sizeof again) != 0)
		abort();
	free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *p = (const char *)data + 1;
	size_t n = size - 1;
	al_err err;
	switch (data[0] % 9) {
	case 0: {
		al_cred_set s;
		if (al_cred_set_unpack(p, n, &s, &err) == 0) {
			set_roundtrip(&s);
			al_cred_set_free(&s);
		}
		break;
	}
	case 1: {
		char sb[64];
		if (al_cred_hello_unpack(p, n, sb, &err) == 0 &&
		    (sb[0] == '\0' || strlen(sb) > 63))
			abort();
		break;
	}
	case 2: {
		uint64_t v;
		(void)al_cred_set_ack_unpack(p, n, &v, &err);
		break;
	}
	case 3: {
		al_cred_take t;
		if (al_cred_take_unpack(p, n, &t, &err) == 0 &&
		    !al_cred_id_valid(t.id))
			abort();
		break;
	}
	case 4: {
		al_cred_grant g;
		if (al_cred_grant_unpack(p, n, &g, &err) == 0 && g.ok &&
		    g.retry_after != 0)
			abort();
		break;
	}
	case 5: {
		al_cred_use u;
		memset(&u, 0, sizeof u);
		if (al_cred_use_unpack(p, n, &u, &err) == 0)
			use_roundtrip(&u);
		break;
	}
	case 6: {
		char project[64];
		(void)al_cred_refresh_unpack(p, n, project, &err);
		break;
	}
	case 7: {
		al_cred_refresh_done d;
		if (al_cred_refresh_done_unpack(p, n, &d, &err) == 0 &&
		    d.acked > d.pushed)
			abort();
		break;
	}
	default: {
		bool ok;
		(void)al_gw_credchan_unpack(p, n, &ok, &err);
		(void)al_gw_credchan_req_unpack(p, n, &err);
		break;
	}
	}
	return 0;
}
