-- credentials.lua: may this request carry this credential?
--
-- You do not need to know Lua to change this file. Lines starting with
-- "--" are comments. Save the file and Airlock picks it up on the next
-- connection (within a second on connections already open); if your
-- change has a mistake, Airlock keeps using the last version that worked
-- and says why in its log.
--
-- The gateway asks credentials(req) once for each credential a request
-- to one of that credential's own hosts would carry: as the header the
-- credential sets ("form" is "header"), or because the request names it
-- by a placeholder such as airlock-cred:github ("form" is "placeholder").
-- `req` holds:
--   req.credential  the credential's name ("github")
--   req.form        "header" or "placeholder"
--   req.scope       where it was defined: "global", "project", "template",
--                   "metadata" or "sandbox"
--   req.host        the request's host, lowercase ("api.github.com")
--   req.port        443 or 80
--   req.method      "GET", "POST", ...
--   req.path        "/repos/a/b/pulls?state=open"
--   req.sandbox     the sandbox's id       req.template  its template
--   req.project     its project            req.metadata  its metadata
--
-- Answer  return allow("why")  to inject it, or  return deny("why")  not
-- to. Anything else (an error, a loop, false, a missing answer) means not
-- injected. A request that named the credential by a placeholder is then
-- refused by the gateway (403), one that would only have got the header
-- goes out without it. Either way the decision is audited.
--
-- Whatever this file answers, the gateway never puts a credential into a
-- request to a host that is not in the credential's own host list: this
-- file can only take away.
--
-- Helpers: match(name, "*.example.com"), match_any(name, list) as in
-- egress.lua.

function credentials(req)
  -- Example: read-only GitHub for the "ci" project's sandboxes.
  -- if req.credential == "github" and req.project == "ci" and
  --    req.method ~= "GET" and req.method ~= "HEAD" then
  --   return deny("github is read-only for project ci")
  -- end

  -- Example: only sandboxes with metadata team=ml may use "openai".
  -- if req.credential == "openai" and req.metadata.team ~= "ml" then
  --   return deny("openai is for team ml")
  -- end

  return allow("credential applies")
end
