-- Attachments with their bytes (issue 28, item 5): a store made with
-- returnAttachments holds each attachment's content in a media table of the
-- GeoPackage Related Tables Extension, linked to its feature, which GDAL
-- lists (and QGIS shows); the bytes are the server's, fetched by URL as the
-- vendor documents, with flat memory for a large one.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local run = helper.run_shell

local function sha256_of_file(path)
  return (run("sha256sum " .. q(path)):match("^(%x+)"))
end

local function sha256(bytes)
  local path = helper.tmp_name()
  helper.write_file(path, bytes)
  local h = sha256_of_file(path)
  os.remove(path)
  return h
end

-- A PNG of one pixel: a sample of real attachment bytes (NULs and high bytes)
local PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
local PARCEL_1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL_2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local PHOTO = "{AA000000-0000-4000-8000-000000000001}"
local SCAN = "{AA000000-0000-4000-8000-000000000002}"
local LARGE = 5 * 1024 * 1024

-- the example world, with attachments on the parcels: a small PNG given
-- as base64, and a 5 MiB scan the emulator makes up from its size
local function data_file(dir)
  local world = json.decode(helper.read_all("examples/data/world.json"))
  local layer = world.featureServices.Parcels.layers[1]
  layer.hasAttachments = true
  layer.attachments = {
    { globalId = PHOTO, parentGlobalId = PARCEL_1, name = "photo.png", contentType = "image/png", data = PNG },
    { globalId = SCAN, parentGlobalId = PARCEL_1, name = "scan.tif", contentType = "image/tiff", size = LARGE },
  }
  local path = dir .. "/world.json"
  helper.write_file(path, json.encode(world))
  return path
end

