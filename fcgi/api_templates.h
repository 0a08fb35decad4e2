/* api_templates: template listing, build, inspection and deletion. */
#ifndef AL_FCGI_API_TEMPLATES_H
#define AL_FCGI_API_TEMPLATES_H

#include "http.h"

void fcgi_api_templates(al_req *r);
void fcgi_api_template_build(al_req *r);
void fcgi_api_template_get(al_req *r);
void fcgi_api_template_delete(al_req *r);
void fcgi_api_template_pool(al_req *r);
void fcgi_api_build_get(al_req *r);
void fcgi_api_build_logs(al_req *r);

#endif
