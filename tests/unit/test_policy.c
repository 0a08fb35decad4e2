/* core/policy: the shipped egress policy's decisions, the rules C applies
 * after any policy, and hostile policies (loops, memory bombs, errors,
 * garbage answers, escape attempts, bytecode, broken reloads). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/dnsname.h"
#include "base/log.h"
#include "policy/policy.h"

#define SHIPPED "policies/egress.lua"

static char dir[64];

static void path_of(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

/* Write a policy file atomically (a new inode, as an editor that saves
 * through a rename does). */
static void write_policy(const char *name, const char *src, size_t len)
{
	char p[128], tmp[160];
	path_of(p, sizeof p, name);
	snprintf(tmp, sizeof tmp, "%s.tmp", p);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, src, len), (ssize_t)len);
	close(fd);
	assert_int_equal(rename(tmp, p), 0);
}

static al_policy *open_src(const char *src)
{
	al_err err = {0};
	al_policy *p = al_policy_open_source("test.lua", src, strlen(src),
					     &al_policy_egress_kind, NULL,
					     &err);
	if (p == NULL)
		fail_msg("policy did not load: %s", err.msg);
	return p;
}

static const char *const no_list[] = {NULL};

/* A request in allowlist mode for name on https/443, with one allow
 * entry. */
static al_egress_req req_for(const char *name, const char *const *allow,
			     size_t n_allow)
{
	return (al_egress_req){
		.name = name,
		.port = 443,
		.protocol = AL_EGRESS_HTTPS,
		.sandbox = "sb-1",
		.template_name = "base",
		.project = "default",
		.mode = AL_NET_ALLOWLIST,
		.allow = allow,
		.n_allow = n_allow,
		.deny = no_list,
	};
}

static bool allowed(al_policy *p, const al_egress_req *r)
{
	al_egress_decision d;
	memset(&d, 0x55, sizeof d);
	al_policy_egress(p, r, &d);
	/* Whatever happened, the reason is a printable C string. */
	assert_non_null(memchr(d.reason, '\0', sizeof d.reason));
	for (const char *c = d.reason; *c; c++)
		assert_true(*c >= 0x20 && *c < 0x7f);
	return d.allow;
}

/* ---- the shipped policy ---- */

static al_policy *open_shipped(void)
{
	al_err err = {0};
	al_policy *p = al_policy_open(SHIPPED, &al_policy_egress_kind, NULL,
				      &err);
	if (p == NULL)
		fail_msg("%s did not load: %s", SHIPPED, err.msg);
	return p;
}

/* The decision is a deny returning rc, with that reason. */
static void assert_denied(al_policy *p, const al_egress_req *r, int rc,
			  const char *reason)
{
	al_egress_decision d;
	assert_int_equal(al_policy_egress(p, r, &d), rc);
	assert_false(d.allow);
	assert_string_equal(d.reason, reason);
}

static void test_shipped_allowlist(void **state)
{
	(void)state;
	al_policy *p = open_shipped();
	const char *const allow[] = {"example.com", "*.corp.example"};
	al_egress_req r = req_for("example.com", allow, 2);
	assert_true(allowed(p, &r));
	r.name = "api.corp.example";
	assert_true(allowed(p, &r));
	r.name = "corp.example"; /* "*." needs a label before */
	assert_false(allowed(p, &r));
	r.name = "evil.com";
	assert_false(allowed(p, &r));
	/* http on 80, dns lookups, but not http on 443 nor tcp/22. */
	r.name = "example.com";
	r.protocol = AL_EGRESS_HTTP;
	r.port = 80;
	r.method = "GET";
	r.path = "/";
	assert_true(allowed(p, &r));
	r.port = 443;
	assert_false(allowed(p, &r));
	r.protocol = AL_EGRESS_DNS;
	r.port = 0;
	assert_true(allowed(p, &r));
	r.protocol = AL_EGRESS_TCP;
	r.port = 22;
	assert_denied(p, &r, 0, "tcp port 22 not allowed");
	al_policy_close(p);
}

