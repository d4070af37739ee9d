--- What the engine specs (spec/engine_*_spec.lua, issue 34) share: a
-- server in a capability set (the emulator with its settings, or the
-- documented-server double, spec/support/documented_server.py, with its
-- own), and the two ways a crew syncs, driven alike: the store
-- (geoservices.store, st:sync) and client:sync with a replica state file.
-- What a spec asserts is what a user sees and what the server's own change
-- log shows: each edit applied once, only real rejections in failed().
local busted = require "busted"
local core = require "geoservices.core"
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local transport = require "geoservices.net.transport"

local q = helper.shell_quote

local M = {}

-- the Parcels features of examples/data/world.json
-- The late window of the crew's syncs unless a spec gives one: 0, a server whose work ends with its
-- answer (the edits of a lost answer are held one sync, then sent again if the server does not show
-- them). The library's default (geoservices.sync.attempt.LATE_WINDOW, the vendor's server's limits:
-- 660 s) is the subject of spec/engine/late_window_spec.lua.
M.LATE_WINDOW = 0

M.E01 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
M.E02 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
M.E03 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E03}"
M.SYNC_TIMEOUT = 30
M.OTHER_CREW = "another crew"

local function norm(gid)
  if type(gid) ~= "string" then return gid end
  return "{" .. gid:gsub("[{}]", ""):upper() .. "}"
end
M.norm = norm

local function perform(driver, spec)
  spec.timeout_ms = spec.timeout_ms or 10000
  local resp = assert(transport.perform(driver, spec))
  return resp.status, json.decode(resp.body), resp
end

local function form_body(fields)
  local parts = {}
  for k, v in pairs(fields) do parts[#parts + 1] = core.urlencode(k) .. "=" .. core.urlencode(v) end
  table.sort(parts)
  return table.concat(parts, "&")
end

-- ------------------------------------------------------------------ the emulator

local Emu = {}
Emu.__index = Emu

-- The replicas of the example world another crew edits through (a sync of its own).
local CREW2 = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}" -- perReplica
local OFFICE = "{5E1A0C2B-3333-4A5B-9C8D-000000000003}" -- perLayer, layers 0 and 1

--- A client of `server` for the crew's syncs: the server's token and the
-- sync's timeout; `quick_retry`: three attempts 10 ms apart where a request
-- may be repeated (the specs that reset or drop a request).
function M.client(server, quick_retry)
  return geoservices.client{ url = server.url, token = server.token, timeout = M.SYNC_TIMEOUT,
                             retry = quick_retry and { attempts = 3, base_delay = 0.01 } or nil }
end

--- An emulator in the capability set `settings` (emulator.settings names).
function M.emulator(settings)
  local emu = helper.start_emulator()
  local self = setmetatable({ kind = "emulator", emu = emu, url = emu.url, token = "alice-token",
                              settings = settings or {} }, Emu)
  if next(self.settings) then emu:control("settings", self.settings) end
  return self
end

function Emu:set(settings)
  for k, v in pairs(settings) do self.settings[k] = v end
  return self.emu:control("settings", settings)
end

function Emu:stop() self.emu:stop() end

--- Back to the data file, the capability set kept, once the requests the gateway holds and the
-- jobs have run: for a spec that begins its crew again on the same server (a scenario whose window
-- a stalled machine closed: helper.within_window).
function Emu:reset()
  M.wait_ran(self, "the server's held requests and jobs")
  self.emu:reset()
  if next(self.settings) then self.emu:control("settings", self.settings) end
end

function Emu:state() return self.emu:control("state") end

-- Another crew's edit, by a sync of a replica of its own that the capability set allows (the
-- gateway is set aside for it: the crew's sync is answered).
function Emu:crew_edit(features)
  local current = self.emu:control("settings")
  local saved = { gateway = current.gateway }
  self.emu:control("settings", { gateway = "off" })
  local svc = self:state().featureServices.Parcels
  local per_replica = current.supports_per_replica_sync ~= false
  local fields = { f = "json", replicaID = per_replica and CREW2 or OFFICE,
                   transportType = "esriTransportTypeEmbedded", syncDirection = "bidirectional",
                   edits = json.encode{ { id = 0, features = features } } }
  if per_replica then
    fields.replicaServerGen = tostring(svc.gen)
  else
    fields.syncLayers = json.encode{ { id = 0, serverGen = svc.gen }, { id = 1, serverGen = svc.gen } }
  end
  local _, body = perform(self.emu.driver, { url = self.url .. "/Parcels/FeatureServer/synchronizeReplica",
    method = "POST", body = form_body(fields), content_type = "application/x-www-form-urlencoded" })
  self.emu:control("settings", saved)
  assert(body and not body.error, "the other crew's edit failed: " .. json.encode(body))
  for _, e in ipairs(self.emu:control("changelog?service=Parcels").entries) do
    if e.origin == CREW2 or e.origin == OFFICE then self.crew_origin = e.origin end
  end
