--- lua-geoservices: a client for four operations of a GIS server's REST
-- interface. This façade is the only module users require.
--
--     local geoservices = require "geoservices"
--     local client = geoservices.client{ url = "https://host/server", token = "..." }
--     local services, err = client:get_services_by_id{ "id1", "id2" }
local core = require "geoservices.core"
local admin = require "geoservices.admin"
local client = require "geoservices.client"
local configure = require "geoservices.configure"
local edits = require "geoservices.edits"
local errors = require "geoservices.errors"
local json = require "geoservices.json"
local loop = require "geoservices.loop"
local pp = require "geoservices.pp"
local replica = require "geoservices.replica"
local sync = require "geoservices.sync"
local volumes = require "geoservices.volumes"

local geoservices = {
  VERSION = core.VERSION,
  null = json.null,
  json = json,
  errors = errors,
  SECURITY_QUESTIONS = configure.SECURITY_QUESTIONS,
  volumes = volumes.build,
  pp = pp, -- geoservices.pp(value): pretty-prints any result (see geoservices.pp)
}

local Client = client.Client
Client.synchronize_replica = sync.synchronize_replica
Client.sync = sync.sync
Client.resume_sync = sync.resume_sync
Client.get_services_by_id = admin.get_services_by_id
Client.list_snapshots = admin.list_snapshots
Client.configure = configure.configure
Client.configure_status = configure.status
Client.wait_configured = configure.wait_configured

--- A new edits builder (see geoservices.edits).
geoservices.edits = edits.new
geoservices.new_global_id = edits.new_global_id
--- Epoch milliseconds (UTC) of os.time() seconds or a date table.
geoservices.date = edits.date

--- Opens (or, with `init`, creates) a replica state file.
-- @string path the state file (JSON)
-- @tparam[opt] table init the fields of a new state (service, replicaID, model, replicaServerGen or layers,
--   syncDirection), used only when the file does not exist
-- @return the replica (geoservices.replica.Replica), or nil, err (kind "io" or "invalid")
-- @raise when path is not a string
function geoservices.replica(path, init)
  return replica.open(path, init)
end

--- Creates a client; see geoservices.client module for the options.
-- @tparam table opts url (required), admin_path, token (string or function), timeout, ca_file, insecure,
--   enum_prefix, ...
-- @return the client: its methods are the four operations (get_services_by_id, list_snapshots,
--   synchronize_replica / sync / resume_sync, configure / configure_status / wait_configured)
-- @raise on misuse: an unknown option, a wrong type, a missing or non-http(s) url
function geoservices.client(opts)
  return client.new(opts)
end

-- Concurrency (geoservices.loop): tasks on one thread, a host loop driving the core.
geoservices.run = loop.run            -- run(fn, ...): fn as a task, until it and its tasks end
geoservices.spawn = loop.spawn        -- spawn(fn, ...) -> task (:join(), :cancel()), inside a task
geoservices.sleep = loop.sleep        -- sleep(seconds): yields inside a task, blocks outside
geoservices.gather = loop.gather      -- gather{fn, ...} -> values, errs (in order)
geoservices.wrap = loop.wrap          -- coroutine.wrap whose operations still yield to the scheduler
geoservices.scheduler = loop.scheduler -- for a host loop: :spawn, :fds, :timeout, :action, :step
geoservices.with_timeout = loop.with_timeout -- with_timeout(seconds, fn, ...): one deadline for all inside

return geoservices
