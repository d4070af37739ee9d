-- A store sync that kills itself (SIGKILL, no cleanup, like a power cut or
-- `kill -9`) at a chosen step, for the specs: the step is reached, not
-- waited for, so the kill lands at the same point on every run.
--   lua5.4 spec/support/kill_child.lua URL STORE.gpkg STEP [async]
-- STEP: "send" (the synchronizeReplica request is about to leave: the
-- attempt is journaled, nothing reached the server), "answer" (its answer
-- arrived, nothing of it kept yet), "commit" (inside the store's commit
-- transaction, the downloaded changes being written).
-- Prints "@STEP" before it dies; exits 3 when the step never came.
local geoservices = require "geoservices"
local helper = require "spec.helper"

local url, path, step, mode = arg[1], arg[2], arg[3], arg[4]
local st = assert(geoservices.store.open(path))
local client = geoservices.client{ url = url, token = "alice-token", timeout = 30 }

local function die()
  io.stdout:write("@", step, "\n")
  io.stdout:flush()
  os.execute("kill -9 " .. helper.own_pid())
end

client:observe(function(event)
  local sync = event.url and event.url:match("^[^?]*/synchronizeReplica$")
  if sync and step == "send" and event.type == "request" then die() end
  if sync and step == "answer" and event.type == "response" and not event.error then die() end
  return nil
end)
local result, err = st:sync(client, {
  params = { async = mode == "async" or nil }, poll_interval = 0.05, timeout = 30,
  on_fill = function() if step == "commit" then die() end end,
})
io.stdout:write(result and "ok" or ("error: " .. tostring(err)), "\n")
os.exit(3)
