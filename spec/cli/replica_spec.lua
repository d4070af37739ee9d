-- `geoservices replica create|resume|info|unregister`: real processes
-- against the emulator. A replica is created into a state file that `sync`
-- then synchronizes, its data saved beside it; what the service cannot do is
-- refused before anything is sent; progress and --json events as sync's.
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local q = helper.shell_quote

local tmp_dir = helper.tmp_dir

local function run(args)
  local out, err = helper.tmp_name(), helper.tmp_name()
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = q(a) end
  local cmd = ("cd %s && env -u GEOSERVICES_TOKEN GEOSERVICES_TTY=0 LUA_PATH=%s LUA_CPATH=%s lua5.4 -e %s /dev/null "
    .. "%s >%s 2>%s </dev/null"):format(q(helper.ROOT), q(package.path), q(package.cpath),
      q('os.exit(require("geoservices.cli").main(arg))'), table.concat(quoted, " "), q(out), q(err))
  local _, _, code = os.execute(cmd)
  local r = { code = code, out = helper.read_all(out), err = helper.read_all(err) }
  os.remove(out)
  os.remove(err)
  return r
end

local function events(text)
  local list = {}
  for line in text:gmatch("[^\n]+") do list[#list + 1] = assert(json.decode(line), line) end
  return list
end

describe("geoservices replica", function()
  local emu, dir
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    emu:control("settings", { job_step_ms = 30 })
    dir = tmp_dir()
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  local function gs(...)
    return { "--url", emu.url, "--token", "alice-token", ... }
  end

  it("create makes a replica into a state file that sync synchronizes, the data saved beside it", function()
    local state = dir .. "/crew-1.json"
    local r = run(gs("replica", "create", "Parcels", "--layers", "0,1", "--name", "crew-1", "--poll-interval", "0.02",
                     state))
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.err:find("crew-1.json: job Completed", 1, true), r.err) -- progress: standard error
    assert.truthy(r.out:find("layer 0: 3 features, 0 attachments", 1, true), r.out)
    assert.truthy(r.out:find("replica state saved to " .. state, 1, true), r.out)
    assert.truthy(r.out:find("data saved to " .. dir .. "/crew-1.data.json", 1, true), r.out)
    local saved = json.decode(assert(helper.read_all(state)))
    assert.equal("Parcels", saved.service)
    assert.equal("perReplica", saved.model)
    assert.equal("crew-1", saved.replicaName)
    assert.equal("integer", math.type(saved.replicaServerGen))
    local data = json.decode(assert(helper.read_all(dir .. "/crew-1.data.json")))
    assert.equal(saved.replicaID, data.replicaID)
    assert.equal(3, #data.layers[1].features)
    assert.is_nil(helper.read_all(dir .. "/crew-1.job.json")) -- the journal went with the result
    r = run(gs("sync", state))
    assert.equal(0, r.code, r.out .. r.err)
    assert.is_true(json.decode(helper.read_all(state)).replicaServerGen > saved.replicaServerGen)
  end)

  it("--json reports the job, the download and the replica, then the result", function()
    local state = dir .. "/u.json"
    local r = run(gs("--json", "replica", "create", "Utilities", "--layers", "0,1,2,3", "--name", "u",
                     "--attachments", "--poll-interval", "0.02", state))
    assert.equal(0, r.code, r.out .. r.err)
    local list = events(r.out)
    local kinds = {}
    for _, e in ipairs(list) do kinds[e.event] = (kinds[e.event] or 0) + 1 end
    assert.is_true(kinds.job >= 1)
    assert.is_true(kinds.download >= 1)
    local replica
    for _, e in ipairs(list) do if e.event == "replica" then replica = e end end
    assert.equal("perLayer", replica.model)
    assert.equal(9, replica.features)
    assert.equal(2, replica.attachments)
    assert.same({ features = 2, attachments = 2 }, replica.counts["2"])
    assert.equal(4, #replica.layerServerGens)
    assert.equal(state, replica.state)
    assert.same({ event = "result", exit = 0, ok = true, command = "replica", replica = state }, list[#list])
    local saved = json.decode(helper.read_all(state))
    assert.equal("perLayer", saved.model)
    assert.equal(4, #saved.layers)
  end)

  it("into a store (OUT.gpkg) reports the store's filling after the download, and sync too", function()
    local store = dir .. "/crew.gpkg"
    local r = run(gs("replica", "create", "Parcels", "--layers", "0,1", "--name", "crew", "--poll-interval", "0.02",
                     store))
    assert.equal(0, r.code, r.out .. r.err)
    local download = r.err:find("crew.gpkg: downloading", 1, true)
    local filled = r.err:find("crew.gpkg: filling the store [%d.]+ %a+ of [%d.]+ %a+ %(100%%%), 4 records")
    assert.truthy(filled, r.err)
    assert.is_true(download == nil or download < filled, r.err)
    r = run(gs("--json", "sync", store))
    assert.equal(0, r.code, r.out .. r.err)
    local fill
    for _, e in ipairs(events(r.out)) do if e.event == "fill" then fill = e end end
    assert.is_table(fill, r.out)
    assert.is_true(fill.done)
    assert.equal(100, fill.percent)
    assert.equal(fill.total, fill.bytes)
    assert.equal("crew.gpkg", fill.replica)
  end)

  it("refuses what the service cannot do before anything is sent: exit 2, no state", function()
    local state = dir .. "/x.json"
    local r = run(gs("replica", "create", "Utilities", "--layers", "0", "--model", "perReplica", state))
    assert.equal(2, r.code, r.out .. r.err)
    assert.truthy(r.err:find("syncModel", 1, true), r.err)
    assert.truthy(r.err:find("supportsPerReplicaSync", 1, true), r.err)
    assert.equal(0, emu:count("createReplica"))
    assert.is_nil(helper.read_all(state))
    local f = assert(io.open(state, "w"))
    f:write("{}")
    f:close()
    r = run(gs("replica", "create", "Parcels", "--layers", "0", state))
    assert.equal(2, r.code, r.out .. r.err)
    assert.truthy(r.err:find("never overwrites", 1, true), r.err)
    assert.equal(0, emu:count("createReplica"))
    r = run(gs("replica", "create", "Parcels", state .. "2"))
    assert.equal(2, r.code, r.out .. r.err) -- --layers is required
  end)

  it("--dry-run shows the createReplica request, other parameters passed through, and sends nothing", function()
    local state = dir .. "/d.json"
    local before = emu:requests().total
    local r = run(gs("--dry-run", "replica", "create", "Parcels", "--layers", "0", "--name", "d", "--direction",
                     "download", "--geometry=-117.2,34.05,-117.19,34.06", "--param", "transformations=[1]", state))
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("/FeatureServer/createReplica", 1, true), r.out)
    assert.truthy(r.out:find("transformations = [1]", 1, true), r.out)
    assert.truthy(r.out:find("geometryType = esriGeometryEnvelope", 1, true), r.out)
    assert.truthy(r.out:find("token = <redacted>", 1, true), r.out)
    assert.equal(before, emu:requests().total)
    assert.is_nil(helper.read_all(state))
  end)

  it("info shows the local state beside the server's; unregister makes the server forget it", function()
    local state = dir .. "/c.json"
    assert.equal(0, run(gs("replica", "create", "Parcels", "--layers", "0", "--name", "c", "--sync", state)).code)
    local r = run(gs("replica", "info", state))
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("c.json: replica c {", 1, true), r.out)
    assert.truthy(r.out:find("model        perReplica               perReplica", 1, true), r.out)
    r = run(gs("--json", "replica", "info", state))
    local info = events(r.out)[1]
    assert.equal("replica_info", info.event)
    assert.is_true(info.in_step)
    assert.same({ 0 }, info.server.layers)
    assert.equal(info["local"].generation, info.server.generation)
    r = run(gs("replica", "unregister", state))
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("unregistered; the state file is marked closed", 1, true), r.out)
    local saved = json.decode(helper.read_all(state))
    assert.is_true(saved.closed)
    assert.is_string(saved.unregistered)
    r = run(gs("sync", state))
    assert.equal(2, r.code, r.out .. r.err)
    assert.truthy(r.err:find("unregistered", 1, true), r.err)
    r = run(gs("replica", "info", state))
    assert.equal(1, r.code, r.out .. r.err)
    assert.truthy(r.err:find("does not exist", 1, true), r.err)
    r = run(gs("replica", "info", dir .. "/none.json"))
    assert.equal(2, r.code, r.out .. r.err)
  end)

  it("resume follows a createReplica job an interrupted create journaled, and create points to it", function()
    local state = dir .. "/j.json"
    local client = geoservices.client{ url = emu.url, token = "alice-token" }
    local op = assert(client:create_replica("Parcels", { replicaName = "j", layers = { 0, 1 } }, { wait = false }))
    local f = assert(io.open(dir .. "/j.job.json", "w"))
    f:write(op:to_json())
    f:close()
    local r = run(gs("replica", "create", "Parcels", "--layers", "0", state))
    assert.equal(2, r.code, r.out .. r.err)
    assert.truthy(r.err:find("replica resume " .. state, 1, true), r.err)
    r = run(gs("replica", "resume", state, "--poll-interval", "0.02"))
    assert.equal(0, r.code, r.out .. r.err)
    local saved = json.decode(assert(helper.read_all(state)))
    assert.equal("j", saved.replicaName)
    assert.is_nil(helper.read_all(dir .. "/j.job.json"))
    assert.equal(4, #json.decode(helper.read_all(dir .. "/j.data.json")).layers[1].features
      + #json.decode(helper.read_all(dir .. "/j.data.json")).layers[2].features)
    -- a complete replica: resume is a no-op that says so (issue 39 item 1)
    r = run(gs("replica", "resume", state))
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find(state .. " is complete (replica ", 1, true), r.out)
    assert.truthy(r.out:find("nothing to resume", 1, true), r.out)
  end)

  it("resume of a store whose create was interrupted after the commit: complete, nothing downloaded again",
    function()
      local path = dir .. "/late.gpkg"
      local client = geoservices.client{ url = emu.url, token = "alice-token" }
      local op = assert(client:create_replica("Parcels", { replicaName = "late", layers = { 0 } }, { wait = false }))
      local journal = op:to_json()
      helper.write_file(path .. ".job.json", journal)
      local r = run(gs("replica", "resume", path, "--poll-interval", "0.02"))
      assert.equal(0, r.code, r.out .. r.err)
      assert.is_nil(helper.read_all(path .. ".job.json"))
      -- Ctrl-C between the store's commit and the journal's removal leaves both
      helper.write_file(path .. ".job.json", journal)
      local before = emu:requests().counts
      r = run(gs("replica", "resume", path, "--poll-interval", "0.02"))
      assert.equal(0, r.code, r.out .. r.err)
      assert.truthy(r.out:find(path .. " is complete (replica ", 1, true), r.out)
      assert.is_nil(helper.read_all(path .. ".job.json"))
      assert.same(before, emu:requests().counts) -- nothing asked of the server, nothing downloaded
    end)

  it("resume removes the partial download a killed create left (a store and a state file)", function()
    local client = geoservices.client{ url = emu.url, token = "alice-token" }
    for _, case in ipairs{ { out = dir .. "/k.gpkg", part = dir .. "/k.gpkg.download.json.partQ1w2E3" },
                           { out = dir .. "/k.json", part = dir .. "/k.data.json.partR4t5Y6" } } do
      local op = assert(client:create_replica("Parcels", { replicaName = "k", layers = { 0 } }, { wait = false }))
      helper.write_file(case.out:gsub("%.json$", "") .. ".job.json", op:to_json()) -- as create journals it
      helper.write_file(case.part, ("{"):rep(1000)) -- the download the killed create was saving
      local r = run(gs("replica", "resume", case.out, "--poll-interval", "0.02"))
      assert.equal(0, r.code, r.out .. r.err)
      assert.is_nil(helper.read_all(case.part), "the partial download is gone")
      assert.is_not_nil(helper.read_all(case.out))
    end
  end)
end)
