-- A feature service of one point layer (the fields of spec/bench/generate_replica.lua)
-- whose createReplica answers with a result file already written (URL transport, as
-- the vendor's server does by default): the benchmark's createReplica -> store
-- source, through the emulator's HTTP layer on 127.0.0.1 (a free port, printed),
-- until killed. The emulator itself would spend its time and memory building
-- 1M features in Lua tables; the client's side is what is measured.
--   lua5.4 spec/bench/serve_replica.lua RESULT_FILE [LAYER_FILE [BLOB]]
-- LAYER_FILE: the layer's resource (JSON; spec/bench/generate_shape.lua writes one),
-- instead of the point layer of spec/bench/generate_replica.lua's fields. With BLOB,
-- every attachment URL of the result (written @ROOT@/Bench/FeatureServer/0/OID/attachments/K)
-- gets this server's address and answers BLOB's bytes.
local core = require "geoservices.core"
local httpd = require "geoservices.httpd"
local json = require "geoservices.base.json"
local fields = require "spec.bench.fields"

local path = assert(arg[1], "usage: serve_replica.lua RESULT_FILE [LAYER_FILE [BLOB]]")
local srv = assert(httpd.listen{ host = "127.0.0.1", port = 0 })
local root = ("http://127.0.0.1:%d/server"):format(srv:port())
local service = root .. "/Bench/FeatureServer"
local SR = { wkid = 4326, latestWkid = 4326 }
local LAYER = { id = 0, name = "parcels_0", type = "Feature Layer", geometryType = "esriGeometryPoint",
  spatialReference = SR, objectIdField = "OBJECTID", globalIdField = "GlobalID", hasAttachments = false,
  fields = json.array(fields.replica()), relationships = json.array() }
if arg[2] then
  local f = assert(io.open(arg[2], "rb"))
  LAYER = json.decode(f:read("a"))
  f:close()
end
local SERVICE = { currentVersion = 11.1, serviceDescription = "benchmark", syncEnabled = true,
  capabilities = "Query,Sync", spatialReference = SR,
  syncCapabilities = { supportsAsync = true, supportsPerReplicaSync = true, supportsPerLayerSync = true,
    supportsSyncModelNone = true, supportsRollbackOnFailure = true, supportsAttachmentsSyncDirection = true },
  layers = json.array{ { id = 0, name = LAYER.name, geometryType = LAYER.geometryType } }, tables = json.array() }

local function answer(body)
  return { status = 200, headers = { ["Content-Type"] = "application/json" }, body = json.encode(body) }
end

local ROUTES = {
  ["/Bench/FeatureServer"] = function() return answer(SERVICE) end,
  ["/Bench/FeatureServer/0"] = function() return answer(LAYER) end,
  ["/Bench/FeatureServer/layers"] = function() return answer{ layers = json.array{ LAYER }, tables = json.array() } end,
  ["/Bench/FeatureServer/replicas"] = function() return answer(json.array()) end,
  ["/Bench/FeatureServer/createReplica"] = function()
    return answer{ transportType = "esriTransportTypeUrl", responseUrl = service .. "/replicafiles/result.json" }
  end,
  ["/Bench/FeatureServer/replicafiles/result.json"] = function()
    return { status = 200, headers = { ["Content-Type"] = "application/json" }, file = path }
  end,
}

if arg[3] then -- the result with this server's address in its attachment URLs, beside it
  local served = path .. ".served"
  local from, to = assert(io.open(path, "rb")), assert(io.open(served, "wb"))
  for line in from:lines("L") do to:write((line:gsub("@ROOT@", root))) end
  from:close()
  to:close()
  path = served
end

-- SERVE_ATTACHMENT_DELAY_MS: each attachment is answered that much later (a
-- slower phase for a spec that must act inside it); each one served prints
-- "attachment served T" (T: geoservices.core.monotonic, the clock of
-- spec/support/pty_ctrl_c.py's ctrl_c_at)
local ATTACHMENT_DELAY = (tonumber(os.getenv("SERVE_ATTACHMENT_DELAY_MS")) or 0) / 1000

local function sleep(seconds)
  local until_t = core.monotonic() + seconds
  local drv = core.driver()
  while core.monotonic() < until_t do drv:step(math.max(1, math.floor((until_t - core.monotonic()) * 1000))) end
  drv:close()
end

io.stdout:write("serving on ", root, "\n")
io.stdout:flush()
while true do
  for _, ex in ipairs(srv:step(100)) do
    local request = ex:request()
    local route = ROUTES[(request.path:gsub("^/server", ""))]
    if not route and arg[3] and request.path:match("/FeatureServer/0/%d+/attachments/%d+$") then
      route = function()
        if ATTACHMENT_DELAY > 0 then sleep(ATTACHMENT_DELAY) end
        io.stdout:write(("attachment served %.6f\n"):format(core.monotonic()))
        io.stdout:flush()
        return { status = 200, headers = { ["Content-Type"] = "image/jpeg" }, file = arg[3] }
      end
    end
    if route then
      assert(ex:respond(route(request)))
    else
      io.stderr:write("serve_replica: no route for ", request.method or "?", " ", request.path, "\n")
      assert(ex:respond{ status = 404, headers = {}, body = "not found" })
    end
  end
end