describe("a store's attachments", function()
  local emu, dir

  setup(function()
    dir = helper.tmp_dir()
    emu = helper.start_emulator{ data = data_file(dir) }
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  local function client() return geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 } end

  local function sqlite(path, sql) return (run("sqlite3 " .. q(path) .. " " .. q(sql))) end

  it("are downloaded with their bytes into a media table GDAL lists, linked to their feature", function()
    local path = dir .. "/crew.gpkg"
    local st = assert(geoservices.store.create(client(), path, { service = "Parcels", layers = { 0 },
      replicaName = "att-1", syncModel = "perReplica", returnAttachments = true }, { timeout = 30 }))
    assert.same({ fetched = 2, bytes = LARGE + 70, failed = {} }, st.created.attachments)
    st:close()

    -- the bytes are the server's (its attachment resource's content)
    local url = sqlite(path, "SELECT url FROM geoservices_attachments WHERE name = 'scan.tif'"):gsub("\n$", "")
    assert.matches("/Parcels/FeatureServer/0/1/attachments/%d+$", url)
    local c = client()
    local served = assert(c:download(url))
    c:close()
    local out = sqlite(path, "SELECT name || ' ' || content_type || ' ' || length(data) || ' ' "
      .. "|| hex(substr(data, 1, 8)) FROM geoservices_attachments ORDER BY name")
    assert.equal(("photo.png image/png 70 89504E470D0A1A0A\nscan.tif image/tiff %d %s\n"):format(LARGE,
      (SCAN .. "\n"):sub(1, 8):gsub(".", function(ch) return ("%02X"):format(ch:byte()) end)), out)
    local blob = dir .. "/scan.bin"
    sqlite(path, ("SELECT writefile('%s', data) FROM geoservices_attachments WHERE name = 'scan.tif'"):format(blob))
    assert.equal(sha256(served), sha256_of_file(blob))

    -- linked to parcel 1 through the Related Tables Extension's mapping table
    assert.equal("media|gpkgext_geoservices_attachments_Parcels|fid\n", sqlite(path,
      "SELECT relation_name, mapping_table_name, base_primary_column FROM gpkgext_relations"))
    assert.equal(PARCEL_1 .. "|photo.png\n" .. PARCEL_1 .. "|scan.tif\n", sqlite(path,
      "SELECT f.GlobalID, a.name FROM gpkgext_geoservices_attachments_Parcels m JOIN Parcels f ON f.fid = m.base_id "
      .. "JOIN geoservices_attachments a ON a.id = m.related_id ORDER BY a.name"))

    -- GDAL sees the media table and the relationship (python3-gdal: the system Python)
    local info = run("ogrinfo -ro -so " .. q(path))
    assert.matches("geoservices_attachments (None)", info, 1, true)
    local relation = run("/usr/bin/python3 -c " .. q("import sys\nfrom osgeo import gdal\n"
      .. "ds = gdal.OpenEx(sys.argv[1])\nfor n in ds.GetRelationshipNames() or []:\n"
      .. "  r = ds.GetRelationship(n)\n"
      .. "  print(r.GetLeftTableName(), r.GetRightTableName(), r.GetMappingTableName(), r.GetRelatedTableType())")
      .. " " .. q(path))
    assert.equal("Parcels geoservices_attachments gpkgext_geoservices_attachments_Parcels media\n", relation)
    local validator = run("/usr/bin/python3 -m osgeo_utils.samples.validate_gpkg -k " .. q(path))
    assert.equal("", (validator:gsub("Req 152: Inconsistent empty_flag vs geometry content\n?", "")))
  end)

  it("a 5 MiB attachment is fetched with flat memory (a child process's peak RSS)", function()
    local path = dir .. "/crew.gpkg" -- made by the first test: its scan is fetched again
    assert.equal("", sqlite(path, "UPDATE geoservices_attachments SET data = x'', fetched_at = NULL "
      .. "WHERE name = 'scan.tif'"))
    local script = helper.tmp_name()
    helper.write_file(script, [[
      local geoservices = require "geoservices"
      local function hwm() return tonumber(io.open("/proc/self/status"):read("a"):match("VmHWM:%s*(%d+)")) end
      local st = assert(geoservices.store.open(arg[1]))
      local c = geoservices.client{ url = arg[2], token = "alice-token", timeout = 30 }
      local before = hwm()
      local r = require("geoservices.store.file.attachments").fetch(st, c)
      print(r.fetched, r.bytes, hwm() - before)
    ]])
    local out = run(("LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s %s"):format(q(package.path), q(package.cpath),
      q(script), q(path), q(emu.url)))
    os.remove(script)
    local fetched, bytes, grew = out:match("^(%d+)%s+(%d+)%s+(%d+)")
    assert.same({ "1", tostring(LARGE) }, { fetched, bytes }, out)
    -- of a 5120 KiB file: SQLite's page cache (2 MiB) and the download's buffers, never the file
    assert.is_true(tonumber(grew) < 4096, "peak RSS grew by " .. tostring(grew) .. " KiB")
  end)

  it("one that cannot be downloaded is reported, left unfetched, and fetched by the next sync", function()
    emu:fault{ route = "attachment", attempts = { emu:count("attachment") + 1 }, kind = "status", status = 404 }
    local path = dir .. "/crew-2.gpkg"
    local c = client()
    local st = assert(geoservices.store.create(c, path, { service = "Parcels", layers = { 0 },
      replicaName = "att-2", syncModel = "perReplica", returnAttachments = true }, { timeout = 30 }))
    local report = st.created.attachments
    assert.equal(1, report.fetched)
    assert.equal(1, #report.failed)
    assert.same({ PHOTO, "photo.png" }, { report.failed[1].globalId, report.failed[1].name })
    assert.matches("HTTP 404", report.failed[1].message, 1, true)
    assert.equal("photo.png 0 0\nscan.tif " .. LARGE .. " 1\n", (sqlite(path,
      "SELECT name, length(data), fetched_at IS NOT NULL FROM geoservices_attachments ORDER BY name"):gsub("|", " ")))

    local result = assert(st:sync(c))
    assert.same({ fetched = 1, bytes = 70, failed = {} }, result.attachments)
    st:close()
    c:close()
    assert.equal("photo.png 70 1 89504E470D0A1A0A\nscan.tif " .. LARGE .. " 1 7B41413030303030\n", (sqlite(path,
      "SELECT name, length(data), fetched_at IS NOT NULL, hex(substr(data, 1, 8)) FROM geoservices_attachments "
      .. "ORDER BY name"):gsub("|", " ")))
  end)

  -- attachment edits of one store's replica that reached the server: op|GlobalID -> times
  local function server_attachment_edits(replica_id)
    local counts = {}
    for _, e in ipairs(emu:control("changelog?service=Parcels").entries) do
      if e.target == "attachments" and e.origin == replica_id and not e.refused then
        local k = e.op .. "|" .. e.globalId
        counts[k] = (counts[k] or 0) + 1
      end
    end
    return counts
  end

  it("added and deleted locally (Lua, sqlite3 as QGIS would) are uploaded and sent once, bytes intact", function()
    local path = dir .. "/crew-3.gpkg"
    local c = client()
    local st = assert(geoservices.store.create(c, path, { service = "Parcels", layers = { 0 },
      replicaName = "att-3", syncModel = "perReplica", returnAttachments = true }, { timeout = 30 }))
    local note_bytes = "hello\0world\255"
    local note = assert(st:add_attachment(0, PARCEL_1, { name = "note.bin", content_type = "application/octet-stream",
      data = note_bytes }))
    local file = dir .. "/plan.pdf"
    local plan_bytes = ("%PDF-1.4\n" .. ("x"):rep(1000)):rep(1024) -- about 1 MiB, from a file
    helper.write_file(file, plan_bytes)
    local plan = assert(st:add_attachment(0, PARCEL_2, { path = file, content_type = "application/pdf" }))
    assert(st:delete_attachment(SCAN))
    -- QGIS adds a media row and links it to a feature: the mapping table's trigger queues it
    local qgis = "{AA000000-0000-4000-8000-0000000000AA}"
    assert.equal("", sqlite(path, ("INSERT INTO geoservices_attachments (global_id, name, content_type, data) "
      .. "VALUES ('%s', 'qgis.txt', 'text/plain', CAST('from QGIS' AS BLOB)); "
      .. "INSERT INTO gpkgext_geoservices_attachments_Parcels (base_id, related_id) SELECT f.fid, a.id FROM Parcels f, "
      .. "geoservices_attachments a WHERE f.GlobalID = '%s' AND a.global_id = '%s';"):format(qgis, PARCEL_1, qgis)))
    local queued = {}
    for _, e in ipairs(st:attachment_edits()) do
      queued[#queued + 1] = e.op .. " " .. e.globalId .. " " .. e.parentGlobalId
    end
    assert.same({ "add " .. note .. " " .. PARCEL_1, "add " .. plan .. " " .. PARCEL_2,
                  "delete " .. SCAN .. " " .. PARCEL_1, "add " .. qgis .. " " .. PARCEL_1 }, queued)

    local result = assert(st:sync(c))
    assert.same({ applied = 4, requeued = 0, failed = {}, not_uploaded = {} }, result.attachment_edits)
    assert.same({}, st:attachment_edits())
    assert(st:sync(c)) -- a download relinks the attachments: nothing is queued again
    assert.same({}, st:attachment_edits())
    local rid = st:replica().replicaID
    st:close()
    assert.same({ ["add|" .. note] = 1, ["add|" .. plan] = 1, ["add|" .. qgis] = 1, ["delete|" .. SCAN] = 1 },
      server_attachment_edits(rid))

    -- another store receives them with the same bytes, and not the deleted scan
    local other = dir .. "/crew-4.gpkg"
    local st2 = assert(geoservices.store.create(c, other, { service = "Parcels", layers = { 0 },
      replicaName = "att-4", syncModel = "perReplica", returnAttachments = true }, { timeout = 30 }))
    assert.same({}, st2.created.attachments.failed)
    st2:close()
    c:close()
    local function digest(p, name)
      local out = dir .. "/" .. name .. ".out"
      sqlite(p, ("SELECT writefile('%s', data) FROM geoservices_attachments WHERE name = '%s'"):format(out, name))
      return sha256_of_file(out)
    end
    assert.equal(sha256(note_bytes), digest(other, "note.bin"))
    assert.equal(sha256(plan_bytes), digest(other, "plan.pdf"))
    assert.equal(sha256("from QGIS"), digest(other, "qgis.txt"))
    assert.equal("0\n", sqlite(other, "SELECT count(*) FROM geoservices_attachments WHERE name = 'scan.tif'"))
  end)

  it("a 5 MiB attachment added from a file is stored and uploaded with flat memory (a child's peak RSS)", function()
    local c = client()
    local path = dir .. "/crew-mem.gpkg"
    assert(geoservices.store.create(c, path, { service = "Parcels", layers = { 0 },
      replicaName = "att-mem", syncModel = "perReplica", returnAttachments = true }, { timeout = 30 })):close()
    c:close()
    local big, small = dir .. "/big.bin", dir .. "/small.bin"
    helper.write_file(big, ("0123456789abcdef"):rep(LARGE // 16))
    helper.write_file(small, "small")
    local script = helper.tmp_name()
    helper.write_file(script, [[
      local geoservices = require "geoservices"
      local function hwm() return tonumber(io.open("/proc/self/status"):read("a"):match("VmHWM:%s*(%d+)")) end
      local st = assert(geoservices.store.open(arg[1]))
      local c = geoservices.client{ url = arg[2], token = "alice-token", timeout = 30 }
      local before = hwm()
      assert(st:add_attachment(0, arg[4], { path = arg[3], content_type = "application/octet-stream" }))
      local r = assert(st:sync(c))
      print(r.attachment_edits.applied, hwm() - before)
    ]])
    -- the same add and sync of 5 bytes, then of 5 MiB: what the size costs
    local grew = {}
    for _, file in ipairs{ small, big } do
      local out = run(("LUA_PATH=%s LUA_CPATH=%s lua5.4 %s %s %s %s %s"):format(q(package.path), q(package.cpath),
        q(script), q(path), q(emu.url), q(file), q(PARCEL_2)))
      local applied, kib = out:match("^(%d+)%s+(%d+)")
      assert.equal("1", applied, out)
      grew[#grew + 1] = tonumber(kib)
    end
    os.remove(script)
    assert.is_true(grew[2] - grew[1] < 4096, ("peak RSS grew by %d KiB, %d KiB for 5 bytes"):format(grew[2], grew[1]))
  end)

  it("whose answer was lost are read back, never sent twice", function()
    local path = dir .. "/crew-5.gpkg"
    local c = client()
    local st = assert(geoservices.store.create(c, path, { service = "Parcels", layers = { 0 },
      replicaName = "att-5", syncModel = "perReplica", returnAttachments = true }, { timeout = 30 }))
    local gid = assert(st:add_attachment(0, PARCEL_2, { name = "lost.txt", content_type = "text/plain",
      data = "answer lost" }))
    emu:fault{ route = "synchronizeReplica", attempts = { emu:count("synchronizeReplica") + 1 }, kind = "reset",
               phase = "after" }
    local result, err = st:sync(c)
    assert.is_nil(result, "the answer was lost")
    assert.is_truthy(err)
    assert.same({}, st:attachment_edits()) -- read back: the server has it
    result = assert(st:sync(c))
    assert.same({ applied = 0, requeued = 0, failed = {}, not_uploaded = {} }, result.attachment_edits)
    local rid = st:replica().replicaID
    st:close()
    c:close()
    assert.same({ ["add|" .. gid] = 1 }, server_attachment_edits(rid))
  end)
end)
