-- Issue 35: a server that spells GlobalIDs in lower case without braces (a
-- GUID column's own spelling: spec/support/documented_server.py with
-- gid_spelling = "lower_bare") in its per-edit results, its result files and
-- its query answers. The store and client:sync compare GlobalIDs as GUIDs:
-- an edit the server applied is known applied (from the answer, or read
-- back after a lost answer) and never sent again.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local transport = require "geoservices.net.transport"
local world = require "spec.support.engine_world"

local q = helper.shell_quote

local F1 = world.E01 -- updated
local F2 = world.E02 -- deleted

-- The documented double (spec/support/engine_world.lua, world.documented). "op|GUID" -> times it
-- applied that edit of `origin`, and attempted it at all (world.tally); its edit-carrying POSTs
-- (world.edit_posts).
local function tally(server, origin)
  local attempts, applied = world.tally(server, origin)
  return applied, attempts
end

local function edit_posts(server) return #world.edit_posts(server) end

local function key(op, gid) return op .. "|" .. world.norm(gid) end

-- the server does spell them so: F1 as its query answers it
local function spelling(server)
  local response = assert(transport.perform(server.driver, { url = server.url .. "/Parcels/FeatureServer/0/query",
    method = "POST", body = "where=1%3D1&outFields=*&f=json&token=" .. server.token,
    content_type = "application/x-www-form-urlencoded", timeout_ms = 5000 }))
  local doc = assert(json.decode(response.body))
  for _, f in ipairs(doc.features) do
    if world.norm(f.attributes.GlobalID) == world.norm(F1) then return f.attributes.GlobalID end
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
      local server = world.documented(settings)
      assert.equal(F1:lower():gsub("[{}]", ""), spelling(server))
      local dir = helper.tmp_dir()
      local client = geoservices.client{ url = server.url, token = server.token, timeout = 20 }
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
      local applied, attempts = tally(server, origin)
      for _, k in ipairs{ key("add", added), key("update", F1), key("delete", F2) } do
        assert.equal(1, applied[k], k .. " applied once")
        assert.equal(1, attempts[k], k .. " sent once")
      end
      local posts = edit_posts(server)
      assert(st:sync(client, { params = case.params, timeout = 20 }))
      assert.equal(posts, edit_posts(server), "a later sync sends nothing again")
      assert.equal("spelled", st:get(0, F1).attributes.OWNER)
      assert.is_nil(st:get(0, F2))
      st:close()
      client:close()
      server:stop()
      os.execute("rm -rf " .. q(dir))
    end)

    it(("client:sync: %s: each edit applied once, none sent again"):format(case.name), function()
      local server = world.documented(settings)
      assert.equal(F1:lower():gsub("[{}]", ""), spelling(server))
      local dir = helper.tmp_dir()
      local client = geoservices.client{ url = server.url, token = server.token, timeout = 20 }
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
      local applied, attempts = tally(server, created.replicaID)
      for _, k in ipairs{ key("add", added), key("update", F1), key("delete", F2) } do
        assert.equal(1, applied[k], k .. " applied once")
        assert.equal(1, attempts[k], k .. " sent once")
      end
      local posts = edit_posts(server)
      assert(client:sync(path, nil, { params = case.params, timeout = 20 }))
      assert.equal(posts, edit_posts(server), "a later sync sends nothing again")
      client:close()
      server:stop()
      os.execute("rm -rf " .. q(dir))
    end)
  end
end)
