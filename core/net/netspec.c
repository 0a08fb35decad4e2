/* netspec: the network object's parser and encoder (see netspec.h). */
#include "net/netspec.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/dnsname.h"
#include "base/json.h"

void al_netspec_default(al_netspec *out)
{
	memset(out, 0, sizeof *out);
	out->mode = AL_NET_ALLOWLIST;
}

static void list_free(char **l)
{
	for (size_t i = 0; l != NULL && l[i] != NULL; i++)
		free(l[i]);
	free(l);
}

void al_netspec_free(al_netspec *ns)
{
	list_free(ns->allow);
	list_free(ns->deny);
	al_netspec_default(ns);
}

static char **list_dup(char *const *in, size_t n)
{
	if (n == 0)
		return NULL;
	char **l = calloc(n + 1, sizeof *l);
	for (size_t i = 0; l != NULL && i < n; i++) {
		l[i] = strdup(in[i]);
		if (l[i] == NULL) {
			list_free(l);
			return NULL;
		}
	}
	return l;
}

int al_netspec_copy(const al_netspec *in, al_netspec *out, al_err *err)
{
	al_netspec_default(out);
	out->mode = in->mode;
	out->allow = list_dup(in->allow, in->n_allow);
	out->deny = list_dup(in->deny, in->n_deny);
	if ((in->n_allow > 0 && out->allow == NULL) ||
	    (in->n_deny > 0 && out->deny == NULL)) {
		al_netspec_free(out);
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	}
	out->n_allow = in->n_allow;
	out->n_deny = in->n_deny;
	return 0;
}

int al_netspec_pattern_canon(const char *in, size_t len,
			     char out[AL_NETSPEC_PATTERN_MAX], al_err *err)
{
	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0)
		return al_err_set(err, AL_EINVAL, 0, "empty name pattern");
	if (len >= AL_NETSPEC_PATTERN_MAX)
		return al_err_set(err, AL_EINVAL, 0,
				  "name pattern longer than 253 bytes");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c >= 0x80)
			return al_err_set(err, AL_EINVAL, 0,
					  "name pattern is not ASCII (write"
					  " international names in punycode,"
					  " xn--...)");
		out[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	}
	out[len] = '\0';
	if (len == 1 && out[0] == '*')
		return 0;
	size_t body = len >= 2 && out[0] == '*' && out[1] == '.' ? 2 : 0;
	if (!al_dnsname_valid(out + body, len - body))
		return al_err_set(err, AL_EINVAL, 0,
				  "name pattern must be \"name\", \"*.name\""
				  " or \"*\" (labels of 1-63 of a-z 0-9 - _,"
				  " 253 bytes at most)");
	return 0;
}

static int list_from(json_object *o, const char *key, const char *what,
		     char ***out, size_t *n_out, al_err *err)
{
	json_object *a = NULL;
	*out = NULL;
	*n_out = 0;
	if (!json_object_object_get_ex(o, key, &a) || a == NULL)
		return 0;
	if (!json_object_is_type(a, json_type_array))
		return al_err_set(err, AL_EINVAL, 0,
				  "%s.%s must be an array of name patterns",
				  what, key);
	size_t n = json_object_array_length(a);
	if (n > AL_NETSPEC_LIST_MAX)
		return al_err_set(err, AL_EINVAL, 0,
				  "%s.%s has more than %d entries", what, key,
				  AL_NETSPEC_LIST_MAX);
	if (n == 0)
		return 0;
	char **l = calloc(n + 1, sizeof *l);
	if (l == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_object *v = json_object_array_get_idx(a, i);
		char canon[AL_NETSPEC_PATTERN_MAX];
		al_err e = {0};
		if (!json_object_is_type(v, json_type_string)) {
			al_err_set(err, AL_EINVAL, 0,
				   "%s.%s[%zu] must be a string", what, key, i);
			goto fail;
		}
		const char *s = json_object_get_string(v);
		size_t len = (size_t)json_object_get_string_len(v);
		if (memchr(s, '\0', len) != NULL ||
		    al_netspec_pattern_canon(s, len, canon, &e) < 0) {
			al_err_set(err, AL_EINVAL, 0, "%s.%s[%zu]: %s", what,
				   key, i,
				   e.code != AL_OK ? e.msg
						   : "contains a NUL byte");
			goto fail;
		}
		l[i] = strdup(canon);
		if (l[i] == NULL) {
			al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
			goto fail;
		}
	}
	*out = l;
	*n_out = n;
	return 0;
fail:
	list_free(l);
	return -1;
}