static void test_shipped_builds_and_modes(void **state)
{
	(void)state;
	al_policy *p = open_shipped();
	al_egress_req r = req_for("files.pythonhosted.org", no_list, 0);
	assert_false(allowed(p, &r)); /* a sandbox: not on its list */
	r.build = true;
	assert_true(allowed(p, &r));
	r.name = "objects.githubusercontent.com";
	assert_true(allowed(p, &r));
	r.name = "deb.debian.org";
	assert_true(allowed(p, &r));
	r.name = "registry.npmjs.org";
	assert_true(allowed(p, &r));
	r.name = "evil.com";
	assert_false(allowed(p, &r));
	/* open: public names, not local ones. */
	r.build = false;
	r.mode = AL_NET_OPEN;
	assert_true(allowed(p, &r));
	r.name = "localhost";
	assert_false(allowed(p, &r));
	r.name = "db.internal";
	assert_false(allowed(p, &r));
	/* none: nothing, even what the allow list names. */
	const char *const allow[] = {"example.com"};
	r = req_for("example.com", allow, 1);
	r.mode = AL_NET_NONE;
	assert_denied(p, &r, 0, "network mode none");
	al_policy_close(p);
}

/* The request's deny list wins over a policy that allows everything, and
 * the allow list narrows it in allowlist mode. */
static void test_request_lists_narrow_in_c(void **state)
{
	(void)state;
	al_policy *p = open_src("function egress(req) return allow('all') end");
	const char *const allow[] = {"example.com", "*.example.org"};
	const char *const deny[] = {"bad.example.org"};
	al_egress_req r = req_for("bad.example.org", allow, 2);
	r.deny = deny;
	r.n_deny = 1;
	assert_denied(p, &r, 0, "on the sandbox's deny list");
	r.mode = AL_NET_OPEN;
	assert_false(allowed(p, &r));
	r.build = true;
	assert_false(allowed(p, &r));
	r.name = "good.example.org";
	r.mode = AL_NET_ALLOWLIST;
	r.build = false;
	assert_true(allowed(p, &r));
	r.name = "elsewhere.net";
	assert_denied(p, &r, 0, "not on the sandbox's allow list");
	r.mode = AL_NET_OPEN;
	assert_true(allowed(p, &r));
	al_policy_close(p);
}

/* The allow, deny and metadata tables a policy gets are reused across
 * calls (core/policy/policy_egress.c): each call must still see exactly what its
 * request carries, whatever the policy did to the tables of an earlier
 * call and whatever changed in the request's lists, even in place. */
static const char seen_src[] =
	"local function count(t)\n"
	"  local n = 0\n"
	"  for _ in pairs(t) do n = n + 1 end\n"
	"  return n\n"
	"end\n"
	"function egress(req)\n"
	"  local a, d, m = req.allow, req.deny, req.metadata\n"
	"  local seen = table.concat(a, ',') .. '#' .. count(a) .. '|' ..\n"
	"    table.concat(d, ',') .. '#' .. count(d) .. '|' ..\n"
	"    (m.team or '-') .. '#' .. count(m) .. '|' ..\n"
	"    tostring(getmetatable(a) == nil and getmetatable(d) == nil and\n"
	"             getmetatable(m) == nil)\n"
	"  local t = req.path\n"
	"  if t == 'field' then a.foo = 1\n"
	"  elseif t == 'zero' then a[0] = 'x'\n"
	"  elseif t == 'append' then a[#a + 1] = 'evil.example'\n"
	"  elseif t == 'far' then a[1000] = 'evil.example'\n"
	"  elseif t == 'negative' then a[-1] = 'x'\n"
	"  elseif t == 'replace' then a[1] = 'evil.example'\n"
	"  elseif t == 'remove' then table.remove(a)\n"
	"  elseif t == 'clear' then a[1] = nil; a[2] = nil\n"
	"  elseif t == 'many' then for i = 1, 100 do a['k' .. i] = i end\n"
	"  elseif t == 'meta' then setmetatable(a, {})\n"
	"  elseif t == 'deny' then d[#d + 1] = 'x'\n"
	"  elseif t == 'metameta' then setmetatable(m, {__index = a})\n"
	"  elseif t == 'team' then m.team = 'evil'\n"
	"  elseif t == 'extra' then m.extra = '1'\n"
	"  end\n"
	"  return deny(seen)\n"
	"end\n";