end

function Emu:crew_update(gid, attributes)
  attributes.GlobalID = gid
  self:crew_edit{ updates = { { attributes = attributes } } }
end

function Emu:crew_delete(gid) self:crew_edit{ deleteIds = { gid } } end

--- Another crew deletes `gid` right before the next synchronizeReplica runs (after what a client
-- read before sending it): POST /_emulator/race.
function Emu:crew_delete_before_next_sync(gid)
  local per_replica = self.emu:control("settings").supports_per_replica_sync ~= false
  self.emu:control("race", { service = "Parcels", replicaID = per_replica and CREW2 or OFFICE,
                             edits = { { id = 0, features = { deleteIds = { gid } } } } })
end

--- The change log: {op, globalId, origin, refused, rolled_back, attributes}.
function Emu:entries()
  local out = {}
  for _, e in ipairs(self.emu:control("changelog?service=Parcels").entries) do
    if e.target == "features" then
      out[#out + 1] = { op = e.op, globalId = norm(e.globalId), origin = e.origin, refused = e.refused,
                        rolled_back = e.rolled_back, attributes = e.attributes }
    end
  end
  return out
end

--- The server's feature (its attributes), nil when absent or deleted.
function Emu:feature(gid)
  local f = self:state().featureServices.Parcels.layers["0"].features[norm(gid)]
  return f and f.attributes
end

--- How many requests the gateway answered are still to run, plus the jobs still running.
function Emu:held()
  local s, n = self:state(), 0
  local ended = { Completed = true, Failed = true, CompletedWithErrors = true }
  for _, j in pairs(s.jobs) do
    if not ended[j.status] then n = n + 1 end
  end
  return s.held + n
end

--- A gateway in front of the server: mode "504" or "drop", the server running each request
-- delay_ms later; nil: none.
function Emu:gateway(mode, delay_ms)
  self:set{ gateway = mode or "off", gateway_delay_ms = delay_ms or 2000 }
end

--- The synchronizeReplica requests received.
function Emu:sync_requests() return self.emu:count("synchronizeReplica") end

--- The synchronizeReplica requests numbered `attempts` (counted since the server began; default:
-- the next one) reset before the server reads them: lost, never run.
function Emu:lose_requests(attempts)
  assert(self.emu:control("faults", { route = "synchronizeReplica", kind = "reset", phase = "before",
                                      attempts = attempts or { self:sync_requests() + 1 } }))
end

-- ------------------------------------------------------------------ the documented double

local Doc = {}
Doc.__index = Doc

--- The documented-server double (spec/support/documented_server.py) with `settings` (its knobs).
function M.documented(settings)
  local dir = helper.tmp_dir()
  local token = "crew-a-token"
  helper.write_file(dir .. "/config.json", json.encode{ data = "examples/data/world.json", service = "Parcels",
    token = token, settings = settings or json.object() })
  local cmd = (helper.PYTHON .. " spec/support/documented_server.py %s %s --exit-with %d"
    .. " > %s 2>&1 & echo $! > %s"):format(
    q(dir .. "/config.json"), q(dir .. "/log.jsonl"), helper.own_pid(), q(dir .. "/out"), q(dir .. "/pid"))
  assert(os.execute(cmd))
  local pid = helper.wait_for("documented server pid", function()
    return tonumber(helper.read_all(dir .. "/pid"))
  end, 5)
  local root = helper.wait_for("documented server start-up line", function()
    local text = helper.read_all(dir .. "/out") or ""
    if not helper.process_alive(pid) then error("documented server exited: " .. text) end
    return text:match("listening on (http://127%.0%.0%.1:%d+)")
  end, 10)
  return setmetatable({ kind = "documented", root = root, url = root .. "/arcgis/rest/services", pid = pid,
                        dir = dir, token = token, driver = core.driver() }, Doc)
end

function Doc:control(path, body)
  local spec = { url = self.root .. "/_control/" .. path }
  if body then spec.method, spec.body, spec.content_type = "POST", json.encode(body), "application/json" end
  local status, doc, resp = perform(self.driver, spec)
  assert(status == 200, "control " .. path .. ": HTTP " .. status .. " " .. resp.body)
  return doc
