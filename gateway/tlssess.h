/* tlssess: the upstream TLS sessions of this gateway, one per name (see
 * tlssess.c). */
#ifndef AL_GATEWAY_TLSSESS_H
#define AL_GATEWAY_TLSSESS_H

#include <openssl/ssl.h>

struct bufferevent;

/* Keep the sessions upstream servers give on ctx's connections. */
void gw_tlssess_init(SSL_CTX *ctx);
/* Before a connection to name: offer its last session, if any. */
void gw_tlssess_offer(SSL *ssl, const char *name);
/* Before an upstream connection that was up is freed: its session stays
 * resumable (OpenSSL drops the session of a connection freed without a
 * shutdown). */
void gw_tlssess_keep(SSL *ssl);
/* Free an upstream connection (TLS or plain), its session kept. */
void gw_tlssess_release(struct bufferevent *bev);

#endif