static void assert_seen(al_policy *p, const al_egress_req *r, const char *want)
{
	al_egress_decision d;
	assert_int_equal(al_policy_egress(p, r, &d), 0);
	assert_string_equal(d.reason, want);
}

static void test_cached_tables_follow_the_request(void **state)
{
	(void)state;
	al_policy *p = open_src(seen_src);
	const char *const allow[] = {"a.example", "b.example"};
	const char *const deny[] = {"bad.example"};
	static const al_policy_kv meta[] = {{"team", "research"}};
	al_egress_req r = req_for("a.example", allow, 2);
	r.deny = deny;
	r.n_deny = 1;
	r.metadata = meta;
	r.n_metadata = 1;
	const char *clean =
		"a.example,b.example#2|bad.example#1|research#1|true";
	static const char *const tampers[] = {
		"field",   "zero",     "append", "far",	  "negative",
		"replace", "remove",   "clear",	 "many",  "meta",
		"deny",	   "metameta", "team",	 "extra",
	};
	assert_seen(p, &r, clean);
	for (size_t i = 0; i < sizeof tampers / sizeof tampers[0]; i++) {
		r.path = tampers[i];
		assert_seen(p, &r, clean); /* what it saw before tampering */
		r.path = NULL;
		assert_seen(p, &r, clean); /* the next call: as built */
	}
	/* The lists change between calls: shorter, longer, other names,
	 * empty; metadata other values, more keys, none. */
	const char *const other[] = {"a.example", "c.example", "d.example"};
	r.allow = other;
	r.n_allow = 3;
	assert_seen(p, &r,
		    "a.example,c.example,d.example#3|bad.example#1|"
		    "research#1|true");
	r.n_allow = 1;
	assert_seen(p, &r, "a.example#1|bad.example#1|research#1|true");
	r.n_allow = 0;
	r.n_deny = 0;
	assert_seen(p, &r, "#0|#0|research#1|true");
	static const al_policy_kv meta2[] = {{"team", "ops"}, {"x", "1"}};
	r.metadata = meta2;
	r.n_metadata = 2;
	assert_seen(p, &r, "#0|#0|ops#2|true");
	r.n_metadata = 0;
	assert_seen(p, &r, "#0|#0|-#0|true");
	/* Changed in place (same arrays, same pointers): contents decide. */
	char name[] = "e.example";
	const char *mut[] = {name, "f.example"};
	r.allow = mut;
	r.n_allow = 2;
	assert_seen(p, &r, "e.example,f.example#2|#0|-#0|true");
	name[0] = 'g';
	assert_seen(p, &r, "g.example,f.example#2|#0|-#0|true");
	mut[1] = "h.example";
	assert_seen(p, &r, "g.example,h.example#2|#0|-#0|true");
	{
		char team[] = "blue";
		al_policy_kv mkv[] = {{"team", team}};
		r.metadata = mkv;
		r.n_metadata = 1;
		assert_seen(p, &r, "g.example,h.example#2|#0|blue#1|true");
		team[0] = 'g';
		team[1] = 'r';
		assert_seen(p, &r, "g.example,h.example#2|#0|grue#1|true");
	}
	/* Two keys the same: the later value, one key. */
	static const al_policy_kv dup[] = {{"team", "a"}, {"team", "b"}};
	r.metadata = dup;
	r.n_metadata = 2;
	assert_seen(p, &r, "g.example,h.example#2|#0|b#1|true");
	assert_seen(p, &r, "g.example,h.example#2|#0|b#1|true");
	al_policy_close(p);
}

static void test_bad_requests_deny(void **state)
{
	(void)state;
	al_policy *p = open_src("function egress(req) return allow('all') end");
	al_egress_req r = req_for("Example.COM", no_list, 0);
	r.mode = AL_NET_OPEN;
	al_egress_decision d;
	assert_int_equal(al_policy_egress(p, &r, &d), -1);
	assert_false(d.allow);
	r.name = "example.com.";
	assert_int_equal(al_policy_egress(p, &r, &d), -1);
	r.name = "example.com";
	r.mode = (enum al_net_mode)7;
	assert_int_equal(al_policy_egress(p, &r, &d), -1);
	r.mode = AL_NET_OPEN;
	r.port = 70000;
	assert_int_equal(al_policy_egress(p, &r, &d), -1);
	r.port = 443;
	char *big = malloc(AL_POLICY_FIELD_MAX + 2);
	memset(big, 'a', AL_POLICY_FIELD_MAX + 1);
	big[AL_POLICY_FIELD_MAX + 1] = '\0';
	r.path = big;
	assert_int_equal(al_policy_egress(p, &r, &d), -1);
	assert_false(d.allow);
	free(big);
	r.path = "/";
	assert_int_equal(al_policy_egress(p, &r, &d), 0);
	assert_true(d.allow);
	al_policy_close(p);
}