int al_netspec_from_json(json_object *o, const char *what, bool require_mode,
			 al_netspec *out, al_err *err)
{
	al_netspec_default(out);
	if (!json_object_is_type(o, json_type_object))
		return al_err_set(err, AL_EINVAL, 0,
				  "%s must be an object {\"mode\",\"allow\","
				  "\"deny\"}",
				  what);
	json_object_object_foreach(o, k, v)
	{
		(void)v;
		if (strcmp(k, "mode") != 0 && strcmp(k, "allow") != 0 &&
		    strcmp(k, "deny") != 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "%s has an unknown member (allowed:"
					  " mode, allow, deny)",
					  what);
	}
	json_object *m = NULL;
	if (json_object_object_get_ex(o, "mode", &m) && m != NULL) {
		int mode = json_object_is_type(m, json_type_string)
				   ? al_net_mode_from_name(
					     json_object_get_string(m))
				   : -1;
		if (mode < 0)
			return al_err_set(err, AL_EINVAL, 0,
					  "%s.mode must be \"none\","
					  " \"allowlist\" or \"open\"",
					  what);
		out->mode = (enum al_net_mode)mode;
	} else if (require_mode) {
		return al_err_set(err, AL_EINVAL, 0, "%s.mode is required",
				  what);
	}
	if (list_from(o, "allow", what, &out->allow, &out->n_allow, err) < 0 ||
	    list_from(o, "deny", what, &out->deny, &out->n_deny, err) < 0) {
		al_netspec_free(out);
		return -1;
	}
	return 0;
}

static json_object *list_to(char *const *l, size_t n)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; a != NULL && i < n; i++)
		if (json_object_array_add(a, json_object_new_string(l[i])) <
		    0) {
			json_object_put(a);
			return NULL;
		}
	return a;
}

json_object *al_netspec_to_json(const al_netspec *ns)
{
	json_object *o = json_object_new_object();
	json_object *allow = list_to(ns->allow, ns->n_allow);
	json_object *deny = list_to(ns->deny, ns->n_deny);
	json_object *mode = json_object_new_string(al_net_mode_name(ns->mode));
	if (o == NULL || allow == NULL || deny == NULL || mode == NULL) {
		json_object_put(o);
		json_object_put(allow);
		json_object_put(deny);
		json_object_put(mode);
		return NULL;
	}
	json_object_object_add(o, "mode", mode);
	json_object_object_add(o, "allow", allow);
	json_object_object_add(o, "deny", deny);
	return o;
}

/* ---- frame payloads ---- */

/* The object o with its member "network" as ns (o consumed). */
static char *pack_with_network(json_object *o, const al_netspec *ns,
			       al_err *err)
{
	json_object *n = al_netspec_to_json(ns);
	if (o == NULL || n == NULL) {
		json_object_put(o);
		json_object_put(n);
		return al_json_pack(NULL, err);
	}
	json_object_object_add(o, "network", n);
	return al_json_pack(o, err);
}

char *al_net_update_pack(const al_netspec *ns, al_err *err)
{
	return pack_with_network(json_object_new_object(), ns, err);
}

int al_net_update_unpack(const void *payload, size_t len, al_netspec *out,
			 al_err *err)
{
	static const char *const fields[] = {"network", NULL};
	al_netspec_default(out);
	json_object *o = al_json_parse_object(payload, len, err);
	if (o == NULL)
		return -1;
	json_object *n = NULL;
	int r = -1;
	if (al_json_check_fields(o, fields, err) == 0) {
		if (!json_object_object_get_ex(o, "network", &n) || n == NULL)
			al_err_set(err, AL_EINVAL, 0, "network is required");
		else
			r = al_netspec_from_json(n, "network", true, out, err);
	}
	json_object_put(o);
	return r;
}

