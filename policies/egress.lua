-- egress.lua: which outside names a sandbox may reach.
--
-- You do not need to know Lua to change this file. Lines starting with
-- "--" are comments. A list is written { "a", "b" }. Save the file and
-- Airlock picks it up on the next connection; if your change has a
-- mistake, Airlock keeps using the last version that worked and says why
-- in its log and in GET /v1/info (docs/operations.md, "Policies").
--
-- Airlock asks egress(req) about every DNS query, HTTP request, TLS
-- connection and TCP connection a sandbox makes. `req` holds:
--   req.name      the name asked for, lowercase, no trailing dot
--                 ("pypi.org"); international names arrive in punycode
--   req.port      443, 80, ... (0 for a DNS query)
--   req.protocol  "dns", "http", "https" or "tcp"
--   req.method    "GET", "POST", ... (http and https requests; else nil)
--   req.path      "/simple/requests/" (http and https requests; else nil)
--   req.sandbox   the sandbox's id       req.template  its template
--   req.project   its project            req.metadata  its metadata
--                                        (req.metadata.team, ...)
--   req.mode      the sandbox's network mode: "none", "allowlist", "open"
--   req.allow     the sandbox's allow list (names, "*.example.com" ok)
--   req.deny      the sandbox's deny list
--   req.build     true when a template is being built
--
-- egress answers with  return allow("why")  or  return deny("why").
-- "why" is shown in the egress log. Anything else (an error, a loop, a
-- missing answer) denies, and the log says where it went wrong.
--
-- Whatever this file answers, Airlock then also applies, in C:
--   * mode "none" denies everything (this file is not even asked);
--   * a name on the sandbox's deny list is denied;
--   * in "allowlist" mode a sandbox's name must be on its allow list
--     (a template build may also reach the registries below).
-- So this file can only take away from a sandbox's lists, never add to
-- them, except for builds. Private addresses a public name resolves to
-- are refused by the gateway after resolution, not here.
--
-- Helpers:
--   match(name, "*.example.com")  true for a.example.com, a.b.example.com,
--                                 not example.com itself
--   match_any(name, list)         true when any pattern of list matches
--   log("text")                   a line in Airlock's log (rate-limited)

-- Package registries a template build may download from. A build's own
-- allow list (req.allow) already holds this host's package registries:
-- the builder reads them from the host (the mirrors of its apt sources,
-- or AIRLOCK_DEBIAN_MIRROR; npm's registry= or AIRLOCK_NPM_REGISTRY).
-- The names here are added for every build: the usual public ones. Add
-- a name to let builds reach it (an internal mirror, a Go proxy).
build_registries = {
  "deb.debian.org", "security.debian.org",       -- Debian packages
  "registry.npmjs.org",                          -- npm
  "pypi.org", "files.pythonhosted.org",          -- pip
  "github.com", "codeload.github.com",           -- git clones, archives
  "*.githubusercontent.com",                     -- raw files, releases
}

-- Names no sandbox reaches, even in "open" mode: they name this host or
-- its network, not the Internet.
never = {
  "localhost", "*.localhost", "*.local", "*.internal", "*.home.arpa",
  "*.lan", "metadata.google.internal",
}

-- Ports besides 443 (https) and 80 (http). A plain TCP connection is
-- allowed only to a name and port listed here, for example:
--   ["github.com"] = { 22 },       -- git over ssh
extra_ports = {
}

local function port_allowed(req)
  if req.protocol == "dns" then
    return true                      -- a lookup has no port
  end
  if req.protocol == "https" and req.port == 443 then
    return true
  end
  if req.protocol == "http" and req.port == 80 then
    return true
  end
  for pattern, ports in pairs(extra_ports) do
    if match(req.name, pattern) then
      for _, port in ipairs(ports) do
        if port == req.port then
          return true
        end
      end
    end
  end
  return false
end

function egress(req)
  if req.mode == "none" then
    return deny("network mode none")
  end
  if match_any(req.name, never) then
    return deny("a local name")
  end
  if not port_allowed(req) then
    return deny(req.protocol .. " port " .. req.port .. " not allowed")
  end
  if req.mode == "open" then
    return allow("open mode")
  end
  -- "allowlist" mode.
  if match_any(req.name, req.allow) then
    return allow("on the allow list")
  end
  if req.build and match_any(req.name, build_registries) then
    return allow("a package registry, for a template build")
  end
  return deny("not on the allow list")
end

-- Checked each time this file is loaded: a mistake that breaks these
-- keeps the last good policy in use.
function self_test()
  local base = { port = 443, protocol = "https", mode = "allowlist",
                 allow = { "example.com" }, deny = {}, metadata = {} }
  local function ask(changes)
    local req = {}
    for k, v in pairs(base) do req[k] = v end
    for k, v in pairs(changes) do req[k] = v end
    return (egress(req))
  end
  if not ask({ name = "example.com" }) then
    return false, "an allowed name is denied"
  end
  if ask({ name = "other.example" }) then
    return false, "a name off the allow list is allowed"
  end
  if ask({ name = "example.com", port = 22, protocol = "tcp" }) then
    return false, "tcp port 22 is allowed"
  end
  for _, name in ipairs({ "deb.debian.org", "registry.npmjs.org",
                          "pypi.org" }) do
    if not ask({ name = name, build = true, allow = {} }) then
      return false, "a build cannot reach " .. name
    end
  end
  if ask({ name = "other.example", build = true }) then
    return false, "a build reaches a name off every list"
  end
  if ask({ name = "localhost", mode = "open" }) then
    return false, "open mode reaches localhost"
  end
  return true
end