static void test_names(void **state)
{
	(void)state;
	char out[256];
	assert_int_equal(al_dnsname_canon("WWW.Example.COM.", out, sizeof out,
					  NULL),
			 0);
	assert_string_equal(out, "www.example.com");
	assert_int_equal(al_dnsname_canon("a..b", out, sizeof out, NULL), -1);
	assert_int_equal(al_dnsname_canon("b\xc3\xbc.de", out, sizeof out,
					  NULL),
			 -1);
	assert_int_equal(al_dnsname_canon("", out, sizeof out, NULL), -1);
	assert_int_equal(al_dnsname_canon("a b", out, sizeof out, NULL), -1);
	assert_true(al_dnsname_match("a.b.example.com", "*.example.com"));
	assert_true(al_dnsname_match("a.example.com", "*.EXAMPLE.com."));
	assert_false(al_dnsname_match("example.com", "*.example.com"));
	assert_false(al_dnsname_match("badexample.com", "*.example.com"));
	assert_true(al_dnsname_match("example.com", "Example.com"));
	assert_false(al_dnsname_match("example.co", "example.com"));
	assert_true(al_dnsname_match("anything.at.all", "*"));
	assert_false(al_dnsname_match("a.example.com", "a*.example.com"));
	assert_false(al_dnsname_match("a.example.com", ""));
}

/* ---- hostile policies ---- */