char *al_net_result_pack(bool gateway, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o != NULL)
		json_object_object_add(o, "gateway",
				       json_object_new_boolean(gateway));
	return al_json_pack(o, err);
}

int al_net_result_unpack(const void *payload, size_t len, bool *gateway,
			 al_err *err)
{
	static const char *const fields[] = {"gateway", NULL};
	json_object *o = al_json_parse_object(payload, len, err);
	int b = 0;
	int r = o == NULL ? -1 : al_json_check_fields(o, fields, err);
	if (r == 0 && al_json_get_bool(o, "gateway", &b, err) != 1)
		r = err->code != AL_OK ? -1
				       : al_err_set(err, AL_EINVAL, 0,
						    "gateway is required");
	json_object_put(o);
	if (r == 0)
		*gateway = b != 0;
	return r;
}

char *al_gw_config_pack(const al_gw_config *c, al_err *err)
{
	json_object *o = json_object_new_object();
	json_object *m = json_object_new_object();
	if (o == NULL || m == NULL) {
		json_object_put(o);
		json_object_put(m);
		return al_json_pack(NULL, err);
	}
	json_object_object_add(o, "sandbox",
			       json_object_new_string(c->sandbox));
	json_object_object_add(o, "template",
			       json_object_new_string(c->template_name));
	json_object_object_add(o, "project",
			       json_object_new_string(c->project));
	for (size_t i = 0; i < c->n_metadata; i++)
		json_object_object_add(
			m, c->metadata[i].key,
			json_object_new_string(c->metadata[i].value));
	json_object_object_add(o, "metadata", m);
	json_object_object_add(o, "build", json_object_new_boolean(c->build));
	json_object_object_add(o, "gateway",
			       json_object_new_string(c->gateway));
	return pack_with_network(o, &c->network, err);
}

static int id_field(json_object *o, const char *key, char out[64], al_err *err)
{
	const char *v = NULL;
	int r = al_json_get_str(o, key, 63, &v, NULL, err);
	if (r < 0)
		return -1;
	if (r == 0 || !al_id_valid(v))
		return al_err_set(err, AL_EINVAL, 0,
				  "%s is required: 1-63 of a-z 0-9 -", key);
	snprintf(out, 64, "%s", v);
	return 0;
}

static int metadata_from(json_object *o, al_gw_config *out, al_err *err)
{
	static const al_json_map_limits lim = {
		.max_entries = AL_GW_META_MAX,
		.max_key = AL_GW_META_KEY_MAX,
		.max_value = AL_GW_META_VALUE_MAX,
		.env_names = 0,
	};
	json_object *m = NULL;
	if (al_json_get_str_map(o, "metadata", &lim, &m, err) < 0)
		return -1;
	size_t n = m != NULL ? (size_t)json_object_object_length(m) : 0;
	if (n == 0)
		return 0;
	out->metadata = calloc(n, sizeof *out->metadata);
	if (out->metadata == NULL)
		return al_err_set(err, AL_ENOMEM, ENOMEM, "out of memory");
	json_object_object_foreach(m, k, v)
	{
		const char *s = json_object_get_string(v);
		/* json-c keys are C strings; values may hold a NUL. */
		if (strlen(s) != (size_t)json_object_get_string_len(v))
			return al_err_set(err, AL_EINVAL, 0,
					  "metadata holds a NUL byte");
		out->metadata[out->n_metadata].key = k;
		out->metadata[out->n_metadata].value = s;
		out->n_metadata++;
	}
	return 0;
}

