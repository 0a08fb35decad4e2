/* api_templates: template listing, build, inspection and deletion. */
#ifndef AL_FCGI_API_TEMPLATES_H
#define AL_FCGI_API_TEMPLATES_H

#include "http.h"

void al_api_templates(al_req *r);
void al_api_template_build(al_req *r);
void al_api_template_get(al_req *r);
void al_api_template_delete(al_req *r);
void al_api_template_pool(al_req *r);
void al_api_build_get(al_req *r);
void al_api_build_logs(al_req *r);

#endif
