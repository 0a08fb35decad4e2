/* api_credentials: the credential store and its audit log.
 *   POST   /v1/credentials              create (body: credential.h)
 *   GET    /v1/credentials[?project=]   list (never a value)
 *   GET    /v1/credentials/{id|name}    one
 *   PUT    /v1/credentials/{id|name}    rotate: {"value"[,"inject"]
 *                                       [,"rate_limit"]}
 *   DELETE /v1/credentials/{id|name}
 *   GET    /v1/audit?credential=&sandbox=&since=&limit=&before=
 * A member key manages its project's credentials and sees the global
 * ones; an admin key also creates ("scope":{"global":true}) and changes
 * global ones, and any project's ("project":"p" at create, ?project=
 * for names and lists). Management and refused accesses are audited. */
#ifndef AL_FCGI_API_CREDENTIALS_H
#define AL_FCGI_API_CREDENTIALS_H

#include "http.h"

void fcgi_api_credential_create(al_req *r);
void fcgi_api_credential_list(al_req *r);
void fcgi_api_credential_get(al_req *r);
void fcgi_api_credential_rotate(al_req *r);
void fcgi_api_credential_delete(al_req *r);
void fcgi_api_audit(al_req *r);

#endif
