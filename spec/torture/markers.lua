-- Phase markers of a torture child (spec/support/sync_child.lua,
-- store_child.lua): with TORTURE_MARKERS=1 in its environment the child
-- prints one line "@<marker>" to standard output, flushed, at each step of
-- its synchronization, so the torture can kill it in a chosen phase. The
-- steps are seen through the library's own hooks: the client's request
-- observer (client:observe: "request", "progress", "response" events) and
-- the store's on_fill. TORTURE_PAUSE=<marker> makes the child stop for
-- TORTURE_PAUSE_SECONDS (0.4) the first time it prints that marker, so a
-- phase that lasts microseconds (before the request leaves, inside the
-- commit) lasts long enough to be hit.
--
-- Markers: send (the synchronizeReplica request is about to leave; the
-- journal is written), sent (it left: the server imports), answered (its
-- answer arrived), poll / polled (a job status request and its answer),
-- download / receiving / downloaded (the result file, or the embedded
-- answer's body), verify / verified (a query of the layer: an unknown
-- outcome being read), failed (a request failed: no answer), commit (the store's transaction, or client:sync
-- about to write its state), done (the sync returned).
local core = require "geoservices.core"

local M = {}

local enabled = os.getenv("TORTURE_MARKERS") == "1"
local pause_at = os.getenv("TORTURE_PAUSE")
local pause_seconds = tonumber(os.getenv("TORTURE_PAUSE_SECONDS")) or 0.4
local paused = false

local function sleep(seconds)
  local drv = core.driver() -- a driver of its own: the client's stays untouched
  local deadline = core.monotonic() + seconds
  while core.monotonic() < deadline do drv:step(math.max(1, math.floor((deadline - core.monotonic()) * 1000))) end
  drv:close()
end

--- Prints a marker (and pauses there when it is the chosen one).
function M.mark(name)
  if not enabled then return end
  io.stdout:write("@", name, "\n")
  io.stdout:flush()
  if name == pause_at and not paused then
    paused = true
    sleep(pause_seconds)
  end
end

local function kind_of(url)
  local path = url:match("^[^?]*")
  if path:match("/synchronizeReplica$") then return "sync" end
  if path:match("/jobs/[^/]+$") then return "job" end
  if path:match("/replicafiles/") then return "file" end
  if path:match("/query$") then return "query" end
  return nil
end

--- Watches a client's requests. `commit_after_body`: client:sync, whose
-- commit (the state write) follows the last body; the store marks its own
-- commit through on_fill.
function M.watch(client, opts)
  if not enabled then return end
  opts = opts or {}
  local receiving = {}
  client:observe(function(event)
    local kind = event.url and kind_of(event.url)
    if not kind then return nil end
    if event.type == "request" then
      if kind == "sync" then
        M.mark("send")
        M.mark("sent") -- the observer returns and the request leaves
      elseif kind == "job" then M.mark("poll")
      elseif kind == "file" then M.mark("download")
      else M.mark("verify") end
      receiving[event.url] = nil
    elseif event.type == "progress" then
      if (kind == "file" or (kind == "sync" and opts.embedded)) and (event.received or 0) > 0
        and not receiving[event.url] then
        receiving[event.url] = true
        M.mark("receiving")
      end
    elseif event.type == "response" and event.error then
      M.mark("failed") -- the phase goes on: an answer lost, a retry or a resolution follows
    elseif event.type == "response" then
      if kind == "sync" then M.mark("answered")
      elseif kind == "job" then M.mark("polled")
      elseif kind == "file" then M.mark("downloaded")
      else M.mark("verified") end
      local body_done = kind == "file" or (kind == "sync" and opts.embedded and event.status == 200)
      if opts.commit_after_body and body_done then M.mark("commit") end
    end
    return nil
  end)
end

--- The store's on_fill: the downloaded changes are being written, inside the
-- store's transaction.
function M.on_fill()
  if not enabled then return nil end
  return function() M.mark("commit") end
end

return M