end

function Doc:set(settings) return self:control("settings", settings) end

-- DOCUMENTED_SERVER_LOGS=<dir>: each server's request log is kept there as <n>-<name>.jsonl.
local kept = 0
function Doc:stop(name)
  if not self.pid then return end
  local keep = os.getenv("DOCUMENTED_SERVER_LOGS")
  if keep then
    kept = kept + 1
    os.execute(("cp %s %s"):format(q(self.dir .. "/log.jsonl"),
      q(("%s/%02d-%s.jsonl"):format(keep, kept, (name or "server"):gsub("[^%w]+", "-")))))
  end
  os.execute("kill " .. self.pid .. " 2>/dev/null")
  helper.wait_for("documented server to exit", function() return not helper.process_alive(self.pid) end, 5)
  self.pid = nil
  self.driver:close()
  os.execute("rm -rf " .. q(self.dir))
end

function Doc:crew_update(gid, attributes)
  attributes.GlobalID = gid
  local r = self:control("edit", { layer = 0, op = "update", feature = { attributes = attributes },
                                   origin = M.OTHER_CREW })
  assert(#r.failed == 0, "the other crew's update failed")
end

function Doc:crew_delete(gid)
  local r = self:control("edit", { layer = 0, op = "delete", globalId = gid, origin = M.OTHER_CREW })
  assert(#r.failed == 0, "the other crew's delete failed")
end

function Doc:crew_delete_before_next_sync(gid)
  self:set{ race = { origin = M.OTHER_CREW, edits = { { id = 0, features = { deleteIds = { gid } } } } } }
end

function Doc:entries()
  local out = {}
  for _, e in ipairs(self:control("changelog").entries) do
    out[#out + 1] = { op = e.op, globalId = norm(e.globalId), origin = e.origin, refused = e.refused,
                      rolled_back = e.rolled_back, attributes = e.attributes }
  end
  return out
end

function Doc:feature(gid)
  local rec = self:control("feature?layer=0&globalId=" .. core.urlencode(norm(gid))).feature
  if type(rec) ~= "table" or rec.deleted then return nil end
  return rec.attributes
end

function Doc:held()
  local n = self:control("held").held
  for _, j in ipairs(self:control("jobs").jobs) do
    if j.status ~= "Completed" and j.status ~= "Failed" and j.status ~= "CompletedWithErrors" then n = n + 1 end
  end
  return n
end

function Doc:gateway(mode, delay_ms)
  self:set{ gateway = mode and { mode = mode, delay_s = (delay_ms or 2000) / 1000 } or json.null }
end

--- Every request it received, in order: {conn, nth (its number on that connection), method, path,
-- headers, form, answer (HTTP status, or "drop"/"reset"), error (an error body's code), status (a
-- job's)}.
function Doc:requests()
  local list = {}
  for line in (helper.read_all(self.dir .. "/log.jsonl") or ""):gmatch("[^\n]+") do
    list[#list + 1] = json.decode(line)
  end
  return list
end

function Doc:sync_requests()
  local n = 0
  for _, r in ipairs(self:requests()) do
    if r and r.path:match("/synchronizeReplica$") then n = n + 1 end
  end
  return n
end

--- A server and a scratch directory for each test of the describe it is
-- called in: before each, `start()` when it is a function (the server it
-- gives), else the emulator in the capability set `start` (settings, or
-- none), and a new directory, handed to `take(server, dir)`; after each,
-- the server stopped and the directory removed.
-- @tparam function take called with the server and the directory before each test
-- @param[opt] start a function giving the server, or the emulator's settings
function M.each_test(take, start)
  local server, dir
  busted.before_each(function()
    if type(start) == "function" then server = start() else server = M.emulator(start) end
    dir = helper.tmp_dir()
    take(server, dir)
  end)
  busted.after_each(function()
    server:stop()
    os.execute("rm -rf " .. q(dir))
  end)
end

--- For the tests of the describe it is called in that begin their crew
-- themselves: `begin(set)` starts the server (`start(set)`), a scratch
-- directory, a client and the crew's way (`make_way(server, client, dir,
-- model)`, the model `set.model`, else perReplica) and returns the server,
-- the way and the directory; after each test, what it began is closed,
-- stopped and removed.
-- @tparam function start gives the server (given `set`)
-- @tparam function make_way a way's maker (@{WAYS})
-- @treturn function begin
function M.each_crew(start, make_way)
  local server, way, dir
  busted.after_each(function()
    if way then way.close() end
    if server then server:stop() end
    os.execute("rm -rf " .. q(dir or "/nonexistent"))
    way, server, dir = nil, nil, nil
  end)
  return function(set)
    server = start(set)
    dir = helper.tmp_dir()
    way = make_way(server, M.client(server), dir, set and set.model or "perReplica")
    return server, way, dir
  end
end

--- The synchronizeReplica POSTs of the double that carried at least one edit.
function M.edit_posts(server)
  local list = {}
  for _, r in ipairs(server:requests()) do
    local edits = r.method == "POST" and r.path:match("/synchronizeReplica$") and r.form.edits
      and json.decode(r.form.edits)
    for _, layer in ipairs(type(edits) == "table" and edits or {}) do
      local f = layer.features or {}
      if #(f.adds or {}) + #(f.updates or {}) + #(f.deleteIds or {}) > 0 then
        list[#list + 1] = r
        break
      end
    end
  end
  return list
end

-- ------------------------------------------------------------------ the two ways a crew syncs

local function create_params(model)
  return { service = "Parcels", layers = { 0 }, replicaName = "crew-a", syncModel = model or "perReplica" }
end

--- The store: a replica created into dir/crew-a.gpkg (syncModel `model`).
function M.store_way(_, client, dir, model)
  local st = assert(geoservices.store.create(client, dir .. "/crew-a.gpkg", create_params(model),
    { poll_interval = 0.05, timeout = M.SYNC_TIMEOUT }))
  local way = { name = "store", origin = st:replica().replicaID, st = st }
  function way.add(attributes)
    return assert(st:add(0, { attributes = attributes, geometry = { x = -117.2, y = 34.1 } }))
  end
  function way.update(gid, attributes)
    attributes.GlobalID = gid
    assert(st:update(0, { attributes = attributes }))
  end
  function way.delete(gid) assert(st:delete(0, gid)) end
  -- opts: params (synchronizeReplica's: async...), direction ("upload"...)
  function way.sync(opts)
    local o = { poll_interval = 0.05, timeout = M.SYNC_TIMEOUT, lock_timeout = M.SYNC_TIMEOUT,
                late_window = M.LATE_WINDOW }
    for k, v in pairs(opts or {}) do o[k] = v end
    if o.late_window == "default" then o.late_window = nil end -- the library's
    return st:sync(client, o)
  end
  function way.pending() return #assert(st:pending()) end
  local function listed(list)
    local out = {}
    for _, f in ipairs(list) do
      out[#out + 1] = { op = f.op, globalId = norm(f.globalId), message = f.message or f.error or f.reason,
                        outcome = f.outcome, server = f.server }
    end
    return out
  end
  function way.failed() return listed(assert(st:failed())) end
  function way.conflicts() return listed(assert(st:conflicts())) end
  function way.value(gid, field)
    local f = st:get(0, gid)
    return f and f.attributes[field]
  end
  function way.exists(gid) return st:get(0, gid) ~= nil end
  function way.close() st:close() end
  return way
end

--- client:sync with a replica state file dir/crew-a.json, created by createReplica (or, with
-- `registered`, registered on the documented double through its control route, perReplica: no
-- createReplica request in its log). The crew's edits are handed to the next sync and then held by
-- its journal; what it knows of the data is what createReplica and the syncs downloaded: the
-- results' `edits`, or with `how.on_change` what the syncs hand to on_change (then there is no
-- `result.edits`). Each conflict it was told of keeps its `outcome` and `server` values.
function M.state_way(server, client, dir, model, registered, how)
  how = how or {}
  local path = dir .. "/crew-a.json"
  local created
  if registered then
    created = server:control("replica", { name = "crew-a" })
    assert(geoservices.replica(path, { service = "Parcels", replicaID = created.replicaID, model = "perReplica",
      replicaServerGen = created.gen, syncDirection = "bidirectional" }))
  else
    created = assert(client:create_replica("Parcels", { layers = { 0 }, replicaName = "crew-a",
      syncModel = model or "perReplica", transportType = "esriTransportTypeEmbedded" },
      { poll_interval = 0.05, timeout = M.SYNC_TIMEOUT }))
    assert(geoservices.replica(path, created:replica_state()))
  end
  local known, failed, conflicts = {}, {}, {}
  for _, gid in ipairs{ M.E01, M.E02, M.E03 } do known[gid] = {} end -- the features the specs touch
  local queued = geoservices.edits()
  local way = { name = how.on_change and "state file, on_change" or "state file", origin = created.replicaID,
                path = path }
  local function change(_, kind, record)
    if kind == "delete" then
      known[norm(type(record) == "table" and (record.globalId or record.GlobalID) or record)] = nil
    elseif (kind == "add" or kind == "update") and type(record) == "table" then
      known[norm(record.attributes.GlobalID)] = record.attributes
    end
  end
  local function absorb(result)
    if type(result) ~= "table" then return end
    for _, f in ipairs(result.failed_edits or {}) do
      failed[#failed + 1] = { op = f.op, globalId = norm(f.globalId), message = f.description or f.message }
    end
    for _, c in ipairs(result.conflicts or {}) do
      conflicts[#conflicts + 1] = { op = c.op, globalId = norm(c.globalId), outcome = c.outcome, server = c.server,
                                    message = c.description }
    end
    for _, layer in ipairs(result.edits or {}) do
      local f = layer.features or {}
      for _, kind in ipairs{ "adds", "updates", "deleteIds" } do
        for _, record in ipairs(f[kind] or {}) do
          change(layer.id, kind == "deleteIds" and "delete" or "update", record)
        end
      end
    end
    absorb(result.resolved)
  end
  function way.add(attributes)
    local gid = queued:add(0, { attributes = attributes, geometry = { x = -117.2, y = 34.1 } })
    known[norm(gid)] = attributes
    return gid
  end
  function way.update(gid, attributes)
    attributes.GlobalID = gid
    queued:update(0, { attributes = attributes })
    for k, v in pairs(attributes) do (known[norm(gid)] or {})[k] = v end
  end
  function way.delete(gid)
    queued:delete(0, gid)
    known[norm(gid)] = nil
  end
  -- opts: params (synchronizeReplica's), direction ("upload": params.syncDirection)
  function way.sync(opts)
    local o = { poll_interval = 0.05, timeout = M.SYNC_TIMEOUT, lock_timeout = M.SYNC_TIMEOUT, params = {},
                late_window = M.LATE_WINDOW }
    for k, v in pairs(opts or {}) do
      if k == "direction" then o.params.syncDirection = v elseif k == "params" then
        for pk, pv in pairs(v) do o.params[pk] = pv end
      else o[k] = v end
    end
    if o.late_window == "default" then o.late_window = nil end -- the library's
    if how.on_change then o.on_change = change end
    local edits = queued
    queued = geoservices.edits() -- handed over once: after that the journal holds them
    local result, err = client:sync(path, edits, o)
    absorb(result)
    if err then
      absorb(err.result or { failed_edits = err.failed_edits, conflicts = err.conflicts })
      -- a failure after the earlier attempt was read: what the read found (err.resolved), an update
      -- applied late over another crew's values among it (`late`: the feature as the server holds it)
      local found = type(err.resolved) == "table" and err.resolved or {}
      absorb{ failed_edits = found.failed_edits, conflicts = found.conflicts }
      for _, k in ipairs(type(found.late) == "table" and found.late or {}) do
        conflicts[#conflicts + 1] = { op = k.op, globalId = norm(k.globalId), outcome = k.outcome, server = k.server,
                                      message = k.description }
        if not how.on_change and type(k.feature) == "table" then change(k.layer, "update", k.feature) end
      end
    end
    return result, err
  end
  function way.pending() return helper.read_all(path .. ".journal") and 1 or 0 end
  function way.failed() return failed end
  function way.conflicts() return conflicts end
  function way.value(gid, field) return known[norm(gid)] and known[norm(gid)][field] end
  function way.exists(gid) return known[norm(gid)] ~= nil end
  function way.close() end
  return way
end

M.WAYS = { { "store", M.store_way }, { "state file", M.state_way } }

--- Uploads a 2.1 edits array as a JSON item (POST <service>/FeatureServer/uploads/upload, its
-- `file` part), to the emulator or the documented double; returns the item's itemID.
function M.upload(server, edits)
  local boundary = "----engine-world-upload"
  local body = table.concat{ "--", boundary, '\r\nContent-Disposition: form-data; name="f"\r\n\r\njson\r\n',
    "--", boundary, '\r\nContent-Disposition: form-data; name="file"; filename="edits.json"\r\n',
    "Content-Type: application/json\r\n\r\n", json.encode(edits), "\r\n--", boundary, "--\r\n" }
  local url = server.url .. "/Parcels/FeatureServer/uploads/upload"
  local _, doc = perform(server.driver or server.emu.driver, { url = url, method = "POST", body = body,
    content_type = "multipart/form-data; boundary=" .. boundary })
  return assert(doc and doc.item and doc.item.itemID, "the upload failed: " .. json.encode(doc))
end

-- ------------------------------------------------------------------ a crew's test

--- A crew on `server` for one test: a checker (@{checker}), a client that repeats a request
-- quickly (@{client}) and the crew's way (`make_way`, perReplica) in `dir`.
-- @treturn table,table,table the checker, the client and the way
function M.crew(server, make_way, dir)
  local c = M.checker()
  local cl = M.client(server, true)
  return c, cl, make_way(server, cl, dir, "perReplica")
end

--- The end of a crew's test (@{crew}): its way and its client closed, then what `c` found told.
function M.finish(c, cl, way)
  way.close()
  cl:close()
  c.done()
end

--- Sync `n` of `way` (`opts`: way.sync's), checked with `c` to succeed.
-- @return the sync's result and error
function M.synced(c, way, n, opts)
  local r, e = way.sync(opts)
  c.check(r, ("sync %d failed: %s"):format(n, M.message_of(e)))
  return r, e
end

--- Sync `n` of `way` (`opts`: way.sync's), checked with `c` to fail `through` what befell it ("a reset").
-- @return the sync's result and error
function M.unsynced(c, way, n, through, opts)
  local r, e = way.sync(opts)
  c.check(not r, ("sync %d succeeded through %s"):format(n, through))
  return r, e
end

--- Waits (`seconds`, else 30, at the most) until `server` ran the requests its gateway answered and
-- its jobs ended (server:held() is 0); `what` names the wait.
function M.wait_ran(server, what, seconds)
  helper.wait_for(what, function() return server:held() == 0 end, seconds or 30)
end

-- ------------------------------------------------------------------ checks

--- A list of problems: check(cond, message) records each failed one; done() fails with them all.
function M.checker()
  local problems, seen = {}, {}
  local c = {}
  function c.check(cond, message)
    if not cond and not seen[message] then
      seen[message] = true
      problems[#problems + 1] = message
    end
    return cond
  end
  function c.done() assert(#problems == 0, "\n  " .. table.concat(problems, "\n  ")) end
  return c
end

--- The change log of `origin` counted by "op|GlobalID": attempts (applied or refused; an edit of a
-- request rolled back for another edit's failure is neither) and applied.
function M.tally(server, origin)
  local attempts, applied = {}, {}
  for _, e in ipairs(server:entries()) do
    if norm(e.origin) == norm(origin) and not e.rolled_back then
      local k = e.op .. "|" .. e.globalId
      attempts[k] = (attempts[k] or 0) + 1
      if not e.refused then applied[k] = (applied[k] or 0) + 1 end
    end
  end
  return attempts, applied
end

--- Checks with `c` (@{checker}) that the `op` ("add", "update", "delete") of `gid` by `origin` was
-- sent once and applied once, as the server's log shows (@{tally}).
-- @treturn table,table the tally's attempts and applied, for more checks
function M.check_once(c, server, origin, op, gid)
  local attempts, applied = M.tally(server, origin)
  local key = op .. "|" .. norm(gid)
  c.check((applied[key] or 0) == 1, ("the %s applied %d times"):format(op, applied[key] or 0))
  c.check((attempts[key] or 0) == 1, ("the %s sent %d times"):format(op, attempts[key] or 0))
  return attempts, applied
end

--- Checks with `c` that `server` holds `gid` with OWNER `owner` (`why`: what the message adds).
function M.check_owner(c, server, gid, owner, why)
  local f = server:feature(gid)
  c.check(f and f.OWNER == owner, "the server holds OWNER " .. tostring(f and f.OWNER) .. (why or ""))
end

--- Checks with `c` that `way` lists no failed edit and keeps none queued or journaled.
function M.check_settled(c, way)
  local failed = way.failed()
  local first = failed[1] or {}
  c.check(#failed == 0, ("failed() lists %d edit(s): %s %s"):format(#failed, tostring(first.op),
    tostring(first.message)))
  c.check(way.pending() == 0, "edits still queued or journaled: " .. way.pending())
end

function M.has(list, op, gid)
  for _, f in ipairs(list) do
    if f.op == op and f.globalId == norm(gid) then return true end
  end
  return false
end

function M.message_of(err) return tostring(type(err) == "table" and err.message or err) end

return M
