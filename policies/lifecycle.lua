-- lifecycle.lua: what becomes of an idle sandbox, and its rolling
-- snapshots.
--
-- You do not need to know Lua to change this file. Lines starting with
-- "--" are comments. Save the file and Airlock picks it up within a
-- second; if your change has a mistake, Airlock keeps using the last
-- version that worked and says why in its log and in GET /v1/info.
--
-- The controller asks lifecycle(sandbox) for every running, paused and
-- suspended sandbox, every few seconds. `sandbox` holds:
--   sandbox.id        its id
--   sandbox.template  its template ("minimal")
--   sandbox.project   its project ("default")
--   sandbox.driver    "ns" (namespace jail) or "vm" (microVM)
--   sandbox.state     "running", "paused" or "suspended"
--   sandbox.metadata  the metadata it was created with (strings)
--
-- Answer a table; leave out what you do not want to change:
--   idle = { after = SECONDS, action = "suspend" | "delete" | "none" }
--     A running or paused sandbox that saw no activity for `after`
--     seconds is suspended (kept on disk, no process, no memory; resumed
--     by POST /v1/sandboxes/{id}/resume), deleted, or left alone.
--     Activity is any API call on it (exec, files, network, pause,
--     resume, snapshots, ...; not reading its status) and any event
--     stream open on it. A vm keeps its memory across the suspend; an ns
--     sandbox keeps its files only (its processes end: a resume starts
--     it afresh on them).
--     Default: { after = 6 * HOUR, action = "suspend" }.
--   snapshots = { every = SECONDS, keep = SECONDS }
--     A running sandbox gets a "rolling" snapshot when its newest
--     snapshot is older than `every` (0: none); its rolling and fork
--     snapshots older than `keep` are deleted (0: kept until deleted by
--     hand). Named snapshots, and the one a suspended sandbox resumes
--     from, are never deleted by this. Snapshots take room on the pool:
--     a shorter keep or a longer every leaves less of them.
--     Default: { every = HOUR, keep = 7 * DAY }.
--
-- A value out of range (a negative number, a string, an unknown action)
-- is logged and its default used. If this function fails (an error, a
-- loop) for a sandbox, nothing is done to that sandbox until it works:
-- no idle action, no snapshot, nothing deleted.

local MINUTE = 60
local HOUR = 60 * MINUTE
local DAY = 24 * HOUR

function lifecycle(sandbox)
  -- Example: the "ci" project's sandboxes are deleted after 30 idle
  -- minutes and never snapshotted.
  -- if sandbox.project == "ci" then
  --   return { idle = { after = 30 * MINUTE, action = "delete" },
  --            snapshots = { every = 0 } }
  -- end

  -- Example: sandboxes created with metadata keep=forever are never
  -- suspended, and their snapshots stay for 30 days.
  -- if sandbox.metadata.keep == "forever" then
  --   return { idle = { action = "none" },
  --            snapshots = { keep = 30 * DAY } }
  -- end

  return {
    idle = { after = 6 * HOUR, action = "suspend" },
    snapshots = { every = HOUR, keep = 7 * DAY },
  }
end