static void test_loop_denies_within_budget(void **state)
{
	(void)state;
	al_policy *p = open_src("function egress(req)\n"
				"  if req.metadata.loop then\n"
				"    while true do end\n"
				"  end\n"
				"  return allow('fine')\n"
				"end\n");
	al_policy_kv meta[] = {{"loop", "1"}};
	al_egress_req r = req_for("example.com", (const char *const[]){"*"}, 1);
	r.metadata = meta;
	r.n_metadata = 1;
	al_egress_decision d;
	assert_int_equal(al_policy_egress(p, &r, &d), -1);
	assert_false(d.allow);
	al_policy_stat st;
	al_policy_status(p, &st);
	assert_int_equal(st.failures, 1);
	assert_non_null(strstr(st.last_failure, "test.lua:3:"));
	assert_non_null(strstr(st.last_failure, "instruction budget"));
	r.n_metadata = 0; /* the next call works */
	assert_int_equal(al_policy_egress(p, &r, &d), 0);
	assert_true(d.allow);
	al_policy_close(p);
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%ld %ld", &pages, &res), 2);
	fclose(f);
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void test_memory_bombs_deny(void **state)
{
	(void)state;
	al_policy *p = open_src(
		"junk = {}\n"
		"function egress(req)\n"
		"  local how = req.metadata.bomb\n"
		"  if how == 'rep' then local s = string.rep('x', 2^30) end\n"
		"  if how == 'double' then local s = 'x'\n"
		"    for i = 1, 40 do s = s .. s end end\n"
		"  if how == 'table' then local t = {}\n"
		"    for i = 1, 1e9 do t[i] = i end end\n"
		"  if how == 'keep' then for i = 1, 1e9 do\n"
		"    junk[#junk + 1] = string.rep('y', 1000) .. i end end\n"
		"  return allow('fine')\n"
		"end\n");
	long before = rss_kib();
	const char *const bombs[] = {"rep", "double", "table", "keep"};
	for (size_t i = 0; i < 4; i++) {
		al_policy_kv meta[] = {{"bomb", bombs[i]}};
		al_egress_req r = req_for("example.com",
					  (const char *const[]){"*"}, 1);
		r.metadata = meta;
		r.n_metadata = 1;
		al_egress_decision d;
		assert_int_equal(al_policy_egress(p, &r, &d), -1);
		assert_false(d.allow);
		al_policy_stat st;
		al_policy_status(p, &st);
		assert_true(st.mem_peak <=
			    AL_POLICY_MEM_STATE_DEFAULT + (64u << 10));
		/* "table" may stop on memory or on instructions; the others
		 * run out of memory. */
		if (i != 2)
			assert_non_null(strstr(st.last_failure,
					       "not enough memory"));
		/* The next call works. */
		r.n_metadata = 0;
		assert_int_equal(al_policy_egress(p, &r, &d), 0);
		assert_true(d.allow);
	}
	/* The state kept its junk (a global) up to its cap; the process
	 * did not grow past a few caps (sanitizer quarantine included). */
	long grew = rss_kib() - before;
	assert_true(grew < 8 * (long)(AL_POLICY_MEM_STATE_DEFAULT >> 10));
	al_policy_close(p);
}

/* A policy that keeps 10 of its 16 MiB alive and makes 3 MiB of garbage
 * a call still decides every time (LuaJIT's GC mostly keeps up by itself;
 * al_policy_run also collects first when the window would be short). */
static void test_window_despite_garbage(void **state)
{
	(void)state;
	al_policy *p = open_src(
		"keep = {}\n"
		"for i = 1, 10000 do keep[i] = string.rep('k', 1000) .. i end\n"
		"function egress(req)\n"
		"  local t = {}\n"
		"  for i = 1, 3000 do t[i] = string.rep('x', 1000) .. i end\n"
		"  return allow(tostring(#t))\n"
		"end\n");
	al_egress_req r = req_for("example.com", (const char *const[]){"*"}, 1);
	for (int i = 0; i < 5; i++) {
		al_egress_decision d;
		assert_int_equal(al_policy_egress(p, &r, &d), 0);
		assert_string_equal(d.reason, "3000");
	}
	al_policy_close(p);
}

/* fd 2 to a file while fn runs; returns the file's text. */
static char *capture_log(void (*fn)(al_policy *), al_policy *p)
{
	char path[128];
	path_of(path, sizeof path, "log");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	int saved = dup(2);
	dup2(fd, 2);
	fn(p);
	dup2(saved, 2);
	close(saved);
	off_t n = lseek(fd, 0, SEEK_END);
	char *text = calloc(1, (size_t)n + 1);
	assert_int_equal(pread(fd, text, (size_t)n, 0), n);
	close(fd);
	return text;
}

static void ask_many(al_policy *p)
{
	al_egress_req r = req_for("example.com", (const char *const[]){"*"}, 1);
	for (int i = 0; i < 200; i++) {
		al_egress_decision d;
		assert_int_equal(al_policy_egress(p, &r, &d), -1);
		assert_false(d.allow);
	}
}

static int count_lines(const char *text)
{
	int n = 0;
	for (; *text; text++)
		n += *text == '\n';
	return n;
}

static void test_errors_logged_with_line_rate_limited(void **state)
{
	(void)state;
	al_policy *p = open_src("function egress(req)\n"
				"  if req.sandbox == 'sb-1' then\n"
				"    error('nope')\n"
				"  end\n"
				"  return allow()\n"
				"end\n");
	/* The dry decision passes; sandbox sb-1 errors at line 3. */
	char *log = capture_log(ask_many, p);
	assert_non_null(strstr(log, "test.lua:3: nope"));
	/* 200 failures, a burst of a few lines. */
	assert_true(count_lines(log) >= 1);
	if (count_lines(log) > 6)
		fail_msg("%d lines:\n%s", count_lines(log), log);
	free(log);
	al_policy_stat st;
	al_policy_status(p, &st);
	assert_int_equal(st.failures, 200);
	al_policy_close(p);

	/* A message cannot forge a log line. */
	p = open_src("function egress(req)\n"
		     "  if req.sandbox == 'sb-1' then\n"
		     "    error('x\\n2026-01-01 fake: line')\n"
		     "  end\n"
		     "  return allow()\n"
		     "end\n");
	al_egress_req fr = req_for("example.com", (const char *const[]){"*"},
				   1);
	al_egress_decision fd;
	assert_int_equal(al_policy_egress(p, &fr, &fd), -1);
	al_policy_status(p, &st);
	assert_non_null(strstr(st.last_failure, "x?2026-01-01 fake: line"));
	al_policy_close(p);

	/* A runtime error, and error() without a position. */
	p = open_src("function egress(req)\n"
		     "  if req.sandbox ~= 'sb-1' then return deny() end\n"
		     "  local t = nil\n"
		     "  return t.x\n"
		     "end\n");
	al_egress_req r = req_for("example.com", (const char *const[]){"*"}, 1);
	al_egress_decision d;
	assert_int_equal(al_policy_egress(p, &r, &d), -1);
	al_policy_status(p, &st);
	assert_non_null(strstr(st.last_failure, "test.lua:4:"));
	al_policy_close(p);
	p = open_src("function egress(req)\n"
		     "  if req.sandbox ~= 'sb-1' then return deny() end\n"
		     "  error({}, 0)\n"
		     "end\n");
	assert_int_equal(al_policy_egress(p, &r, &d), -1);
	al_policy_status(p, &st);
	assert_non_null(strstr(st.last_failure, "test.lua:3:"));
	assert_non_null(strstr(st.last_failure, "error object is a table"));
	al_policy_close(p);
}

static void log_many(al_policy *p)
{
	al_egress_req r = req_for("example.com", (const char *const[]){"*"}, 1);
	for (int i = 0; i < 100; i++) {
		al_egress_decision d;
		assert_int_equal(al_policy_egress(p, &r, &d), 0);
		assert_true(d.allow);
	}
}

/* log(): a policy's own lines, printable only (no forged lines) and
 * rate-limited like its errors. */
static void test_policy_log(void **state)
{
	(void)state;
	al_policy *p = open_src("function egress(req)\n"
				"  log('asked\\nfake line ' .. req.name)\n"
				"  return allow()\n"
				"end\n");
	char *log = capture_log(log_many, p);
	assert_non_null(strstr(log, "asked?fake line example.com"));
	assert_true(count_lines(log) <= 6);
	free(log);
	al_policy_close(p);
}

static void test_garbage_answers_deny(void **state)
{
	(void)state;
	static const char *const answers[] = {
		"",
		"1",
		"'allow'",
		"nil",
		"true, {}",
		"true, 'a', 3",
		"{allow = true}",
		"function() end",
		"'true'",
		"true, 5",
	};
	for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
		char src[256];
		snprintf(src, sizeof src,
			 "function egress(req)\n"
			 "  if req.sandbox == 'sb-1' then return %s end\n"
			 "  return deny()\n"
			 "end\n",
			 answers[i]);
		al_policy *p = open_src(src);
		al_egress_req r = req_for("example.com",
					  (const char *const[]){"*"}, 1);
		al_egress_decision d;
		assert_int_equal(al_policy_egress(p, &r, &d), -1);
		assert_false(d.allow);
		al_policy_close(p);
	}
}

