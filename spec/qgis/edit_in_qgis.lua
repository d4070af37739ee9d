-- QGIS itself edits a replica store (issue 27, `make test-qgis`, not in
-- `make test`: apt-get install qgis python3-qgis). Through QGIS's own OGR
-- provider (spec/qgis/qgis_edit.py, headless): a parcel renamed, one moved,
-- one deleted, one added, a library add renamed before it was ever sent,
-- a synchronized library add edited; `geoservices sync` runs while QGIS
-- holds the file open in an edit session, QGIS commits after it; each edit
-- reaches the server once, a second store receives them, GDAL's validator
-- stays clean, and the fid QGIS knows a feature by never changes.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local PARCEL1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local PARCEL3 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E03}"

local function norm(gid) return (tostring(gid):upper():gsub("[{}]", "")) end

local run = helper.run_shell

local QGIS = "QT_QPA_PLATFORM=offscreen /usr/bin/python3 spec/qgis/qgis_edit.py"

-- QGIS's answer: the last line of its output, JSON
local function qgis(mode, path, edits, ...)
  local extra = {}
  for i, a in ipairs{ ... } do extra[i] = q(a) end
  local out, ok = run(("%s %s %s Parcels %s %s"):format(QGIS, mode, q(path), q(json.encode(edits)),
    table.concat(extra, " ")))
  local last = out:match("([^\n]+)\n?$")
  local answer = last and json.decode(last)
  assert(ok and type(answer) == "table" and answer.ok, out)
  return answer
end

local validate = helper.validate_gpkg

describe("a store edited in QGIS", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)
  local client, create = world.client, world.create

  local function server_edits(replica_id)
    local counts = {}
    for _, e in ipairs(world.emu:control("changelog?service=Parcels").entries) do
      if norm(e.origin) == norm(replica_id) and not e.refused then
        local k = e.op .. "|" .. norm(e.globalId)
        counts[k] = (counts[k] or 0) + 1
      end
    end
    return counts
  end

  local function cli_sync(path)
    local r = helper.run_cli{ "--url", world.emu.url, "--token", "alice-token", "sync", "--busy-timeout", "30", path }
    assert.equal(0, r.code, r.out .. r.err)
    return r
  end

  it("uploads each edit QGIS made once, with QGIS holding the file open during a sync", function()
    local st1, st2 = create("crew-1"), create("crew-2")
    local path1 = st1.path
    local replica1 = st1:replica().replicaID
    local c = client()
    local synced = assert(st1:add(0, { attributes = { APN = "lib synced" }, geometry = { x = -117.3, y = 34.3 } }))
    assert(st1:sync(c))
    local unsynced = assert(st1:add(0, { attributes = { APN = "lib local" }, geometry = { x = -117.4, y = 34.4 } }))
    st1:close()

    local edited = qgis("edit", path1, {
      rename = { { PARCEL1, "APN", "renamed in QGIS" }, { unsynced, "APN", "lib local renamed" },
                 { synced, "OWNER", "QGIS on a synced add" } },
      move = { { PARCEL2, -117.5, 34.5 } },
      delete = { PARCEL3 },
      add = { { attributes = { APN = "added in QGIS", ACRES = 0.75 }, x = -117.6, y = 34.6 } },
    })
    assert.equal(1, #edited.added)
    local qgis_fid = edited.added[1]
    assert.is_true(qgis_fid > 0, "QGIS's fid of its new feature")
    local added_gid
    for gid, fid in pairs(edited.fids) do
      if fid == qgis_fid then added_gid = gid end
    end
    assert.matches("^{%x+%-%x+%-4%x+%-[89AB]%x+%-%x+}$", added_gid)

    -- QGIS opens the file again, buffers an edit, and holds it while the sync runs
    local marker = world.dir .. "/qgis-holding"
    local log = world.dir .. "/qgis-hold.log"
    local pid = tonumber((run(("%s hold %s Parcels %s %s 4 > %s 2>&1 & echo $!"):format(QGIS, q(path1),
      q(json.encode{ rename = { { PARCEL2, "OWNER", "while the sync ran" } } }), q(marker), q(log)))))
    helper.wait_for("QGIS to hold the file", function()
      local f = io.open(marker)
      if f then f:close() end
      return f ~= nil or not helper.process_alive(pid)
    end, 60)
    assert.is_true(helper.process_alive(pid), helper.read_all(log))
    cli_sync(path1)
    helper.wait_for("QGIS to commit after the sync", function() return not helper.process_alive(pid) end, 60)
    local held = json.decode(helper.read_all(log):match("([^\n]+)\n?$"))
    assert.is_true(held.ok, helper.read_all(log))
    assert.equal(qgis_fid, held.fids[added_gid], "the fid QGIS knows stays after the sync")
    cli_sync(path1)

    local want = {
      ["update|" .. norm(PARCEL1)] = 1, ["update|" .. norm(PARCEL2)] = 2, ["delete|" .. norm(PARCEL3)] = 1,
      ["add|" .. norm(synced)] = 1, ["update|" .. norm(synced)] = 1, ["add|" .. norm(unsynced)] = 1,
      ["add|" .. norm(added_gid)] = 1,
    }
    assert.same(want, server_edits(replica1))

    assert(st2:sync(c))
    assert.equal("renamed in QGIS", st2:get(0, PARCEL1).attributes.APN)
    assert.same({ x = -117.5, y = 34.5 }, st2:get(0, PARCEL2).geometry)
    assert.equal("while the sync ran", st2:get(0, PARCEL2).attributes.OWNER)
    assert.is_nil(st2:get(0, PARCEL3))
    assert.equal("lib local renamed", st2:get(0, unsynced).attributes.APN)
    assert.equal("QGIS on a synced add", st2:get(0, synced).attributes.OWNER)
    assert.equal(0.75, st2:get(0, added_gid).attributes.ACRES)
    local st = assert(geoservices.store.open(path1))
    assert.same({}, st:pending())
    st:close()
    assert.equal("", validate(path1))
    assert.equal("", validate(st2.path))
    st2:close()
  end)
end)
