-- Local attachment edits beyond adds and deletes (issue 27 leftovers): an
-- attachment whose bytes are replaced or which is renamed in the file (as
-- QGIS, GDAL or sqlite3 would) is queued and uploaded as an attachment
-- update; edits of one attachment fold as feature edits do; an attachment
-- edit the server refuses is listed with the failed edits, in `geoservices
-- status` and `pending`, and can be discarded; a deleted feature's
-- attachments leave no orphan rows; an attachment that cannot be downloaded
-- is tried again by the next sync.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local run = helper.run_shell

local PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
local PARCEL_1 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}"
local PARCEL_2 = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E02}"
local PHOTO = "{AA000000-0000-4000-8000-000000000001}"
local SCAN = "{AA000000-0000-4000-8000-000000000002}"
local MEMO = "{AA000000-0000-4000-8000-000000000003}"

local function data_file(dir)
  local world = json.decode(helper.read_all("examples/data/world.json"))
  local layer = world.featureServices.Parcels.layers[1]
  layer.hasAttachments = true
  layer.attachments = {
    { globalId = PHOTO, parentGlobalId = PARCEL_1, name = "photo.png", contentType = "image/png", data = PNG },
    { globalId = SCAN, parentGlobalId = PARCEL_1, name = "scan.tif", contentType = "image/tiff", size = 3000 },
    { globalId = MEMO, parentGlobalId = PARCEL_2, name = "memo.txt", contentType = "text/plain", size = 100 },
  }
  local path = dir .. "/world.json"
  helper.write_file(path, json.encode(world))
  return path
end

