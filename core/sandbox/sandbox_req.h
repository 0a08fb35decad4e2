/* sandbox_req: the bodies of POST /v1/sandboxes and POST
 * /v1/sandboxes/{id}/exec, parsed strictly (core/json) into the requests
 * the sandbox operations take. Error messages name the field, never its
 * value: these bodies carry environment values. */
#ifndef AL_SANDBOX_REQ_H
#define AL_SANDBOX_REQ_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "base/err.h"

/* POST /v1/sandboxes body. */
typedef struct al_create_req {
	json_object *root;	   /* owns everything below */
	const char *template_name; /* default "minimal" */
	const char *driver;	   /* "ns" or "vm"; NULL = host default */
	const char *project;	   /* a project name; NULL = the key's */
	uint32_t timeout_s;
	json_object *env;      /* object of strings (borrowed from root) */
	json_object *metadata; /* object of strings (borrowed from root) */
	uint64_t memory_mb;    /* 0 = template default */
	uint32_t pids;	       /* 0 = template default */
	uint32_t cpu_shares;   /* 0 = template default */
	uint32_t cpu_millis;   /* "cpus" in thousandths; 0 = the operator's
				* default (AIRLOCK_DEFAULT_CPUS) */
	uint32_t disk_mb;      /* 0 = template default; the operator's
				* maximum is checked by the caller */
	/* The canonical network object (al_netspec_to_json): the request's
	 * "network", or the default (allowlist, empty lists). Owned. */
	json_object *network;
	/* "snapshot": the snapshot (core/model/snapshot.h) the sandbox
	 * starts from instead of a template; NULL for none. Its template
	 * and driver are the snapshot's. */
	const char *snapshot;
	int on_timeout_suspend; /* "on_timeout": "suspend" (else delete) */
	int auto_resume;	/* "auto_resume": true */
	char snapshot_template[64], snapshot_driver[16]; /* set by the op */
} al_create_req;

/* Parse and validate; timeout defaults to default_timeout_s and must be in
 * 1..max_timeout_s. */
int al_create_req_parse(const char *buf, size_t len, uint32_t default_timeout_s,
			uint32_t max_timeout_s, al_create_req *out,
			al_err *err);
void al_create_req_free(al_create_req *req);

/* POST /v1/sandboxes/{id}/exec body. */
#define AL_EXEC_TIMEOUT_DEFAULT 60
#define AL_EXEC_TIMEOUT_MAX 86400
typedef struct al_exec_req {
	json_object *root;
	json_object *cmd;	/* array of strings, >= 1 (borrowed) */
	json_object *env;	/* object of strings or NULL (borrowed) */
	char cwd[4097];		/* normalised absolute path; "" when absent
				* (the template's WORKDIR applies) */
	const char *user;	/* "name[:group]" or NULL (template's USER) */
	const char *stdin_data; /* NULL when no stdin was given */
	size_t stdin_len;	/* may contain NUL bytes */
	uint32_t timeout_s;
	int background;	  /* a streamed process outlives its stream */
	int kill_on_exit; /* its descendants end with it (agentproto.h) */
} al_exec_req;

/* Parse and validate; AL_EPATH for a bad cwd. */
int al_exec_req_parse(const char *buf, size_t len, al_exec_req *out,
		      al_err *err);
void al_exec_req_free(al_exec_req *req);

#endif
