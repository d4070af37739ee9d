--- lua-geoservices: a client for four operations of a GIS server's REST
-- interface. This façade is the only module users require.
--
--     local geoservices = require "geoservices"
--     local client = geoservices.client{ url = "https://host/server", token = "..." }
--     local services, err = client:get_services_by_id{ "id1", "id2" }
local core = require "geoservices.core"
local admin = require "geoservices.admin"
local client = require "geoservices.client"
local errors = require "geoservices.errors"
local json = require "geoservices.json"

local geoservices = {
  VERSION = core.VERSION,
  null = json.null,
  json = json,
  errors = errors,
}

local Client = client.Client
Client.get_services_by_id = admin.get_services_by_id
Client.list_snapshots = admin.list_snapshots

--- Creates a client; see geoservices.client module for the options.
function geoservices.client(opts)
  return client.new(opts)
end

return geoservices
