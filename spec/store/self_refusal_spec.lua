-- Issue 35, part 2: the store never refuses itself. A store sync without
-- local edits that fails after the server ran it (the result file answers
-- 404 or 500, or resets on every try; the answer is lost on every try; the
-- disk fills while the result downloads) may have moved the server's
-- generation of the replica: the store marks it unknown, and learns it once
-- it can read it. The next sync is then not taken for another copy of the
-- store ("synchronized by another copy ..."): it downloads what it missed.
-- Each ending is set up after another crew changed a feature, so that the
-- failed sync really moves the server's generation.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local F1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local CREW2 = "{5E1A0C2B-2222-4A5B-9C8D-000000000002}" -- a replica of the example world

describe("a store never refuses itself", function()
  local world = helper.store_world()
  setup(world.start)
  teardown(world.stop)
  before_each(function() world.emu:reset() end)

  local n = 0
  local function other_crew_update(owner)
    n = n + 1
    local path = ("%s/crew-2-%d.json"):format(world.dir, n)
    helper.write_file(path, json.encode{ service = "Parcels", replicaID = CREW2, model = "perReplica",
                                         replicaServerGen = 1 })
    local e = geoservices.edits()
    e:update(0, { attributes = { GlobalID = F1, OWNER = owner } })
    assert(world.client():sync(path, e))
  end

  -- the server's generation of a replica
  local function server_gen(st)
    return assert(world.client():replica_info("Parcels", st:replica().replicaID)).replicaServerGen
  end

  -- after the failed sync: the next one goes through and brings the other crew's change
  local function next_sync_goes_through(st, owner)
    world.emu:control("faults/clear", {})
    local result, err = st:sync(world.client())
    assert.is_not_nil(result, err and tostring(err))
    assert.equal(owner, st:get(0, F1).attributes.OWNER)
    assert.equal(server_gen(st), st:replica().replicaServerGen)
    -- and later ones too
    assert(st:sync(world.client()))
  end

  local ENDINGS = {
    { name = "the result file answers 404", fault = { route = "results", kind = "status", status = 404 },
      message = "synchronize again" },
    { name = "the result file answers 500 on every try", fault = { route = "results", kind = "status",
                                                                  status = 500 } },
    { name = "the result file resets on every try", fault = { route = "results", kind = "reset_mid_body" } },
    { name = "the answer is lost on every try", fault = { route = "synchronizeReplica", kind = "reset",
                                                         phase = "after" } },
  }

  for _, ending in ipairs(ENDINGS) do
    it(ending.name .. ": the next sync is not refused and downloads what was missed", function()
      local st = world.create("self-" .. ending.name:gsub("%W+", "-"))
      local owner = "crew 2: " .. ending.name
      other_crew_update(owner)
      world.emu:fault(ending.fault)
      local before = server_gen(st)
      local result, err = st:sync(world.client())
      assert.is_nil(result)
      if ending.message then assert.matches(ending.message, err.message, 1, true) end
      assert.is_true(server_gen(st) > before, "the failed sync moved the server's generation")
      assert.is_true(st:replica().replicaServerGen < server_gen(st))
      next_sync_goes_through(st, owner)
      st:close()
    end)
  end

  it("the disk is full while the result file downloads: the next sync is not refused", function()
    -- a small file system of its own (root: a tmpfs), filled the moment the sync's answer arrives
    assert.equal("0", (helper.run_shell("id -u")):match("%d+"), "this spec mounts a tmpfs: run it as root (as CI does)")
    local created = world.create("disk-full")
    local mnt = helper.tmp_dir()
    local out, ok = helper.run_shell(("mount -t tmpfs -o size=4m tmpfs %s"):format(q(mnt)))
    assert(ok, out)
    local function umount() helper.run_shell(("umount %s"):format(q(mnt))) end
    local path = mnt .. "/disk-full.gpkg"
    local copied, cok = helper.run_shell(("cp %s %s"):format(q(created.path), q(path)))
    created:close()
    assert(cok, copied)
    local st = assert(geoservices.store.open(path))
    local owner = "crew 2: a full disk"
    other_crew_update(owner)
    local before = server_gen(st)
    local client = world.client()
    local filler = mnt .. "/filler"
    local full
    client:observe(function(event)
      if event.type == "response" and event.url:match("/synchronizeReplica$") then
        local f = assert(io.open(filler, "wb"))
        local block = ("\0"):rep(4096)
        while f:write(block) do end -- until the file system is full
        f:close()
      elseif event.type == "response" and event.url:match("/replicafiles/") and event.error then
        -- the download failed for want of room; the room comes back (as when a large
        -- partial file that filled the disk is removed)
        full = #helper.read_all(filler)
        os.remove(filler)
      end
      return nil
    end)
    local result, err = st:sync(client)
    local ok2, e2 = pcall(function()
      assert.is_nil(result)
      assert.is_truthy(full and full > 0)
      assert.matches("No space left on device", err.message, 1, true)
      assert.is_true(server_gen(st) > before, "the failed sync moved the server's generation")
      next_sync_goes_through(st, owner)
    end)
    st:close()
    umount()
    if not ok2 then error(e2, 0) end
  end)
end)
