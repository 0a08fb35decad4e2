/* netspec: a sandbox's network setting, the "network" object of the API,
 * of the shim's spec and of the gateway's config:
 *
 *   {"mode":"none"|"allowlist"|"open","allow":["pypi.org","*.x.com"],
 *    "deny":[...]}
 *
 * One parser and one encoder for it, used by fcgi (request bodies), the
 * sandbox spec and the frames of core/agentproto, so every hop checks it
 * the same way. Patterns follow al_dnsname_match (core/policy/policy.h):
 * "name", "*.name" or "*"; they are kept canonical (ASCII lowercase, no
 * trailing dot).
 *
 * The payloads of the network frames of core/agentproto (AL_F_NETWORK,
 * AL_F_GW_CONFIG, AL_F_GW_ACK) are packed and unpacked here, not in
 * agentproto.c: that file is linked into the static guest agent, which
 * has no business with host-only checks (al_id_valid, patterns). */
#ifndef AL_NETSPEC_H
#define AL_NETSPEC_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "base/err.h"
#include "policy/policy.h"

/* Entries per list: the policy's own bound (AL_POLICY_LIST_MAX). */
#define AL_NETSPEC_LIST_MAX 256
/* "*." and a 253-byte name, with the NUL. */
#define AL_NETSPEC_PATTERN_MAX 256

typedef struct al_netspec {
	enum al_net_mode mode;
	/* n_allow / n_deny canonical patterns, each array NULL-terminated
	 * (so it passes as al_egress_req's const char *const *); owned,
	 * freed by al_netspec_free. NULL when empty. */
	char **allow;
	size_t n_allow;
	char **deny;
	size_t n_deny;
} al_netspec;

/* The default of a sandbox that names no network: allowlist with empty
 * lists, which lets nothing out until an allow list (or a PUT) says so. */
void al_netspec_default(al_netspec *out);
void al_netspec_free(al_netspec *ns);
/* A deep copy into out (freed with al_netspec_free). */
int al_netspec_copy(const al_netspec *in, al_netspec *out, al_err *err);

/* The canonical form of one pattern into out (AL_NETSPEC_PATTERN_MAX
 * bytes): -1 (AL_EINVAL, saying what is wrong, not echoing it) unless it
 * is "*", "*.<name>" or "<name>" with name a DNS name (labels of 1-63
 * bytes of a-z 0-9 - _, 253 bytes at most, one trailing dot allowed,
 * ASCII only: IDNs in punycode). */
int al_netspec_pattern_canon(const char *in, size_t len,
			     char out[AL_NETSPEC_PATTERN_MAX], al_err *err);

/* Parse the object o (members mode, allow, deny only). require_mode:
 * "mode" must be there; otherwise it defaults to allowlist. Absent lists
 * are empty. -1 (AL_EINVAL) with a message naming the field and, for a
 * list, the index ("network.allow[3]: ..."); what names the object in
 * messages ("network"). */
int al_netspec_from_json(json_object *o, const char *what, bool require_mode,
			 al_netspec *out, al_err *err);
/* The object for ns (a new reference; NULL on OOM). */
json_object *al_netspec_to_json(const al_netspec *ns);

/* ---- AL_F_NETWORK: fcgi -> shim, replace the sandbox's network ----
 *   {"network":{NETSPEC}}
 * -> RESULT al_net_result_pack() or ERROR. */
char *al_net_update_pack(const al_netspec *ns, al_err *err);
/* AL_EINVAL for anything al_netspec_from_json refuses (mode required). */
int al_net_update_unpack(const void *payload, size_t len, al_netspec *out,
			 al_err *err);
/* Its RESULT: {"gateway":bool}: true when a running gateway acknowledged
 * the new setting (GW_ACK ok), false when none runs (mode none, or the
 * sandbox has no gateway): the setting is then only recorded. */
char *al_net_result_pack(bool gateway, al_err *err);
int al_net_result_unpack(const void *payload, size_t len, bool *gateway,
			 al_err *err);

/* ---- AL_F_GW_CONFIG: shim -> gateway (fd 6) ----
 *   {"sandbox":"<id>","template":"<name>","project":"<id>",
 *    "metadata":{"k":"v"},"build":bool,"gateway":"10.200.x.1",
 *    "network":{NETSPEC}}
 * The first frame on the control fd, and again whenever the network
 * changes: every one is complete; a later one must name the same sandbox,
 * template, project and build (the gateway answers ok false otherwise)
 * and replaces metadata and network from the next request on. */
#define AL_GW_META_MAX 64      /* entries (al_json_metadata_limits) */
#define AL_GW_META_KEY_MAX 128 /* bytes */
#define AL_GW_META_VALUE_MAX 1024
typedef struct al_gw_config {
	char sandbox[64];	/* al_id_valid */
	char template_name[64]; /* al_id_valid */
	char project[64];	/* al_id_valid */
	/* n_metadata pairs of NUL-free strings; unpack points them into
	 * root, pack only reads them. */
	al_policy_kv *metadata;
	size_t n_metadata;
	bool build;	  /* the egress of a template build */
	char gateway[16]; /* dotted IPv4: the gateway's address in the slot */
	al_netspec network;
	json_object *root; /* unpack: owns the metadata strings */
} al_gw_config;
char *al_gw_config_pack(const al_gw_config *c, al_err *err);
/* AL_EINVAL naming the field for anything out of the bounds above. */
int al_gw_config_unpack(const void *payload, size_t len, al_gw_config *out,
			al_err *err);
void al_gw_config_free(al_gw_config *c);

/* ---- AL_F_GW_ACK: gateway -> shim, one per GW_CONFIG, same id ----
 *   {"ok":true} or {"ok":false,"error":"why (printable, < 256 bytes)"} */
#define AL_GW_ACK_ERROR_MAX 256
typedef struct al_gw_ack {
	bool ok;
	char error[AL_GW_ACK_ERROR_MAX]; /* "" when ok */
} al_gw_ack;
/* error NULL or "" with ok; any bytes are made printable and cut. */
char *al_gw_ack_pack(bool ok, const char *error, al_err *err);
int al_gw_ack_unpack(const void *payload, size_t len, al_gw_ack *out,
		     al_err *err);

#endif
