-- The replica store's queue (issue 26): each update keeps its base (the
-- feature before the first unsent local change), edits the server found in
-- conflict are kept and listed, stores of format 1 are migrated on open,
-- text that is not UTF-8 is refused before anything is written, and a
-- damaged queue row or attempt record is an error naming the file, never
-- an edit silently lost.
local data = require "spec.support.store_data"
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local store = require "geoservices.store"

local REPLICA = { service = "Parcels", replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}",
                  syncModel = "perReplica", replicaServerGen = 5 }

local function copy_file(from, to)
  local f = assert(io.open(from, "rb"))
  local bytes = f:read("a")
  f:close()
  f = assert(io.open(to, "wb"))
  f:write(bytes)
  f:close()
end

local function columns(st, tbl)
  local names = {}
  for _, c in ipairs(assert(st.db:rows(("PRAGMA table_info(%s)"):format(tbl)))) do names[c.name] = true end
  return names
end

describe("replica store queue", function()
  local dir, n
  local serve, stop_all = helper.scripted_servers()

  setup(function() dir = helper.tmp_dir() end)
  teardown(function() os.execute("rm -rf " .. dir) end)
  after_each(function() stop_all() end)

  -- a store whose layers 0 and 3 hold features 1..3 as downloaded
  local function fresh()
    n = (n or 0) + 1
    local result = ("%s/r%d.json"):format(dir, n)
    data.write_result(result, { [0] = 3, [3] = 3 })
    local path = ("%s/q%d.gpkg"):format(dir, n)
    return assert(store.create_from(path, REPLICA, data.layers(), result)), path
  end

  describe("the base of an update", function()
    it("is the feature as it was before the first unsent change, kept when later updates fold in", function()
      local st = fresh()
      local gid = data.gid(3, 1)
      local before = data.feature(3, 1)
      assert(st:update(3, { attributes = { GlobalID = gid, NAME = "renamed" } }))
      assert(st:update(3, { attributes = { GlobalID = gid, COUNT = 99 },
                            geometry = { rings = { { { 0, 0 }, { 0, 1 }, { 1, 1 }, { 0, 0 } } } } }))
      local pending = assert(st:pending())
      assert.equal(1, #pending)
      local base = pending[1].base
      assert.is_table(base)
      assert.equal(before.attributes.NAME, base.attributes.NAME)
      assert.equal(before.attributes.COUNT, base.attributes.COUNT)
      assert.equal(before.attributes.UPDATED, base.attributes.UPDATED)
      assert.equal(gid, base.attributes.GlobalID)
      assert.same(before.geometry, json.decode(json.encode(base.geometry)))
      -- what is sent is the change, not the base
      assert.same({ GlobalID = gid, NAME = "renamed", COUNT = 99 }, pending[1].feature.attributes)
      st:close()
    end)

    it("of an update made while an earlier one is in flight is the feature with the sent change", function()
      local st = fresh()
      local gid = data.gid(0, 2)
      assert(st:update(0, { attributes = { GlobalID = gid, NAME = "first" } }))
      local id = assert(st:begin_attempt{})
      assert(st:update(0, { attributes = { GlobalID = gid, NAME = "second" } }))
      local pending = assert(st:pending())
      assert.equal(2, #pending)
      assert.equal(id, pending[1].attempt)
      assert.equal(data.name(0, 2), pending[1].base.attributes.NAME)
      assert.is_nil(pending[2].attempt)
      assert.equal("first", pending[2].base.attributes.NAME)
      assert.equal("second", pending[2].feature.attributes.NAME)
      st:close()
    end)

    it("is absent for an add (and an update folded into it); a delete keeps the base it replaced", function()
      local st = fresh()
      local added = assert(st:add(0, { attributes = { NAME = "new" }, geometry = { x = 1, y = 2 } }))
      assert(st:update(0, { attributes = { GlobalID = added, NAME = "newer" } }))
      local gid = data.gid(0, 3)
      assert(st:update(0, { attributes = { GlobalID = gid, NAME = "changed" } }))
      assert(st:delete(0, gid))
      local pending = assert(st:pending())
      assert.same({ "add", "delete" }, { pending[1].op, pending[2].op })
      assert.is_nil(pending[1].base)
      assert.equal("newer", pending[1].feature.attributes.NAME)
      assert.equal(data.name(0, 3), pending[2].base.attributes.NAME)
      st:close()
    end)

    it("goes with a rejected update into the failed edits", function()
      local st = fresh()
      local gid = data.gid(3, 2)
      assert(st:update(3, { attributes = { GlobalID = gid, NAME = "refused" } }))
      local id, rows = assert(st:begin_attempt{})
      assert(st:end_attempt(id, { [rows[1].seq] = { code = 1000, description = "Refused." } }))
      local failed = assert(st:failed())
      assert.equal(1, #failed)
      assert.equal(data.name(3, 2), failed[1].base.attributes.NAME)
      assert.equal("refused", failed[1].feature.attributes.NAME)
      st:close()
    end)
  end)

  describe("conflicts", function()
    it("keeps an edit the server holds newer values for, with what was sent and the server's values", function()
      local st = fresh()
      local gid = data.gid(3, 3)
      assert(st:update(3, { attributes = { GlobalID = gid, NAME = "ours" } }))
      local added = assert(st:add(0, { attributes = { NAME = "kept" }, geometry = { x = 5, y = 6 } }))
      local id, rows = assert(st:begin_attempt{})
      assert.equal(2, #rows)
      local theirs = { attributes = { GlobalID = gid, NAME = "theirs", COUNT = 7 } }
      assert(st:end_attempt(id, {
        [rows[1].seq] = { conflict = true, server = theirs, description = "the server holds other values" },
      })) -- rows[2] (the add) unanswered: back in the queue
      assert.is_false(st:attempt())
      local pending = assert(st:pending())
      assert.equal(1, #pending)
      assert.same({ "add", added }, { pending[1].op, pending[1].globalId })
      assert.is_nil(pending[1].attempt)
      assert.same({}, st:failed())
      local conflicts = assert(st:conflicts())
      assert.equal(1, #conflicts)
      local c = conflicts[1]
      assert.same({ rows[1].seq, "update", 3, gid, id }, { c.seq, c.op, c.layer, c.globalId, c.attempt })
      assert.equal("ours", c.feature.attributes.NAME)
      assert.equal(data.name(3, 3), c.base.attributes.NAME)
      assert.same(theirs, c.server)
      assert.equal("the server holds other values", c.description)
      assert.matches("^%d%d%d%d%-%d%d%-%d%dT", c.detected)
      -- a conflict is never sent again; it stays until the user discards it
      local id2, rows2 = assert(st:begin_attempt{})
      assert.equal(1, #rows2)
      assert.equal(added, rows2[1].globalId)
      assert(st:end_attempt(id2, { [rows2[1].seq] = true }))
      assert.is_true(st:discard_conflict(c.seq))
      assert.same({}, st:conflicts())
      local ok, err = st:discard_conflict(c.seq)
      assert.is_nil(ok)
      assert.equal("invalid", err.kind)
      assert.equal("seq", err.parameter)
      st:close()
    end)
  end)

  describe("a store of format 1", function()
    local function old_store()
      n = (n or 0) + 1
      local path = ("%s/old%d.gpkg"):format(dir, n)
      copy_file("spec/fixtures/store/format1.gpkg", path)
      return path
    end

    it("opens read-only as it is, without a base or conflicts", function()
      local path = old_store()
      local st = assert(store.open(path, { readonly = true }))
      assert.equal(3, #assert(st:pending()))
      assert.is_nil(st:pending()[1].base)
      assert.same({}, assert(st:conflicts()))
      assert.is_nil(columns(st, "gpkgext_geoservices_edits").base)
      st:close()
    end)

    it("is migrated on open: its edits kept, later updates with a base, conflicts recorded", function()
      local path = old_store()
      local st = assert(store.open(path))
      assert.is_true(columns(st, "gpkgext_geoservices_edits").base)
      assert.is_true(columns(st, "gpkgext_geoservices_failed_edits").base)
      assert.equal(require("geoservices.store.file.schema").FORMAT,
        st:_db():rows("SELECT format FROM gpkgext_geoservices_replica")[1].format)
      local pending = assert(st:pending())
      assert.same({ "update", "add", "delete" }, { pending[1].op, pending[2].op, pending[3].op })
      assert.equal("renamed offline", pending[1].feature.attributes.NAME)
      assert.is_nil(pending[1].base) -- made before bases were kept
      local failed = assert(st:failed())
      assert.same({ "add", 1000, "Refused." }, { failed[1].op, failed[1].code, failed[1].description })
      -- an update now gets its base; an update folded into an old one keeps none
      assert(st:update(3, { attributes = { GlobalID = data.gid(3, 2), NAME = "after" } }))
      assert(st:update(3, { attributes = { GlobalID = data.gid(3, 1), COUNT = 1 } }))
      pending = assert(st:pending())
      assert.equal(4, #pending)
      assert.is_nil(pending[1].base)
      assert.equal(data.name(3, 2), pending[4].base.attributes.NAME)
      local id, rows = assert(st:begin_attempt{})
      assert(st:end_attempt(id, { [rows[1].seq] = { conflict = true, server = { attributes = { NAME = "x" } } } }))
      assert.equal(1, #assert(st:conflicts()))
      st:close()
      -- and opens again as a current store
      st = assert(store.open(path))
      assert.equal(3, #assert(st:pending()))
      assert.equal(1, #assert(st:conflicts()))
      st:close()
    end)

    it("is left as it was when its migration fails half-way", function()
      local path = old_store()
      local db = assert(require("geoservices.core").store_open(path, {}))
      -- the second step of the migration will find its column already there
      assert(db:exec("ALTER TABLE geoservices_failed_edits ADD COLUMN base TEXT")) -- its format-1 name
      db:close()
      local st, err = store.open(path)
      assert.is_nil(st)
      assert.equal("io", err.kind)
      assert.truthy(err.message:find(path, 1, true), err.message)
      assert.matches("base", err.message)
      st = assert(store.open(path, { readonly = true }))
      assert.is_nil(columns(st, "gpkgext_geoservices_edits").base) -- the first step was rolled back
      assert.equal(1, st.db:rows("SELECT format FROM gpkgext_geoservices_replica")[1].format)
      assert.equal(3, #assert(st:pending()))
      st:close()
    end)

    it("leaves the format check in place: a store newer than the library is refused", function()
      local path = old_store()
      local st = assert(store.open(path))
      assert(st.db:run("UPDATE gpkgext_geoservices_replica SET format = 99"))
      st:close()
      local again, err = store.open(path)
      assert.is_nil(again)
      assert.equal("format", err.code)
    end)
  end)

  describe("text that is not UTF-8", function()
    it("is refused by add and update, naming the field, before anything is written", function()
      local st = fresh()
      local latin1 = "caf\xE9" -- "café" as a Latin-1 CSV holds it
      local gid, err = st:add(0, { attributes = { NAME = latin1 }, geometry = { x = 1, y = 2 } })
      assert.is_nil(gid)
      assert.equal("invalid", err.kind)
      assert.equal("NAME", err.parameter)
      assert.matches("UTF%-8", err.message)
      assert.matches("byte 4", err.message)
      assert.falsy(err.message:find(latin1, 1, true)) -- the value itself is never echoed
      local ok
      ok, err = st:update(0, { attributes = { GlobalID = data.gid(0, 1), NAME = latin1 } })
      assert.is_nil(ok)
      assert.equal("NAME", err.parameter)
      ok, err = st:update(0, { attributes = { GlobalID = data.gid(0, 1), ["N\xC3"] = "x" } })
      assert.is_nil(ok)
      assert.equal("invalid", err.kind)
      assert.matches("field name", err.message)
      assert.equal(3, st:count(0))
      assert.same({}, st:pending())
      assert.equal(data.name(0, 1), st:get(0, data.gid(0, 1)).attributes.NAME)
      -- the same word in UTF-8 is taken, and sent as it is
      local good = assert(st:add(0, { attributes = { NAME = "café" }, geometry = { x = 1, y = 2 } }))
      assert.equal("café", st:get(0, good).attributes.NAME)
      assert.equal("café", st:pending()[1].feature.attributes.NAME)
      st:close()
    end)
  end)

  describe("damage", function()
    local function damage(st, sql, ...)
      assert(st.db:run(sql, ...))
    end

    it("a queued edit that cannot be decoded is an error naming the file and the edit; it stays queued", function()
      local st, path = fresh()
      assert(st:update(0, { attributes = { GlobalID = data.gid(0, 1), NAME = "sound" } }))
      assert(st:update(0, { attributes = { GlobalID = data.gid(0, 2), NAME = "to damage" } }))
      local seq = st:pending()[2].seq
      damage(st, "UPDATE gpkgext_geoservices_edits SET base = ? WHERE seq = ?", '{"row":{"NAME":"caf\xE9"}}', seq)
      local list, err = st:pending()
      assert.is_nil(list)
      assert.equal("io", err.kind)
      assert.equal("damaged", err.code)
      assert.truthy(err.message:find(path, 1, true), err.message)
      assert.matches("edit " .. seq, err.message)
      assert.matches("base", err.message)
      local id
      id, err = st:begin_attempt{}
      assert.is_nil(id)
      assert.matches("edit " .. seq, err.message)
      assert.is_false(st:attempt())
      -- an edit of the same feature is still taken (the trigger folds it in
      -- without reading the damaged row), and the row stays damaged
      assert(st:update(0, { attributes = { GlobalID = data.gid(0, 2), NAME = "again" } }))
      assert.equal("again", st:get(0, data.gid(0, 2)).attributes.NAME)
      -- a sync refuses before sending anything
      local server = serve{}
      local c = geoservices.client{ url = server.url, retry = false }
      local result
      result, err = st:sync(c)
      assert.is_nil(result)
      assert.matches("edit " .. seq, err.message)
      assert.equal(0, #server:requests())
      -- nothing was lost: both rows are still queued, unsent
      local rows = st.db:rows("SELECT seq, attempt_id FROM gpkgext_geoservices_edits ORDER BY seq")
      assert.equal(2, #rows)
      assert.is_nil(rows[1].attempt_id)
      assert.is_nil(rows[2].attempt_id)
      st:close()
    end)

    it("a queued add or update whose feature is gone from the table is damaged too", function()
      local st, path = fresh()
      local gid = assert(st:add(0, { attributes = { NAME = "lost?" }, geometry = { x = 1, y = 1 } }))
      assert(st:update(3, { attributes = { GlobalID = data.gid(3, 1), NAME = "kept?" } }))
      local rows = st:pending()
      -- the rows deleted behind the triggers' back (capture switched off by hand)
      for _, case in ipairs{ { rows[1].seq, 0, gid }, { rows[2].seq, 3, data.gid(3, 1) } } do
        local seq, layer, g = case[1], case[2], case[3]
        local tbl = st.layers[layer].table
        local saved = st.db:rows(('SELECT * FROM "%s" WHERE GlobalID = ?'):format(tbl), g)[1]
        damage(st, "UPDATE gpkgext_geoservices_capture SET enabled = 0")
        damage(st, ('DELETE FROM "%s" WHERE GlobalID = ?'):format(tbl), g)
        local list, err = st:pending()
        assert.is_nil(list)
        assert.equal("damaged", err.code)
        assert.truthy(err.message:find(path, 1, true), err.message)
        assert.matches("queued edit " .. seq, err.message)
        assert.matches("not in table " .. tbl, err.message)
        local id
        id, err = st:begin_attempt{}
        assert.is_nil(id)
        assert.equal(seq, err.seq)
        local names, marks, values = {}, {}, {}
        for k, v in pairs(saved) do
          -- strings bind as text: the geometry goes back as the blob it was
          names[#names + 1], marks[#marks + 1], values[#values + 1] = '"' .. k .. '"',
            k == "geom" and "CAST(? AS BLOB)" or "?", v
        end
        damage(st, ('INSERT INTO "%s" (%s) VALUES (%s)'):format(tbl, table.concat(names, ", "),
          table.concat(marks, ", ")), table.unpack(values, 1, #names))
        damage(st, "UPDATE gpkgext_geoservices_capture SET enabled = 1")
      end
      assert.same({ gid, data.gid(3, 1) }, { st:pending()[1].globalId, st:pending()[2].globalId })
      assert.is_false(st:attempt())
      -- an edit in flight holds what was sent: without a feature it is damaged
      local id = assert(st:begin_attempt{})
      local seq = rows[2].seq
      for _, text in ipairs{ '"text"', '{"geometry":{}}', "[]" } do
        damage(st, "UPDATE gpkgext_geoservices_edits SET feature = ? WHERE seq = ?", text, seq)
        local list, err = st:pending()
        assert.is_nil(list)
        assert.equal("damaged", err.code)
        assert.matches("queued edit " .. seq, err.message)
      end
      assert.equal(id, st:attempt().id)
      st:close()
    end)

    it("a damaged attempt record is an error naming the file; its edits stay", function()
      local st, path = fresh()
      assert(st:update(3, { attributes = { GlobalID = data.gid(3, 1), NAME = "in flight" } }))
      local id = assert(st:begin_attempt{ params = { syncDirection = "bidirectional" } })
      damage(st, "UPDATE gpkgext_geoservices_attempts SET params = ? WHERE attempt_id = ?", "{not json", id)
      local attempt, err = st:attempt()
      assert.is_nil(attempt)
      assert.equal("io", err.kind)
      assert.equal("damaged", err.code)
      assert.truthy(err.message:find(path, 1, true), err.message)
      assert.matches("attempt " .. id, err.message)
      local server = serve{}
      local c = geoservices.client{ url = server.url, retry = false }
      local result
      result, err = st:sync(c)
      assert.is_nil(result)
      assert.matches("attempt " .. id, err.message)
      assert.equal(0, #server:requests())
      local rows = st.db:rows("SELECT attempt_id FROM gpkgext_geoservices_edits")
      assert.same({ { attempt_id = id } }, rows)
      assert.equal(1, #st.db:rows("SELECT * FROM gpkgext_geoservices_attempts"))
      -- the GlobalIDs column too
      damage(st, "UPDATE gpkgext_geoservices_attempts SET params = NULL, global_ids = ? WHERE attempt_id = "
        .. "?", "[1,", id)
      attempt, err = st:attempt()
      assert.is_nil(attempt)
      assert.matches("attempt " .. id, err.message)
      st:close()
    end)
  end)
end)
