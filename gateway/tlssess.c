/* tlssess: upstream TLS sessions kept per name, so that a new connection
 * to an upstream the gateway reached before resumes instead of paying a
 * full handshake (the server's chain parsed and verified again): each
 * guest connection gets an upstream connection of its own, so this is
 * much of what a new connection costs the gateway.
 *
 * A session is only ever offered to the name it was made with (the key
 * is the SNI gw/tls set for the name dialled), whose certificate was
 * verified when it was made. At most GW_TLSSESS_MAX names; the least
 * recently used gives way. Single-threaded. */
#include "tlssess.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <string.h>

#include "gw/http.h"

#define GW_TLSSESS_MAX 64

static struct {
	char name[AL_HTTP_HOST_MAX];
	SSL_SESSION *sess;
	unsigned long used;
} slots[GW_TLSSESS_MAX];
static unsigned long uses;

static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
	const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	if (name == NULL || strlen(name) >= AL_HTTP_HOST_MAX ||
	    !SSL_SESSION_is_resumable(sess))
		return 0;
	size_t pick = 0;
	for (size_t i = 0; i < GW_TLSSESS_MAX; i++) {
		if (slots[i].sess != NULL && strcmp(slots[i].name, name) == 0) {
			pick = i;
			break;
		}
		if (slots[i].used < slots[pick].used)
			pick = i;
	}
	if (slots[pick].sess != NULL)
		SSL_SESSION_free(slots[pick].sess);
	strcpy(slots[pick].name, name);
	slots[pick].sess = sess;
	slots[pick].used = ++uses;
	return 1; /* the reference is ours now */
}

void gw_tlssess_init(SSL_CTX *ctx)
{
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
						    SSL_SESS_CACHE_NO_INTERNAL);
	SSL_CTX_sess_set_new_cb(ctx, on_new_session);
}

void gw_tlssess_offer(SSL *ssl, const char *name)
{
	for (size_t i = 0; i < GW_TLSSESS_MAX; i++)
		if (slots[i].sess != NULL && strcmp(slots[i].name, name) == 0) {
			SSL_set_session(ssl, slots[i].sess);
			slots[i].used = ++uses;
			return;
		}
}

void gw_tlssess_keep(SSL *ssl)
{
	if (ssl != NULL)
		SSL_set_shutdown(ssl,
				 SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
}

void gw_tlssess_release(struct bufferevent *bev)
{
	if (bev == NULL)
		return;
	gw_tlssess_keep(bufferevent_openssl_get_ssl(bev));
	bufferevent_free(bev);
}
