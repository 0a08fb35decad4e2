/* The Debian mirror of the host: AIRLOCK_DEBIAN_MIRROR, else the one
 * the host's apt sources name for a suite (deb822 .sources or one-line
 * .list files). FROM debian:<suite> debootstraps from it, and a build's
 * gateway lets RUN steps reach it. */
#include "builder.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"

#define SOURCES_MAX (1u << 20)

static int mirror_ok(const char *m)
{
	size_t n = strlen(m);
	if (n < 8 || n > 512)
		return 0;
	if (strncmp(m, "http://", 7) != 0 && strncmp(m, "https://", 8) != 0 &&
	    strncmp(m, "file:/", 6) != 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)m[i];
		if (!isalnum(c) && strchr(":/._~%+-@", c) == NULL)
			return 0;
	}
	return 1;
}

static int word_in(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; *p != '\0';) {
		while (*p == ' ' || *p == '\t')
			p++;
		size_t l = strcspn(p, " \t");
		if (l == wl && strncmp(p, word, wl) == 0)
			return 1;
		p += l;
	}
	return 0;
}

/* deb822 (*.sources): the first enabled stanza with Types deb and our
 * suite; its first URI. */
static int stanza_match(const char *types, const char *suites, const char *uris,
			int enabled, const char *suite, char *out,
			size_t outlen)
{
	char first[1024];
	if (!enabled || !word_in(types, "deb") || !word_in(suites, suite) ||
	    sscanf(uris, "%1023s", first) != 1 || !mirror_ok(first))
		return 0;
	snprintf(out, outlen, "%s", first);
	return 1;
}

static int mirror_from_deb822(char *text, const char *suite, char *out,
			      size_t outlen)
{
	char types[512] = "", uris[1024] = "", suites[512] = "";
	int enabled = 1;
	char *line = text;
	while (line != NULL) {
		char *next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		line[strcspn(line, "\r")] = '\0';
		if (line[strspn(line, " \t")] == '\0') {
			/* A blank line ends a stanza. */
			if (stanza_match(types, suites, uris, enabled, suite,
					 out, outlen))
				return 1;
			types[0] = uris[0] = suites[0] = '\0';
			enabled = 1;
		} else if (line[0] != '#' && line[0] != ' ' &&
			   line[0] != '\t' && strchr(line, ':') != NULL) {
			char *colon = strchr(line, ':');
			*colon = '\0';
			const char *val = colon + 1;
			val += strspn(val, " \t");
			if (strcasecmp(line, "Types") == 0)
				snprintf(types, sizeof types, "%s", val);
			else if (strcasecmp(line, "URIs") == 0)
				snprintf(uris, sizeof uris, "%s", val);
			else if (strcasecmp(line, "Suites") == 0)
				snprintf(suites, sizeof suites, "%s", val);
			else if (strcasecmp(line, "Enabled") == 0)
				enabled = strcasecmp(val, "no") != 0;
		}
		line = next;
	}
	return stanza_match(types, suites, uris, enabled, suite, out, outlen);
}

/* One-line format: "deb [opts] URI suite comps". */
static int mirror_from_list(char *text, const char *suite, char *out,
			    size_t outlen)
{
	for (char *save = NULL, *line = strtok_r(text, "\n", &save);
	     line != NULL; line = strtok_r(NULL, "\n", &save)) {
		char type[16], uri[1024], s[128];
		const char *p = line + strspn(line, " \t");
		if (sscanf(p, "%15s", type) != 1 || strcmp(type, "deb") != 0)
			continue;
		p += 3;
		p += strspn(p, " \t");
		if (*p == '[') {
			const char *e = strchr(p, ']');
			if (e == NULL)
				continue;
			p = e + 1;
		}
		if (sscanf(p, "%1023s %127s", uri, s) != 2)
			continue;
		if (strcmp(s, suite) == 0 && mirror_ok(uri)) {
			snprintf(out, outlen, "%s", uri);
			return 1;
		}
	}
	return 0;
}

static int mirror_from_file(const char *path, const char *suite, char *out,
			    size_t outlen)
{
	size_t len;
	al_err tmp_err = {0};
	al_autofree char *text = bld_fsroot_read_host_file(path, SOURCES_MAX,
							   &len, &tmp_err);
	if (text == NULL)
		return 0;
	size_t pl = strlen(path);
	if (pl > 8 && strcmp(path + pl - 8, ".sources") == 0)
		return mirror_from_deb822(text, suite, out, outlen);
	return mirror_from_list(text, suite, out, outlen);
}

int bld_mirror_of_host(const char *suite, char *out, size_t outlen, al_err *err)
{
	const char *env = getenv("AIRLOCK_DEBIAN_MIRROR");
	if (env != NULL && env[0] != '\0') {
		if (!mirror_ok(env))
			return al_err_set(err, AL_EINVAL, 0,
					  "AIRLOCK_DEBIAN_MIRROR is not an "
					  "http(s):// or file:/ URL");
		snprintf(out, outlen, "%s", env);
		return 0;
	}
	if (mirror_from_file("/etc/apt/sources.list.d/debian.sources", suite,
			     out, outlen) ||
	    mirror_from_file("/etc/apt/sources.list", suite, out, outlen))
		return 0;
	DIR *d = opendir("/etc/apt/sources.list.d");
	if (d != NULL) {
		struct dirent *de;
		int found = 0;
		while (!found && (de = readdir(d)) != NULL) {
			size_t l = strlen(de->d_name);
			if (de->d_name[0] == '.' ||
			    !((l > 8 &&
			       strcmp(de->d_name + l - 8, ".sources") == 0) ||
			      (l > 5 &&
			       strcmp(de->d_name + l - 5, ".list") == 0)))
				continue;
			char p[600];
			snprintf(p, sizeof p, "/etc/apt/sources.list.d/%s",
				 de->d_name);
			found = mirror_from_file(p, suite, out, outlen);
		}
		closedir(d);
		if (found)
			return 0;
	}
	return al_err_set(err, AL_ENOENT, 0,
			  "no apt source for %s on this host (looked in "
			  "/etc/apt/sources.list.d/ and /etc/apt/sources.list; "
			  "or set AIRLOCK_DEBIAN_MIRROR)",
			  suite);
}
