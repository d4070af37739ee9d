-- Inspecting a store and discarding local edits (issue 27, part 6):
-- st:status() (replica, generation, last sync, pending edits by layer and
-- kind, failed, conflicts), st:pending(), st:conflicts(), st:discard(...)
-- (drops a local edit and restores the server's version), each printing a
-- readable one-line summary in a REPL; and the commands `geoservices
-- status|pending|discard|conflicts STORE.gpkg`, which need no server.
local data = require "spec.support.store_data"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local store = require "geoservices.store"

local q = helper.shell_quote

local REPLICA = { service = "Parcels", replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}", replicaName = "crew-1",
                  syncModel = "perReplica", syncDirection = "bidirectional", replicaServerGen = 42 }

local function lines(text)
  local list = {}
  for line in text:gmatch("[^\n]+") do list[#list + 1] = line end
  return list
end

describe("replica store inspection", function()
  local dir, n

  setup(function() dir = helper.tmp_dir() end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  -- layers 0 (Hydrants) and 3 (Parcels) with features 1..3; offline: an
  -- add, two updates and a delete; a rejected add; a conflict
  local function edited()
    n = (n or 0) + 1
    local result = ("%s/r%d.json"):format(dir, n)
    data.write_result(result, { [0] = 3, [3] = 3 })
    local path = ("%s/s%d.gpkg"):format(dir, n)
    local st = assert(store.create_from(path, REPLICA, data.layers(), result))
    assert(st:add(0, { attributes = { NAME = "refused" }, geometry = { x = 1, y = 1 } }))
    assert(st:update(3, { attributes = { GlobalID = data.gid(3, 3), NAME = "ours" } }))
    local id, rows = assert(st:begin_attempt{})
    assert(st:end_attempt(id, { [rows[1].seq] = { code = 1000, description = "Refused." },
      [rows[2].seq] = { conflict = true, server = { attributes = { NAME = "theirs" } } } }))
    local added = assert(st:add(0, { attributes = { NAME = "new" }, geometry = { x = 2, y = 2 } }))
    assert(st:update(3, { attributes = { GlobalID = data.gid(3, 1), NAME = "renamed" } }))
    assert(st:update(0, { attributes = { GlobalID = data.gid(0, 1), COUNT = 77 } }))
    assert(st:delete(3, data.gid(3, 2)))
    return st, path, added
  end

  it("st:status() tells the replica, its generation, the last sync and what waits, in one line", function()
    local st, path = edited()
    local s = assert(st:status())
    assert.same({ "{5E1A0C2B-1111-4A5B-9C8D-000000000001}", "crew-1", "Parcels", 42 },
      { s.replicaID, s.replicaName, s.service, s.generation })
    assert.equal("create", s.lastSync.operation)
    assert.equal("ok", s.lastSync.outcome)
    assert.equal(4, s.pending.total)
    local by = {}
    for _, l in ipairs(s.pending.layers) do by[l.name] = l end
    assert.same({ add = 1, update = 1, delete = 0 }, { add = by.Hydrants.add, update = by.Hydrants.update,
                                                       delete = by.Hydrants.delete })
    assert.same({ 0, 1, 1 }, { by.Parcels.add, by.Parcels.update, by.Parcels.delete })
    assert.same({ 1, 1 }, { s.failed, s.conflicts })
    local line = tostring(s)
    assert.falsy(line:find("\n"), line)
    assert.truthy(line:find(path, 1, true), line)
    for _, want in ipairs{ "crew%-1", "generation 42", "4 local edits", "Hydrants: 1 add, 1 update",
                           "Parcels: 1 update, 1 delete", "1 failed", "1 conflict" } do
      assert.matches(want, line)
    end
    st:close()
  end)

  it("lists print as one line too: pending, failed, conflicts", function()
    local st = edited()
    assert.equal("4 pending local edits in layers 0, 3: 1 add, 2 updates, 1 delete", tostring(st:pending()))
    assert.matches("^1 failed edit: add of {.*} in layer 0: Refused%. %(code 1000%)$", tostring(st:failed()))
    assert.equal("1 conflict: update of " .. data.gid(3, 3) .. " in layer 3 (the server's version kept)",
      tostring(st:conflicts()))
    st:close()
  end)

  it("st:discard() drops local edits and restores the server's version, capturing nothing", function()
    local st, _, added = edited()
    local outcome = assert(st:discard(data.gid(3, 1), added))
    assert.equal("2 local edits discarded: 1 add removed, 1 update restored", tostring(outcome))
    assert.equal(data.name(3, 1), st:get(3, data.gid(3, 1)).attributes.NAME)
    assert.is_nil(st:get(0, added))
    assert.equal(2, #st:pending())
    -- a delete brings the feature back, as it was
    assert(st:discard(data.gid(3, 2)))
    local back = assert(st:get(3, data.gid(3, 2)))
    assert.same(data.feature(3, 2).attributes, back.attributes)
    assert.same(data.geometry(3, 2), json.decode(json.encode(back.geometry)))
    -- refused: an unknown GlobalID, an edit in flight; nothing changes
    local ok, err = st:discard("{00000000-0000-4000-8000-0000000000FF}")
    assert.is_nil(ok)
    assert.equal("invalid", err.kind)
    assert.equal(1, #st:pending())
    local id = assert(st:begin_attempt{})
    ok, err = st:discard(data.gid(0, 1))
    assert.is_nil(ok)
    assert.matches("in flight", err.message)
    assert(st:end_attempt(id, {}))
    -- all of them
    assert.equal("1 local edit discarded: 1 update restored", tostring(assert(st:discard{ all = true })))
    assert.same({}, st:pending())
    assert.equal(data.feature(0, 1).attributes.COUNT, st:get(0, data.gid(0, 1)).attributes.COUNT)
    st:close()
  end)

  describe("the commands", function()
    it("status, pending, conflicts and discard read and change a store without a server", function()
      local st, path, added = edited()
      st:close()
      local r = helper.run_cli{ "status", path }
      assert.equal(0, r.code, r.err)
      assert.matches("4 local edits", r.out)
      assert.matches("generation 42", r.out)
      r = helper.run_cli{ "--json", "status", path }
      assert.equal(0, r.code, r.err)
      local ev = json.decode(lines(r.out)[1])
      assert.same({ "store_status", 4, 1, 1 }, { ev.event, ev.pending, ev.failed, ev.conflicts })

      r = helper.run_cli{ "pending", path }
      assert.equal(0, r.code, r.err)
      local out = lines(r.out)
      assert.equal("4 pending local edits in layers 0, 3: 1 add, 2 updates, 1 delete", out[1])
      assert.equal(5, #out) -- one line per edit
      assert.truthy(r.out:find("add     Hydrants  " .. added, 1, true), r.out)
      r = helper.run_cli{ "--json", "pending", path }
      out = lines(r.out)
      local edits = {}
      for _, l in ipairs(out) do
        local e = json.decode(l)
        if e.event == "pending_edit" then edits[#edits + 1] = e end
      end
      assert.equal(4, #edits)
      assert.same({ "add", "Hydrants", added, "new" }, { edits[1].op, edits[1].layer_name, edits[1].globalId,
        edits[1].feature.attributes.NAME })

      r = helper.run_cli{ "conflicts", path }
      assert.equal(0, r.code, r.err)
      assert.equal("1 conflict: update of " .. data.gid(3, 3) .. " in layer 3 (the server's version kept)",
        lines(r.out)[1])
      assert.truthy(r.out:find(data.gid(3, 3), 1, true), r.out)

      r = helper.run_cli{ "discard", path, added, data.gid(3, 1) }
      assert.equal(0, r.code, r.err)
      assert.matches("2 local edits discarded", r.out)
      r = helper.run_cli{ "discard", path, "{00000000-0000-4000-8000-0000000000FF}" }
      assert.equal(2, r.code)
      r = helper.run_cli{ "discard", path }
      assert.equal(2, r.code) -- GlobalIDs or --all
      r = helper.run_cli{ "discard", "--all", path }
      assert.equal(0, r.code, r.err)
      st = assert(store.open(path))
      assert.same({}, st:pending())
      st:close()
      -- the organization's status is still `geoservices status` without a store
      r = helper.run_cli{ "status" }
      assert.equal(2, r.code)
      assert.matches("no server", r.err)
    end)
  end)
end)