/* Everything a policy could use to leave its sandbox is absent. */
static void test_escape_routes_absent(void **state)
{
	(void)state;
	al_policy *p = open_src(
		"local banned = { 'os', 'io', 'load', 'loadstring', 'loadfile',\n"
		"  'dofile', 'getfenv', 'setfenv', 'require', 'package',\n"
		"  'debug', 'collectgarbage', 'gcinfo', 'jit', 'ffi', 'bit',\n"
		"  'newproxy', 'module', 'print', 'pcall', 'xpcall',\n"
		"  'coroutine' }\n"
		"function egress(req)\n"
		"  for _, n in ipairs(banned) do\n"
		"    if _G[n] ~= nil then return deny(n) end\n"
		"  end\n"
		"  for _, n in ipairs({ 'dump', 'find', 'match', 'gmatch',\n"
		"      'gsub' }) do\n"
		"    if string[n] ~= nil then return deny('string.' .. n) end\n"
		"  end\n"
		"  if type(getmetatable('')) == 'table' then\n"
		"    return deny('string metatable')\n"
		"  end\n"
		"  return allow('sealed')\n"
		"end\n");
	al_egress_req r = req_for("example.com", (const char *const[]){"*"}, 1);
	al_egress_decision d;
	assert_int_equal(al_policy_egress(p, &r, &d), 0);
	assert_string_equal(d.reason, "sealed");
	assert_true(d.allow);
	al_policy_close(p);

	/* And each attempt fails (denies) when tried. */
	static const char *const tries[] = {
		"os.execute('touch /tmp/airlock-policy-escaped')",
		"io.open('/etc/passwd')",
		"load('return 1')()",
		"loadstring('return 1')()",
		"string.dump(egress)",
		"getfenv(1).x = 1",
		"require('os')",
		"debug.getinfo(1)",
		"collectgarbage('stop')",
		"getmetatable('').__index = {}",
		"setmetatable(getmetatable(''), {})",
		"('x'):find('x')",
		"pcall(error)",
		"coroutine.wrap(function() end)()",
	};
	for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
		char src[512];
		snprintf(src, sizeof src,
			 "function egress(req)\n"
			 "  if req.sandbox == 'sb-1' then %s end\n"
			 "  return allow('fine')\n"
			 "end\n",
			 tries[i]);
		p = open_src(src);
		assert_int_equal(al_policy_egress(p, &r, &d), -1);
		assert_false(d.allow);
		al_policy_close(p);
	}
	assert_int_equal(access("/tmp/airlock-policy-escaped", F_OK), -1);
}

