-- The progress display runs on a timer, not only on events (issue 29): on a
-- terminal (a real pseudo-terminal here) the elapsed time keeps ticking
-- while a job waits, a download shows its bytes, rate and ETA and keeps
-- moving while no byte arrives, the store's filling shows a bar and records
-- per second; with --json, progress events come at a bounded rate; without
-- a terminal the output stays quiet (no redrawn line, no ticks).
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local q = helper.shell_quote
local CLI = 'os.exit(require("geoservices.cli").main(arg))'
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"

-- A module path whose relative entries are made absolute.
local function absolute(path)
  return (path:gsub("[^;]+", function(entry)
    if entry:sub(1, 1) == "/" then return entry end
    return helper.ROOT .. "/" .. entry
  end))
end

-- Runs the command under a pty to its end: {exit, output, chunks = {{t, text}...}}.
local function pty(dir, args)
  local quoted = {}
  for i, a in ipairs(args) do quoted[i] = q(a) end
  local p = io.popen(("cd %s && env -u GEOSERVICES_TTY -u GEOSERVICES_TOKEN LUA_PATH=%s LUA_CPATH=%s "
    .. "XDG_CONFIG_HOME=%s "
    .. helper.PYTHON .. " %s/spec/support/pty_run.py 60 lua5.4 -e %s /dev/null %s"):format(q(dir),
      q(absolute(package.path)), q(absolute(package.cpath)), q(dir .. "/config"), q(helper.ROOT), q(CLI),
      table.concat(quoted, " ")))
  local result = json.decode(p:read("a"))
  p:close()
  return result
end

