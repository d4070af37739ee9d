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
function geoservices.replica(path, init)
  return replica.open(path, init)
end

--- Creates a client; see geoservices.client module for the options.
function geoservices.client(opts)
  return client.new(opts)
end

return geoservices