int al_gw_config_unpack(const void *payload, size_t len, al_gw_config *out,
			al_err *err)
{
	static const char *const fields[] = {"sandbox",	 "template", "project",
					     "metadata", "build",    "gateway",
					     "network",	 NULL};
	memset(out, 0, sizeof *out);
	al_netspec_default(&out->network);
	out->root = al_json_parse_object(payload, len, err);
	if (out->root == NULL)
		return -1;
	json_object *o = out->root, *n = NULL;
	const char *gw = NULL;
	int build = 0;
	struct in_addr a;
	if (al_json_check_fields(o, fields, err) < 0 ||
	    id_field(o, "sandbox", out->sandbox, err) < 0 ||
	    id_field(o, "template", out->template_name, err) < 0 ||
	    id_field(o, "project", out->project, err) < 0 ||
	    metadata_from(o, out, err) < 0 ||
	    al_json_get_bool(o, "build", &build, err) < 0)
		goto fail;
	if (al_json_get_str(o, "gateway", sizeof out->gateway - 1, &gw, NULL,
			    err) != 1 ||
	    inet_pton(AF_INET, gw, &a) != 1) {
		al_err_set(err, AL_EINVAL, 0,
			   "gateway must be a dotted IPv4 address");
		goto fail;
	}
	snprintf(out->gateway, sizeof out->gateway, "%s", gw);
	out->build = build != 0;
	if (!json_object_object_get_ex(o, "network", &n) || n == NULL) {
		al_err_set(err, AL_EINVAL, 0, "network is required");
		goto fail;
	}
	if (al_netspec_from_json(n, "network", true, &out->network, err) < 0)
		goto fail;
	return 0;
fail:
	al_gw_config_free(out);
	return -1;
}

void al_gw_config_free(al_gw_config *c)
{
	free(c->metadata);
	al_netspec_free(&c->network);
	json_object_put(c->root);
	memset(c, 0, sizeof *c);
	al_netspec_default(&c->network);
}

char *al_gw_ack_pack(bool ok, const char *error, al_err *err)
{
	json_object *o = json_object_new_object();
	if (o == NULL)
		return al_json_pack(NULL, err);
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	if (!ok) {
		char e[AL_GW_ACK_ERROR_MAX];
		size_t i = 0;
		for (; error != NULL && error[i] != '\0' && i + 1 < sizeof e;
		     i++)
			e[i] = error[i] >= 0x20 && error[i] < 0x7f ? error[i]
								   : '?';
		e[i] = '\0';
		/* A refusal always says something (the unpack insists). */
		if (i == 0)
			snprintf(e, sizeof e, "refused");
		json_object_object_add(
			o, "error",
			json_object_new_string(i > 0 ? e : "refused"));
	}
	return al_json_pack(o, err);
}

int al_gw_ack_unpack(const void *payload, size_t len, al_gw_ack *out,
		     al_err *err)
{
	static const char *const fields[] = {"ok", "error", NULL};
	memset(out, 0, sizeof *out);
	json_object *o = al_json_parse_object(payload, len, err);
	if (o == NULL)
		return -1;
	int ok = 0;
	const char *e = NULL;
	size_t elen = 0;
	int r = al_json_check_fields(o, fields, err);
	if (r == 0 && al_json_get_bool(o, "ok", &ok, err) != 1)
		r = err->code != AL_OK
			    ? -1
			    : al_err_set(err, AL_EINVAL, 0, "ok is required");
	if (r == 0 && al_json_get_str(o, "error", AL_GW_ACK_ERROR_MAX - 1, &e,
				      &elen, err) < 0)
		r = -1;
	for (size_t i = 0; r == 0 && e != NULL && i < elen; i++)
		if (e[i] < 0x20 || e[i] >= 0x7f)
			r = al_err_set(err, AL_EINVAL, 0,
				       "error must be printable ASCII");
	if (r == 0 && !ok && (e == NULL || elen == 0))
		r = al_err_set(err, AL_EINVAL, 0,
			       "an ack that is not ok says why (error)");
	if (r == 0) {
		out->ok = ok != 0;
		if (!ok)
			memcpy(out->error, e, elen + 1);
	}
	json_object_put(o);
	return r;
}
