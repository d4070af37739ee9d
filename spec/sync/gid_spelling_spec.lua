-- Issue 35: a server that spells GlobalIDs in lower case without braces (a
-- GUID column's own spelling: spec/support/documented_server.py with
-- gid_spelling = "lower_bare") in its per-edit results, its result files and
-- its query answers. The store and client:sync compare GlobalIDs as GUIDs:
-- an edit the server applied is known applied (from the answer, or read
-- back after a lost answer) and never sent again.
local core = require "geoservices.core"
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.json"
local transport = require "geoservices.net.transport"

local q = helper.shell_quote

local TOKEN = "crew-a-token"
local F1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}" -- updated
local F2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}" -- deleted

local function norm(gid) return (tostring(gid):upper():gsub("[{}]", "")) end

local Server = {}
Server.__index = Server

local function start_server(settings)
  local dir = helper.tmp_dir()
  helper.write_file(dir .. "/config.json", json.encode{ data = "examples/data/world.json", service = "Parcels",
    token = TOKEN, settings = settings })
  assert(os.execute(("python3 spec/support/documented_server.py %s %s --exit-with %d > %s 2>&1 & echo $! > %s"):format(
    q(dir .. "/config.json"), q(dir .. "/log.jsonl"), helper.own_pid(), q(dir .. "/out"), q(dir .. "/pid"))))
  local pid = helper.wait_for("documented server pid", function() return tonumber(helper.read_all(dir .. "/pid")) end,
    5)
  local root = helper.wait_for("documented server start-up line", function()
    local text = helper.read_all(dir .. "/out") or ""
    if not helper.process_alive(pid) then error("documented server exited: " .. text) end
    return text:match("listening on (http://127%.0%.0%.1:%d+)")
  end, 10)
  return setmetatable({ root = root, url = root .. "/arcgis/rest/services", pid = pid, dir = dir,
                        driver = core.driver() }, Server)
end

function Server:stop()
  os.execute("kill " .. self.pid .. " 2>/dev/null")
  helper.wait_for("documented server to exit", function() return not helper.process_alive(self.pid) end, 5)
  self.driver:close()
  os.execute("rm -rf " .. q(self.dir))
end

function Server:control(path, body)
  local spec = { url = self.root .. "/_control/" .. path, timeout_ms = 5000 }
  if body then spec.method, spec.body, spec.content_type = "POST", json.encode(body), "application/json" end
  local response = assert(transport.perform(self.driver, spec))
  assert(response.status == 200, "control " .. path .. ": HTTP " .. response.status)
  return assert(json.decode(response.body))
end

-- "op GUID" -> times the server took that edit of `origin` (applied), and attempted it at all
function Server:tally(origin)
  local applied, attempts = {}, {}
  for _, e in ipairs(self:control("changelog").entries) do
    if norm(e.origin) == norm(origin) and not e.rolled_back then
      local k = e.op .. " " .. norm(e.globalId)
      attempts[k] = (attempts[k] or 0) + 1
      if not e.refused then applied[k] = (applied[k] or 0) + 1 end
    end
  end
  return applied, attempts
end

-- the synchronizeReplica POSTs that carried edits
function Server:edit_posts()
  local n = 0
  for line in (helper.read_all(self.dir .. "/log.jsonl") or ""):gmatch("[^\n]+") do
    local r = json.decode(line)
    local edits = r.method == "POST" and r.path:match("/synchronizeReplica$") and r.form.edits
      and json.decode(r.form.edits)
    for _, layer in ipairs(type(edits) == "table" and edits or {}) do
      local f = layer.features or {}
      if #(f.adds or {}) + #(f.updates or {}) + #(f.deleteIds or {}) > 0 then
        n = n + 1
        break
      end
    end
  end
  return n
end

-- the server does spell them so: F1 as its query answers it
function Server:spelling()
  local response = assert(transport.perform(self.driver, { url = self.url .. "/Parcels/FeatureServer/0/query",
    method = "POST", body = "where=1%3D1&outFields=*&f=json&token=" .. TOKEN,
    content_type = "application/x-www-form-urlencoded", timeout_ms = 5000 }))
  local doc = assert(json.decode(response.body))
  for _, f in ipairs(doc.features) do
    if norm(f.attributes.GlobalID) == norm(F1) then return f.attributes.GlobalID end
  end
end

