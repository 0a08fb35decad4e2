/* api_projects: projects, their keys and quotas (admin keys only):
 *   GET  /v1/projects, POST /v1/projects {"name"}, GET /v1/projects/{name}
 *   PUT  /v1/projects/{name}/quota {quota fields}
 *   GET  /v1/keys, POST /v1/keys {"project","role","name"},
 *   DELETE /v1/keys/{id} */
#ifndef AL_FCGI_API_PROJECTS_H
#define AL_FCGI_API_PROJECTS_H

#include "http.h"

void fcgi_api_projects(al_req *r);
void fcgi_api_project_create(al_req *r);
void fcgi_api_project_get(al_req *r);
void fcgi_api_project_quota(al_req *r);
void fcgi_api_keys(al_req *r);
void fcgi_api_key_create(al_req *r);
void fcgi_api_key_delete(al_req *r);

#endif