/* Two policies share nothing: one trampling its globals and string table
 * leaves the other as it was. */
static void test_states_isolated(void **state)
{
	(void)state;
	al_policy *a = open_src(
		"function egress(req)\n"
		"  string.lower = nil; string.rep = nil; shared = 'a'\n"
		"  math.floor = function() return 0 end\n"
		"  return allow()\n"
		"end\n");
	al_policy *b = open_src(
		"function egress(req)\n"
		"  if shared ~= nil or string.lower == nil or\n"
		"     math.floor(1.5) ~= 1 then return deny('touched') end\n"
		"  return allow('untouched')\n"
		"end\n");
	al_egress_req r = req_for("example.com", (const char *const[]){"*"}, 1);
	al_egress_decision d;
	assert_int_equal(al_policy_egress(a, &r, &d), 0);
	assert_int_equal(al_policy_egress(b, &r, &d), 0);
	assert_true(d.allow);
	assert_string_equal(d.reason, "untouched");
	al_policy_close(a);
	al_policy_close(b);
}

/* Tables' __gc never runs (LuaJIT has 5.1 semantics and newproxy is
 * gone): nothing of a policy runs at collection, outside a budget. */
static void test_no_finalizers(void **state)
{
	(void)state;
	al_policy *p = open_src(
		"ran = 0\n"
		"function egress(req)\n"
		"  for i = 1, 100 do\n"
		"    setmetatable({}, { __gc = function() ran = ran + 1 end })\n"
		"  end\n"
		"  if req.metadata.fail then error('collect now') end\n"
		"  return allow(tostring(ran))\n"
		"end\n");
	al_policy_kv meta[] = {{"fail", "1"}};
	al_egress_req r = req_for("example.com", (const char *const[]){"*"}, 1);
	al_egress_decision d;
	r.metadata = meta;
	r.n_metadata = 1;
	/* A failed call is followed by a full collection. */
	assert_int_equal(al_policy_egress(p, &r, &d), -1);
	r.n_metadata = 0;
	assert_int_equal(al_policy_egress(p, &r, &d), 0);
	assert_string_equal(d.reason, "0");
	al_policy_close(p);
}