local CASES = {
  { name = "per-edit results (embedded)", params = { transportType = "esriTransportTypeEmbedded" } },
  { name = "a result file (url)", params = { transportType = "esriTransportTypeUrl" } },
  { name = "a lost answer read back", params = { transportType = "esriTransportTypeEmbedded" },
    settings = { drop_edit_post = "any" } },
}

describe("GlobalIDs spelled in lower case without braces by the server", function()
  for _, case in ipairs(CASES) do
    local settings = { gid_spelling = "lower_bare" }
    for k, v in pairs(case.settings or {}) do settings[k] = v end

    it(("store: %s: each edit applied once, none sent again"):format(case.name), function()
      local server = start_server(settings)
      assert.equal(F1:lower():gsub("[{}]", ""), server:spelling())
      local dir = helper.tmp_dir()
      local client = geoservices.client{ url = server.url, token = TOKEN, timeout = 20 }
      local st = assert(geoservices.store.create(client, dir .. "/crew.gpkg", { service = "Parcels",
        layers = { 0 }, replicaName = "crew", syncModel = "perReplica" }, { poll_interval = 0.05, timeout = 20 }))
      -- the downloaded features, whatever their spelling, are found by the store's spelling
      assert.is_not_nil(st:get(0, F1))
      local added = assert(st:add(0, { attributes = { APN = "lower" }, geometry = { x = -117.2, y = 34.1 } }))
      assert(st:update(0, { attributes = { GlobalID = F1, OWNER = "spelled" } }))
      assert(st:delete(0, F2))
      local result, err = st:sync(client, { params = case.params, timeout = 20 })
      if not result then -- a lost answer: read back, the changes asked again
        assert.is_true(err.outcome_unknown == true, tostring(err))
        result = assert(st:sync(client, { params = case.params, timeout = 20 }))
      end
      assert.equal(0, #result.rejected)
      assert.equal(0, #assert(st:pending()))
      assert.same({}, assert(st:failed()))
      local origin = st:replica().replicaID
      local applied, attempts = server:tally(origin)
      for _, k in ipairs{ "add " .. norm(added), "update " .. norm(F1), "delete " .. norm(F2) } do
        assert.equal(1, applied[k], k .. " applied once")
        assert.equal(1, attempts[k], k .. " sent once")
      end
      local posts = server:edit_posts()
      assert(st:sync(client, { params = case.params, timeout = 20 }))
      assert.equal(posts, server:edit_posts(), "a later sync sends nothing again")
      assert.equal("spelled", st:get(0, F1).attributes.OWNER)
      assert.is_nil(st:get(0, F2))
      st:close()
      client:close()
      server:stop()
      os.execute("rm -rf " .. q(dir))
    end)

    it(("client:sync: %s: each edit applied once, none sent again"):format(case.name), function()
      local server = start_server(settings)
      assert.equal(F1:lower():gsub("[{}]", ""), server:spelling())
      local dir = helper.tmp_dir()
      local client = geoservices.client{ url = server.url, token = TOKEN, timeout = 20 }
      local created = server:control("replica", { name = "crew" })
      local path = dir .. "/crew.json"
      assert(geoservices.replica(path, { service = "Parcels", replicaID = created.replicaID, model = "perReplica",
        replicaServerGen = created.gen, syncDirection = "bidirectional" }))
      local e = geoservices.edits()
      local added = e:add(0, { attributes = { APN = "lower" }, geometry = { x = -117.2, y = 34.1 } })
      e:update(0, { attributes = { GlobalID = F1, OWNER = "spelled" } })
      e:delete(0, F2)
      local result, err = client:sync(path, e, { params = case.params, timeout = 20 })
      if not result then
        assert.is_true(err.outcome_unknown == true, tostring(err))
        result = assert(client:sync(path, nil, { params = case.params, timeout = 20 }))
      end
      assert.same({}, result.failed_edits or {})
      assert.is_nil(helper.read_all(path .. ".journal"), "no attempt left in flight")
      local applied, attempts = server:tally(created.replicaID)
      for _, k in ipairs{ "add " .. norm(added), "update " .. norm(F1), "delete " .. norm(F2) } do
        assert.equal(1, applied[k], k .. " applied once")
        assert.equal(1, attempts[k], k .. " sent once")
      end
      local posts = server:edit_posts()
      assert(client:sync(path, nil, { params = case.params, timeout = 20 }))
      assert.equal(posts, server:edit_posts(), "a later sync sends nothing again")
      client:close()
      server:stop()
      os.execute("rm -rf " .. q(dir))
    end)
  end
end)
