-- What the photo-link scan (geoservices.store.file.attachments.link_orphans:
-- an attachment QGIS's form added by its parent's GlobalID alone, linked to
-- its feature) costs each store open and each sync, by the number of
-- attachment rows in the store (issue 37). A benchmark, not a test.
--   lua5.4 spec/bench/link_orphans.lua DIR N...
-- For each N: a store of one point layer with attachments, N/4 features and
-- N attachments as a download leaves them (4 bytes each, or BENCH_PHOTO_KB:
-- a row's page holds the first part of its bytes), then, each the median of 5:
-- the scan finding nothing (with the index of the photos not linked yet, and
-- without it, as stores had it before), store.open, and the scan linking 100
-- photos added as QGIS adds them. Prints one line a size.
local attachments = require "geoservices.store.file.attachments"
local common = require "spec.bench.common"
local core = require "geoservices.core"
local schema = require "geoservices.store.file.schema"
local store = require "geoservices.store"

local dir = assert(arg[1], "DIR")
-- the bytes of each attachment: 4 (tiny), or about BENCH_PHOTO_KB KiB each (zeros, of random sizes)
local kb = math.tointeger(tonumber(os.getenv("BENCH_PHOTO_KB") or ""))
local BYTES = kb and ("zeroblob(%d + abs(random()) %% %d)"):format(kb * 512, kb * 1024) or "x'ffd8ffd9'"
local SR = { wkid = 4326 }
local layer = { id = 0, name = "Poles", type = "Feature Layer", geometryType = "esriGeometryPoint",
  spatialReference = SR, objectIdField = "OBJECTID", globalIdField = "GlobalID", hasAttachments = true,
  fields = require("spec.bench.fields").replica() }

local function gid_sql(expr) return ("'{00000000-0000-4000-8000-' || printf('%%012d', %s) || '}'"):format(expr) end

local function timed(f, runs)
  local t = {}
  for i = 1, runs or 5 do
    local t0 = core.monotonic()
    f(i)
    t[#t + 1] = core.monotonic() - t0
  end
  return common.median(t)
end

for i = 2, #arg do
  local n = assert(math.tointeger(tonumber(arg[i])), "N")
  local path = ("%s/link_orphans_%d.gpkg"):format(dir, n)
  os.remove(path)
  local st = assert(store.create(path, { service = "Bench", replicaID = "{B}", syncModel = "perReplica" }, { layer }))
  local features = math.max(1, n // 4)
  assert(st:_uncaptured(function()
    assert(st.db:exec(("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d) "
      .. "INSERT INTO Poles (OBJECTID, GlobalID, OWNER) SELECT i, %s, 'owner ' || i FROM s"):format(features,
      gid_sql("i"))))
    assert(st.db:exec(("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d) "
      .. "INSERT INTO geoservices_attachments (content_type, global_id, layer_id, parent_global_id, attachment_id, "
      .. "name, size, data) SELECT 'image/jpeg', %s, 0, %s, i, 'p' || i || '.jpg', 4, %s FROM s")
      :format(n, gid_sql("1000000000 + i"), gid_sql("1 + i % " .. features), BYTES)))
    return true
  end))
  assert(attachments.relink(st))
  st:close()
  st = assert(store.open(path))
  local plan = {}
  for _, r in ipairs(st.db:rows("EXPLAIN QUERY PLAN SELECT count(*) FROM geoservices_attachments AS a JOIN Poles AS f "
    .. "ON f.GlobalID = a.parent_global_id WHERE a.attachment_id IS NULL AND a.parent_global_id IS NOT NULL AND "
    .. "(a.layer_id IS NULL OR a.layer_id = 0) AND NOT EXISTS (SELECT 1 FROM gpkgext_geoservices_attachments_Poles "
    .. "AS m WHERE m.related_id = a.id)") or {}) do plan[#plan + 1] = r.detail end
  local scan = timed(function() assert(attachments.link_orphans(st) == 0) end)
  st:close()
  local open = timed(function() assert(store.open(path)):close() end)
  -- before: the same scan without the index of the photos not linked yet (as stores had it before 2026-12-02)
  st = assert(store.open(path))
  assert(st.db:exec("DROP INDEX " .. schema.ATTACHMENT_UNLINKED_NAME))
  local scan_before = timed(function() assert(attachments.link_orphans(st) == 0) end)
  st:close()
  -- 100 photos added as QGIS's form adds them (their parent's GlobalID alone), linked by the scan
  st = assert(store.open(path))
  local linked = 0
  local link = timed(function(run)
    assert(st.db:exec(("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 100) "
      .. "INSERT INTO geoservices_attachments (content_type, parent_global_id, name, data) "
      .. "SELECT 'image/jpeg', %s, 'qgis' || i || '.jpg', x'ffd8ffd9' FROM s"):format(gid_sql(run * 100 .. " + i"))))
    linked = linked + assert(attachments.link_orphans(st))
  end)
  st:close()
  local f = io.open(path, "rb")
  local size = f:seek("end")
  f:close()
  print(("link_orphans %d attachments (%d features, %.1f MB): scan finding none %.3f ms (without the index %.3f ms); "
    .. "store.open %.1f ms (scan %.0f%%); scan linking 100 added %.1f ms (%d linked); plan: %s"):format(n, features,
    size / 1e6, scan * 1e3, scan_before * 1e3, open * 1e3, 100 * scan / open, link * 1e3, linked,
    table.concat(plan, " / ")))
  os.remove(path)
end