static void test_bad_files_refused(void **state)
{
	(void)state;
	al_err err = {0};
	static const char bytecode[] = "\x1bLJ\x02\x00\x00\x00";
	assert_null(al_policy_open_source("bc.lua", bytecode,
					  sizeof bytecode - 1,
					  &al_policy_egress_kind, NULL, &err));
	assert_non_null(strstr(err.msg, "bytecode"));
	write_policy("bc.lua", bytecode, sizeof bytecode - 1);
	char path[128];
	path_of(path, sizeof path, "bc.lua");
	assert_null(al_policy_open(path, &al_policy_egress_kind, NULL, &err));
	assert_non_null(strstr(err.msg, "bytecode"));

	static const char *const bad[] = {
		"function egress(req) return allow( end", /* syntax */
		"x = 1",				  /* no egress */
		"while true do end",			  /* top-level loop */
		"function egress(req) return allow() end\n"
		"function self_test() return false, 'broken on purpose' end",
		"function egress(req) return 42 end", /* fails the dry run */
		"big = string.rep('x', 2^30)\n"
		"function egress(req) return allow() end",
	};
	static const char *const why[] = {
		"test.lua:1:",	      "defines no function egress",
		"instruction budget", "broken on purpose",
		"dry decision",	      "not enough memory",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(&err, 0, sizeof err);
		assert_null(al_policy_open_source("test.lua", bad[i],
						  strlen(bad[i]),
						  &al_policy_egress_kind, NULL,
						  &err));
		if (strstr(err.msg, why[i]) == NULL)
			fail_msg("%zu: %s", i, err.msg);
	}
	path_of(path, sizeof path, "missing.lua");
	assert_null(al_policy_open(path, &al_policy_egress_kind, NULL, &err));
	assert_non_null(strstr(err.msg, "No such file"));
}

static void test_reload(void **state)
{
	(void)state;
	static const char good1[] =
		"function egress(req) return allow('one') end\n";
	static const char broken[] =
		"function egress(req)\n  return allow('two'\nend\n";
	static const char good2[] =
		"function egress(req) return allow('three') end\n";
	write_policy("egress.lua", good1, sizeof good1 - 1);
	char path[128];
	path_of(path, sizeof path, "egress.lua");
	al_err err = {0};
	al_policy *p = al_policy_open(path, &al_policy_egress_kind, NULL, &err);
	assert_non_null(p);
	al_egress_req r = req_for("example.com", (const char *const[]){"*"}, 1);
	al_egress_decision d;
	assert_int_equal(al_policy_reload_if_changed(p), 0);

	write_policy("egress.lua", broken, sizeof broken - 1);
	assert_int_equal(al_policy_reload_if_changed(p), -1);
	al_policy_stat st;
	al_policy_status(p, &st);
	assert_non_null(strstr(st.reload_error, "egress.lua:3:"));
	assert_true(st.reload_error_at > 0);
	assert_int_equal(al_policy_egress(p, &r, &d), 0);
	assert_string_equal(d.reason, "one"); /* the last good one */
	/* Not retried (nor logged again) until it changes. */
	assert_int_equal(al_policy_reload_if_changed(p), 0);

	write_policy("egress.lua", good2, sizeof good2 - 1);
	assert_int_equal(al_policy_reload_if_changed(p), 1);
	assert_int_equal(al_policy_egress(p, &r, &d), 0);
	assert_string_equal(d.reason, "three");
	al_policy_status(p, &st);
	assert_string_equal(st.reload_error, "");
	assert_int_equal(st.reloads, 1);

	/* Removed: the last good stays. */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(al_policy_reload_if_changed(p), -1);
	assert_int_equal(al_policy_reload_if_changed(p), 0);
	al_policy_status(p, &st);
	assert_non_null(strstr(st.reload_error, "No such file"));
	assert_int_equal(al_policy_egress(p, &r, &d), 0);
	assert_string_equal(d.reason, "three");
	al_policy_close(p);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/airlock-policy-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	al_log_init("test_policy", AL_LOG_INFO);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shipped_allowlist),
		cmocka_unit_test(test_shipped_builds_and_modes),
		cmocka_unit_test(test_request_lists_narrow_in_c),
		cmocka_unit_test(test_cached_tables_follow_the_request),
		cmocka_unit_test(test_bad_requests_deny),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_loop_denies_within_budget),
		cmocka_unit_test(test_memory_bombs_deny),
		cmocka_unit_test(test_window_despite_garbage),
		cmocka_unit_test(test_errors_logged_with_line_rate_limited),
		cmocka_unit_test(test_policy_log),
		cmocka_unit_test(test_garbage_answers_deny),
		cmocka_unit_test(test_escape_routes_absent),
		cmocka_unit_test(test_states_isolated),
		cmocka_unit_test(test_no_finalizers),
		cmocka_unit_test(test_bad_files_refused),
		cmocka_unit_test(test_reload),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
