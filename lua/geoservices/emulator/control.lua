--- The emulator's control routes, `/_emulator/...`: for tests and users, not
-- part of the interface.
--
-- * GET health, requests (counts per operation), state (features, replicas,
--   applied changes, jobs, result files, requests the gateway holds), changelog?service=NAME (every edit attempt of
--   a service's change log, refused ones included);
-- * POST reset (back to the data file and the start-up settings), settings
--   ({name = value}, JSON null = the default; emulator.settings), configure
--   (the organization's stage timing and failures), faults, faults/clear,
--   race (another replica's edits synchronized right before the next
--   request of a route: emulator.race);
-- * echo (what a request carried, summarised).
local answers = require "geoservices.emulator.answers"
local json = require "geoservices.base.json"
local jobs = require "geoservices.emulator.jobs"
local race = require "geoservices.emulator.race"
local settings = require "geoservices.emulator.settings"

local control = {}

local json_response = answers.json

local function bad_request(message)
  return json_response(400, { error = { code = 400, message = tostring(message) } })
end

-- A summary of the feature services for tests: generation, live features per
-- layer (GlobalID -> attributes), the replicas and the applied changes.
local function feature_state(w)
  local out = json.object()
  for name, svc in pairs(w.feature_services) do
    local layers = json.object()
    for id, layer in pairs(svc.layers) do
      local features = json.object()
      for gid, f in pairs(layer.features) do
        if not f.deleted then features[gid] = { attributes = json.object(f.attributes), geometry = f.geometry } end
      end
      local attachments = json.object()
      for gid, a in pairs(layer.attachments) do
        if not a.deleted then attachments[gid] = { parentGlobalId = a.parentGlobalId, name = a.name } end
      end
      layers[tostring(id)] = { features = features, attachments = attachments }
    end
    local reps = json.object()
    for rid, r in pairs(svc.replicas) do reps[rid] = { closed = r.closed == true, model = r.model, gen = r.gen } end
    local log = json.array()
    for _, e in ipairs(svc.log) do
      if not e.refused then
        log[#log + 1] = { gen = e.gen, layer = e.layer, target = e.target, globalId = e.globalId, op = e.op,
                          origin = e.origin }
      end
    end
    out[name] = { gen = svc.gen, layers = layers, replicas = reps, log = log }
  end
  return out
end

-- The async jobs for tests: status, and whether the edits were imported and
-- the result exported.
local function job_state(all)
  local out = json.object()
  for id, job in pairs(all.by_id) do
    out[id] = { status = (jobs.status(job)), imported = job.imported == true, exported = job.exported == true,
                service = job.service }
  end
  return out
end

local function query_param(query, name)
  for pair in (query or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    if k == name then
      return (v:gsub("%+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
    end
  end
  return nil
end

--- The change log of one service: every edit attempt in order, with the
-- generation it made (refused ones: the generation the server stayed at),
-- what an add or update sent, and `refused = true, code =` for an edit the
-- server refused (`rolled_back = true` for one applied, then undone with its
-- request; `cascade = true` for an attachment deleted with its feature);
-- `arrived`: when its request reached the server, `at`: when it was applied
-- (the monotonic clock, seconds; a gateway or a job runs a request late).
function control.changelog(emu, service_name)
  local svc = emu.world.feature_services[service_name or ""]
  if not svc then return nil end
  local entries = json.array()
  for i, e in ipairs(svc.log) do
    entries[i] = { gen = e.gen, layer = e.layer, target = e.target, op = e.op, globalId = e.globalId,
                   origin = e.origin, attributes = e.attributes, refused = e.refused or nil, code = e.code,
                   rolled_back = e.rolled_back, cascade = e.cascade, arrived = e.arrived, at = e.at }
  end
  return { gen = svc.gen, entries = entries }
end

local function set(emu, body)
  local changes, msg = json.decode(body)
  if type(changes) ~= "table" then return bad_request(msg or "a JSON object is expected") end
  local checked = {} -- {name, value}: a default may be nil (job_outcome, supports_async...)
  for name, value in pairs(changes) do
    if value == json.null then value = nil end
    local v, err = settings.check(name, value)
    if err then return bad_request(err) end
    checked[#checked + 1] = { name, v }
  end
  for _, c in ipairs(checked) do emu.settings[c[1]] = c[2] end
  return json_response(200, { ok = true })
end

--- Answers a control route: returns the response.
function control.handle(emu, path, request, exchange)
  if path == "/_emulator/health" then
    return json_response(200, { ok = true })
  elseif path == "/_emulator/requests" then
    return json_response(200, { total = emu.total, counts = json.object(emu.attempts) })
  elseif path == "/_emulator/reset" then
    emu:reset()
    return json_response(200, { ok = true })
  elseif path == "/_emulator/state" then
    return json_response(200, { featureServices = feature_state(emu.world), jobs = job_state(emu.jobs),
                                resultFiles = emu:count_results(), held = #emu.held })
  elseif path == "/_emulator/changelog" then
    local name = query_param(request.query, "service")
    local log = control.changelog(emu, name)
    if not log then return json_response(404, { error = { code = 404, message = "no service " .. tostring(name) } }) end
    return json_response(200, log)
  elseif path == "/_emulator/settings" then
    if request.method == "POST" then return set(emu, request.body) end
    return json_response(200, json.object(settings.copy(emu.settings)))
  elseif path == "/_emulator/configure" then
    -- POST {stage_seconds =, fail = "<stage>", fail_message =, stall = "<stage>"}:
    -- stage timing, and a stage that fails or never finishes; GET: the settings.
    if request.method == "POST" then
      local body = json.decode(request.body)
      local ok, msg = emu.organization:control(type(body) == "table" and body or {})
      if not ok then return bad_request(msg) end
    end
    return json_response(200, emu.organization:settings())
  elseif path == "/_emulator/echo" then
    return json_response(200, emu:echo(request, exchange))
  elseif path == "/_emulator/race" and request.method == "POST" then
    local spec, msg = json.decode(request.body)
    if not spec then return bad_request("invalid JSON: " .. tostring(msg)) end
    local ok, err = race.add(emu, spec)
    if not ok then return bad_request(err) end
    return json_response(200, { ok = true })
  elseif path == "/_emulator/faults/clear" then
    emu.faults:clear() -- the faults only; state and counts stay
    return json_response(200, { ok = true })
  elseif path == "/_emulator/faults" and request.method == "POST" then
    local fault, msg = json.decode(request.body)
    if not fault then return bad_request("invalid JSON: " .. tostring(msg)) end
    local ok, err = emu.faults:add(fault)
    if not ok then return bad_request(err) end
    return json_response(200, { ok = true })
  end
  return nil
end

return control