-- The lines a terminal display drew, in order, with when: {t =, text =}
-- (each redraw starts with "\r\27[2K").
local function frames(result)
  local list = {}
  for _, chunk in ipairs(result.chunks) do
    for piece in (chunk[2] .. "\r"):gmatch("(.-)\r") do
      local text = piece:gsub("\27%[[%d;]*[A-Za-z]", ""):gsub("\n", "")
      if text ~= "" then list[#list + 1] = { t = chunk[1], text = text } end
    end
  end
  return list
end

-- The longest time between two frames that match `pattern`, from the first to the last of them.
local function longest_gap(list, pattern)
  local last, gap = nil, 0
  for _, f in ipairs(list) do
    if f.text:find(pattern) then
      if last then gap = math.max(gap, f.t - last) end
      last = f.t
    end
  end
  return gap
end

describe("the progress display", function()
  local emu, dir
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)
  before_each(function()
    emu:reset()
    dir = helper.tmp_dir()
    helper.write_file(dir .. "/crew.json", json.encode{ service = "Parcels", replicaID = CREW1,
                                                      model = "perReplica", replicaServerGen = 1 })
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  it("ticks the elapsed time while an async job waits between polls", function()
    emu:control("settings", { job_step_ms = 700 })
    local r = pty(dir, { "--url", emu.url, "--token", "alice-token", "sync", "crew.json", "--async",
                         "--poll-interval", "1.5" })
    assert.equal(0, r.exit, r.output)
    local list = frames(r)
    local seen = {}
    for _, f in ipairs(list) do
      local status, elapsed = f.text:match("crew%.json (%a+), ([%d.]+) s")
      if status then seen[#seen + 1] = elapsed end
    end
    assert.is_true(#seen >= 10, "the elapsed time was drawn " .. #seen .. " times: " .. r.output)
    -- a display drawn only when a poll answers stands still for the poll
    -- interval (1.5 s); the bound leaves a loaded machine's stalls room below it
    assert.is_true(longest_gap(list, "crew%.json %a+, ") <= 1, "the display stood still: " .. r.output)
  end)

  it("shows a download's bytes, rate and ETA, and keeps moving while no byte arrives", function()
    local FEATURE = '{"attributes":{"OBJECTID":%d,"GlobalID":"{%08X-0000-4000-8000-000000000000}","APN":"%d"},'
      .. '"geometry":{"x":%d.5,"y":4036100.75}}'
    local parts = {}
    for i = 1, 4000 do parts[i] = FEATURE:format(i, i, i, -13045900 + i) end
    local file = dir .. "/result.json"
    helper.write_file(file, ('{"replicaName":"crew-9","replicaID":"{A2B4C6D8-1234-4ABC-9DEF-0123456789AB}",'
      .. '"replicaServerGen":5,"transportType":"esriTransportTypeUrl","responseType":"esriReplicaResponseTypeData",'
      .. '"layers":[{"id":0,"features":[%s],"attachments":[]}]}'):format(table.concat(parts, ",")))
    local size = #helper.read_all(file)
    local base = "/server/Parcels/FeatureServer"
    local s = helper.start_scripted{ routes = {
      { method = "POST", path = base, responses = { { json = {
        currentVersion = 11.1, serviceDescription = "", hasVersionedData = false, supportsDisconnectedEditing = true,
        maxRecordCount = 2000, capabilities = "Create,Delete,Query,Sync,Update,Uploads,Editing", syncEnabled = true,
        spatialReference = { wkid = 102100, latestWkid = 3857 },
        syncCapabilities = { supportsAsync = true, supportsPerReplicaSync = true, supportsPerLayerSync = true,
                             supportsSyncDirectionControl = true, supportsRollbackOnFailure = false },
        layers = { { id = 0, name = "Parcels", geometryType = "esriGeometryPoint" } }, tables = json.array(),
      } } } },
      { method = "POST", path = base .. "/createReplica", responses = { { json = {
        transportType = "esriTransportTypeUrl", responseUrl = "{ROOT}/files/result.json" } } } },
      { method = "GET", path = "/files/result.json",
        responses = { { file = file, pause_at = size // 2, pause = 2, ranges = true } } },
    } }
    finally(function() s:stop() end)
    local r = pty(dir, { "--url", s.url, "--token", "t", "replica", "create", "Parcels", "--layers", "0", "--sync",
                         "crew-9.json" })
    assert.equal(0, r.exit, r.output)
    local list = frames(r)
    local with_rate
    for _, f in ipairs(list) do
      if f.text:find("downloading", 1, true) and f.text:find("/s", 1, true) and f.text:find("ETA", 1, true) then
        with_rate = f.text
      end
    end
    assert.is_string(with_rate, "no rate and ETA: " .. r.output)
    assert.truthy(with_rate:find("%d+%% [%d.]+ %a+ of [%d.]+ %a+"), with_rate)
    -- a display drawn only when bytes arrive stands still for the server's pause (2 s)
    assert.is_true(longest_gap(list, "downloading") <= 1, "the display stood still: " .. r.output)
  end)

  it("quiet without a terminal: no line redrawn, no tick", function()
    emu:control("settings", { job_step_ms = 300 })
    local r = helper.run_cli({ "--url", emu.url, "--token", "alice-token", "sync", dir .. "/crew.json", "--async",
                               "--poll-interval", "0.5" }, { XDG_CONFIG_HOME = dir .. "/config" })
    assert.equal(0, r.code, r.out .. r.err)
    assert.falsy(r.out:find("\r", 1, true), r.out)
    assert.falsy(r.out:find("\27[", 1, true), r.out)
    assert.falsy(r.out:find(" s\n", 1, true), r.out) -- no elapsed times
  end)

  it("--json: progress events at most once a second, each with the phase and the elapsed time", function()
    emu:control("settings", { job_step_ms = 700 })
    local r = helper.run_cli({ "--url", emu.url, "--token", "alice-token", "--json", "sync", dir .. "/crew.json",
                               "--async", "--poll-interval", "1.5" }, { XDG_CONFIG_HOME = dir .. "/config" })
    assert.equal(0, r.code, r.out .. r.err)
    local list = helper.events(r.out)
    local progress = helper.find_events(list, "progress")
    assert.is_true(#progress >= 2, r.out)
    for i, ev in ipairs(progress) do
      assert.equal("crew.json", ev.replica)
      assert.is_string(ev.phase)
      assert.is_number(ev.elapsed)
      if i > 1 then assert.is_true(ev.elapsed - progress[i - 1].elapsed >= 0.9, r.out) end
    end
    assert.equal("result", list[#list].event)
  end)
end)

describe("the store filling", function()
  local emu, dir
  setup(function()
    dir = helper.tmp_dir()
    local world = json.decode(helper.read_all(helper.ROOT .. "/examples/data/world.json"))
    local hydrants = world.featureServices.Parcels.layers[2]
    local features = {}
    for i = 1, 40000 do
      features[i] = { attributes = { GlobalID = ("{%08X-3A4B-4C5D-8E6F-0A1B2C3D4E01}"):format(i),
                                     FACILITYID = ("H-%05d"):format(i), STATUS = "In service" },
                      geometry = { x = -117.19 + i * 1e-6, y = 34.05 } }
    end
    hydrants.features = features
    helper.write_file(dir .. "/world.json", json.encode(world))
    emu = helper.start_emulator{ data = dir .. "/world.json" }
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  it("shows a bar and records per second while the store fills", function()
    local r = pty(dir, { "--url", emu.url, "--token", "admin-token", "replica", "create", "Parcels", "--layers", "1",
                         "--poll-interval", "0.1", "hydrants.gpkg" })
    assert.equal(0, r.exit, r.output)
    local bar, rate
    for _, f in ipairs(frames(r)) do
      if f.text:find("filling the store %[[#.]+%] +%d+%%") then bar = f.text end
      if f.text:find("filling the store", 1, true) and f.text:find("[%d,]+ records/s") then rate = f.text end
    end
    assert.is_string(bar, r.output)
    assert.is_string(rate, r.output)
    assert.truthy(r.output:find("40000 features", 1, true), r.output)
  end)
end)

describe("the progress line", function()
  local watch = require "geoservices.cli.watch"

  it("a rate over the last seconds, none until the samples span a quarter second", function()
    local m = watch.meter()
    m.add(0, 0)
    assert.is_nil(m.rate(0.1))
    m.add(2, 2 * 1024 * 1024)
    assert.equal(1024 * 1024, m.rate(2))
    assert.equal(512 * 1024, m.rate(4)) -- nothing came since: the rate falls
  end)

  it("a download: bar, bytes, rate and ETA; a fill: records per second; a wait: the elapsed time", function()
    local MiB = 1024 * 1024
    assert.equal("a.gpkg downloading [##########..........]  50% 5.0 MiB of 10.0 MiB, 1.0 MiB/s, ETA 5.0 s",
      watch.render({ name = "a.gpkg", phase = "downloading", bytes = 5 * MiB, total = 10 * MiB, frame = 0,
                     download_rate = MiB, started = 0 }, 5))
    assert.equal("a.gpkg filling the store [#####...............]  25% 1.0 MiB of 4.0 MiB, 100 records, "
      .. "2000 records/s, ETA 1m30s", watch.render({ name = "a.gpkg", phase = "filling", filled = MiB,
        fill_total = 4 * MiB, fill_records = 100, records_rate = 2000, fill_rate = 3 * MiB / 90, started = 0 }, 1))
    assert.equal("| a.gpkg Pending, 12.5 s",
      watch.render({ name = "a.gpkg", phase = "job", status = "Pending", frame = 0, started = 10 }, 22.5))
  end)
end)