describe("local attachment edits", function()
  local emu, dir, n

  setup(function()
    dir = helper.tmp_dir()
    emu = helper.start_emulator{ data = data_file(dir) }
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)
  before_each(function() emu:reset() end)

  local function client() return geoservices.client{ url = emu.url, token = "alice-token", timeout = 30 } end
  local function sqlite(path, sql) return (run("sqlite3 " .. q(path) .. " " .. q(sql))) end

  local function create(name)
    n = (n or 0) + 1
    local path = ("%s/%s-%d.gpkg"):format(dir, name, n)
    local c = client()
    local st = assert(geoservices.store.create(c, path, { service = "Parcels", layers = { 0 },
      replicaName = name .. n, syncModel = "perReplica", returnAttachments = true }, { timeout = 30 }))
    assert.same({}, st.created.attachments.failed)
    return st, c
  end

  local function queued(st)
    local list = {}
    for _, e in ipairs(st:attachment_edits()) do list[#list + 1] = e.op .. " " .. e.globalId end
    return list
  end

  -- attachment edits of a replica that reached the server (not the server's
  -- own deletes of a deleted feature's attachments): op|GlobalID -> times
  local function server_edits(replica_id)
    local counts = {}
    for _, e in ipairs(emu:control("changelog?service=Parcels").entries) do
      if e.target == "attachments" and e.origin == replica_id and not e.refused and not e.cascade then
        local k = e.op .. "|" .. e.globalId
        counts[k] = (counts[k] or 0) + 1
      end
    end
    return counts
  end

  local function bytes_of(path, gid)
    local out = dir .. "/bytes.out"
    os.remove(out)
    sqlite(path, ("SELECT writefile('%s', data) FROM geoservices_attachments WHERE global_id = '%s'"):format(out, gid))
    local f = io.open(out, "rb")
    if not f then return nil end
    local b = f:read("a")
    f:close()
    return b
  end

  it("replaced bytes and a new name (sqlite3, as QGIS writes) are uploaded as one update, once", function()
    local st, c = create("upd")
    local uploads = emu:count("upload")
    assert.equal("", sqlite(st.path, ("UPDATE geoservices_attachments SET data = CAST('new scan' AS BLOB), "
      .. "name = 'scan-v2.txt', content_type = 'text/plain' WHERE global_id = '%s'"):format(SCAN)))
    assert.same({ "update " .. SCAN }, queued(st))
    -- a second change of the same attachment folds into the queued update
    assert.equal("", sqlite(st.path, ("UPDATE geoservices_attachments SET name = 'scan-v3.txt' "
      .. "WHERE global_id = '%s'"):format(SCAN)))
    assert.same({ "update " .. SCAN }, queued(st))
    -- a rename alone: no bytes to upload
    assert.equal("", sqlite(st.path, ("UPDATE geoservices_attachments SET name = 'memo-renamed.txt' "
      .. "WHERE global_id = '%s'"):format(MEMO)))
    assert.same({ "update " .. SCAN, "update " .. MEMO }, queued(st))
    local result = assert(st:sync(c))
    assert.same({ applied = 2, requeued = 0, failed = {}, not_uploaded = {} }, result.attachment_edits)
    assert.equal(uploads + 1, emu:count("upload"))
    assert.same({}, queued(st))
    assert(st:sync(c)) -- fetching and relinking queue nothing
    assert.same({}, queued(st))
    local rid = st:replica().replicaID
    st:close()
    assert.same({ ["update|" .. SCAN] = 1, ["update|" .. MEMO] = 1 }, server_edits(rid))

    local other = create("upd-other")
    other:close()
    assert.equal("new scan", bytes_of(other.path, SCAN))
    assert.equal("memo-renamed.txt|text/plain\nscan-v3.txt|text/plain\n", sqlite(other.path,
      "SELECT name, content_type FROM geoservices_attachments WHERE name NOT LIKE 'photo%' ORDER BY name"))
    c:close()
  end)

  it("fold as feature edits: add then update is one add, update then delete a delete, add then delete nothing",
    function()
    local st, c = create("fold")
    local added = assert(st:add_attachment(0, PARCEL_2, { name = "a.txt", content_type = "text/plain",
      data = "first" }))
    assert.equal("", sqlite(st.path, ("UPDATE geoservices_attachments SET data = CAST('second' AS BLOB) "
      .. "WHERE global_id = '%s'"):format(added)))
    assert.same({ "add " .. added }, queued(st))
    assert.equal("", sqlite(st.path, ("UPDATE geoservices_attachments SET name = 'p.png' WHERE global_id = '%s'")
      :format(PHOTO)))
    assert.same({ "add " .. added, "update " .. PHOTO }, queued(st))
    assert(st:delete_attachment(PHOTO))
    assert.same({ "add " .. added, "delete " .. PHOTO }, queued(st))
    local gone = assert(st:add_attachment(0, PARCEL_2, { name = "gone.txt", data = "never sent" }))
    assert(st:delete_attachment(gone))
    assert.same({ "add " .. added, "delete " .. PHOTO }, queued(st))
    local result = assert(st:sync(c))
    assert.equal(2, result.attachment_edits.applied)
    local rid = st:replica().replicaID
    st:close()
    assert.same({ ["add|" .. added] = 1, ["delete|" .. PHOTO] = 1 }, server_edits(rid))
    local other = create("fold-other")
    other:close()
    assert.equal("second", bytes_of(other.path, added))
    c:close()
  end)

  it("refused by the server are failed edits (status, pending, failed) and can be discarded", function()
    local st, c = create("refused")
    -- another crew deletes the memo first: the update of it is refused (Object is missing)
    local crew, c2 = create("refused-crew")
    assert(crew:delete_attachment(MEMO))
    assert(crew:sync(c2))
    crew:close()
    c2:close()
    assert.equal("", sqlite(st.path, ("UPDATE geoservices_attachments SET name = 'mine.txt' WHERE global_id = '%s'")
      :format(MEMO)))
    -- and the server refuses to take a new attachment's bytes
    local note = assert(st:add_attachment(0, PARCEL_2, { name = "note.txt", data = "refused bytes" }))
    emu:fault{ route = "upload", kind = "error", attempts = { emu:count("upload") + 1 } }
    local result = assert(st:sync(c))
    -- the update of an attachment the server deleted is held back before it goes (issue 36: the rebase reads
    -- the server's attachments first), kept with the failed edits, rather than sent and refused (1019)
    assert.equal(0, #result.attachment_edits.failed)
    local held
    for _, k in ipairs(result.conflicts) do
      if k.kind == "attachment" then held = k end
    end
    assert.same({ MEMO, "held" }, { held.globalId, held.outcome })
    assert.matches("deleted this attachment", held.description)
    assert.equal(1, #result.attachment_edits.not_uploaded)
    local failed = assert(st:failed())
    local kinds = {}
    for _, f in ipairs(failed) do kinds[#kinds + 1] = f.kind .. " " .. f.op .. " " .. f.globalId end
    table.sort(kinds)
    assert.same({ "attachment add " .. note, "attachment update " .. MEMO }, kinds)
    assert.equal(2, assert(st:status()).failed)
    assert.matches("2 failed", tostring(st:status()))
    -- not sent again by the next sync
    local before = emu:count("upload")
    result = assert(st:sync(c, { direction = "upload" }))
    assert.equal(0, result.attachment_edits.applied)
    assert.equal(before, emu:count("upload"))
    st:close()

    -- the commands list and discard them
    local out = helper.run_cli{ "status", st.path }.out
    assert.matches("2 failed", out)
    out = helper.run_cli{ "pending", st.path }.out
    assert.matches("attachment%s+add%s+Parcels%s+" .. note:gsub("%p", "%%%0"), out)
    assert.matches("attachment%s+update%s+Parcels%s+" .. MEMO:gsub("%p", "%%%0"), out)
    assert.matches("conflict: the server deleted this attachment since", out, 1, true)
    out = helper.run_cli{ "discard", st.path, note, MEMO }.out
    assert.matches("2 attachment edits discarded", out)
    assert.equal("0\n", sqlite(st.path, ("SELECT count(*) FROM geoservices_attachments WHERE global_id = '%s'")
      :format(note)))
    -- the server's version of the memo: deleted by the other crew (the download removed it)
    assert.equal("0\n", sqlite(st.path, ("SELECT count(*) FROM geoservices_attachments WHERE global_id = '%s'")
      :format(MEMO)))
    out = helper.run_cli{ "status", st.path }.out
    assert.matches("0 failed", out)
    c:close()
  end)

  it("whose bytes could not be uploaded (network) stay queued and go with the next sync", function()
    local st, c = create("net")
    local note = assert(st:add_attachment(0, PARCEL_2, { name = "net.txt", data = "retry me" }))
    emu:fault{ route = "upload", kind = "reset", attempts = { emu:count("upload") + 1, emu:count("upload") + 2,
                                                              emu:count("upload") + 3 } }
    local result = assert(st:sync(c))
    assert.equal(1, #result.attachment_edits.not_uploaded)
    assert.same({ "add " .. note }, queued(st))
    assert.same({}, assert(st:failed()))
    result = assert(st:sync(c))
    assert.equal(1, result.attachment_edits.applied)
    assert.same({}, queued(st))
    st:close()
    c:close()
  end)

  it("of a deleted feature leave no orphan rows, queue no attachment delete, and come back with a discard",
    function()
    local st, c = create("orphans")
    local path = st.path
    local function rows()
      return sqlite(path, ("SELECT (SELECT count(*) FROM geoservices_attachments WHERE parent_global_id = '%s'), "
        .. "(SELECT count(*) FROM gpkgext_geoservices_attachments_Parcels m JOIN Parcels f ON f.fid = m.base_id "
        .. "WHERE f.GlobalID = '%s'), (SELECT count(*) FROM gpkgext_geoservices_attachments_Parcels WHERE "
          .. "base_id NOT IN "
        .. "(SELECT fid FROM Parcels))"):format(PARCEL_1, PARCEL_1))
    end
    assert.equal("2|2|0\n", rows())
    assert.equal("", sqlite(path, ("DELETE FROM Parcels WHERE GlobalID = '%s'"):format(PARCEL_1)))
    assert.equal("2|0|0\n", rows()) -- no link to a missing feature; the bytes kept until the delete is synced
    assert.same({}, queued(st))
    local done = assert(st:discard(PARCEL_1))
    assert.equal(1, done.count)
    assert.equal("2|2|0\n", rows())
    assert.same({}, queued(st))
    -- deleted again and synchronized: the attachments go with it, here and on the server
    assert.equal("", sqlite(path, ("DELETE FROM Parcels WHERE GlobalID = '%s'"):format(PARCEL_1)))
    local other, c2 = create("orphans-other")
    assert(st:sync(c))
    assert.equal("0|0|0\n", rows())
    assert.same({}, queued(st))
    local rid = st:replica().replicaID
    st:close()
    assert.same({}, server_edits(rid))
    -- a store made before receives the delete and drops the attachments too
    assert(other:sync(c2))
    other:close()
    assert.equal("0\n", sqlite(other.path, ("SELECT count(*) FROM geoservices_attachments WHERE parent_global_id "
      .. "= '%s'"):format(PARCEL_1)))
    c:close()
    c2:close()
  end)

  it("that cannot be downloaded (HTTP 500) is reported, never marked fetched, and fetched by the next sync",
    function()
    emu:fault{ route = "attachment", kind = "status", status = 500, phase = "before",
               attempts = { emu:count("attachment") + 1, emu:count("attachment") + 2, emu:count("attachment") + 3 } }
    n = (n or 0) + 1
    local path = ("%s/dl-%d.gpkg"):format(dir, n)
    local c = client()
    local st = assert(geoservices.store.create(c, path, { service = "Parcels", layers = { 0 },
      replicaName = "dl" .. n, syncModel = "perReplica", returnAttachments = true }, { timeout = 30 }))
    local failed = st.created.attachments.failed
    assert.equal(3, #failed) -- each attachment's one try answered 500
    for _, f in ipairs(failed) do assert.matches("500", f.message) end
    assert.equal("3\n", sqlite(path, "SELECT count(*) FROM geoservices_attachments WHERE fetched_at IS NULL"))
    local result = assert(st:sync(c))
    assert.same({ 3, {} }, { result.attachments.fetched, result.attachments.failed })
    assert.equal("0\n", sqlite(path, "SELECT count(*) FROM geoservices_attachments WHERE fetched_at IS NULL"))
    assert.equal(70, #bytes_of(path, PHOTO))
    st:close()
    c:close()
  end)
end)
