--- Local attachment edits: captured in the file, uploaded the vendor's way.
--
-- * Capture (plain SQL, like geoservices.store.capture): a row inserted in a
--   layer's mapping table (geoservices.store.attachments) that links a
--   media row the server never numbered queues an add (the media row gets
--   the layer and its feature's GlobalID); a media row deleted queues a
--   delete, or drops the add of an attachment never sent. QGIS adding a
--   media row and its link, or `st:add_attachment`, take the same path. The
--   library's own writes of downloaded data run with capture off.
-- * Sync: an add's bytes go first to the service's uploads
--   (`<service>/FeatureServer/uploads/upload`, multipart, the blob copied to
--   a file beside the store in pieces and streamed from there), giving the
--   itemID that the attachment add names as its uploadId (INTERFACE.md 2.1);
--   the upload is kept, so a later try does not upload again. The adds and
--   deletes go in the synchronizeReplica of the features' edits, marked
--   sent before it leaves.
-- * Outcome: read back from the layer's queryAttachments (the attachments
--   of the parent features), after the request and, for a sync that was
--   interrupted, at the start of the next one: an add present / a delete
--   absent is applied; otherwise, after a request that succeeded, the server
--   did not take it (kept as failed, with the reason, not sent again until
--   discarded or edited); after one that failed or whose answer was lost,
--   it goes again. An edit whose read back fails stays sent, its outcome
--   unknown, and is read back by the next sync.
-- @module geoservices.store.attachment_edits
-- @local
local errors = require "geoservices.errors"
local json = require "geoservices.json"
local paths = require "geoservices.store.paths"
local shared = require "geoservices.store.shared"

local M = {}

local MEDIA = "geoservices_attachments"
M.QUEUE = "geoservices_attachment_edits"
local CAPTURING = "(SELECT enabled FROM geoservices_capture WHERE id = 1) IS NOT 0"
local NOW = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"

local function q(name) return '"' .. name:gsub('"', '""') .. '"' end

local function db_fail(st, msg, code) return shared.db_error(st.path, msg, code) end

--- The queue (once) and the capture triggers of a layer with attachments.
-- @tparam table spec the layer's spec
-- @string map its mapping table
function M.layer_sql(spec, map)
  local l, t = tostring(math.tointeger(spec.id)), q(spec.table)
  local fid, gid = q(spec.fid_column or "fid"), q(spec.globalid)
  return {
    ([[CREATE TABLE IF NOT EXISTS %s (seq INTEGER PRIMARY KEY AUTOINCREMENT, layer_id INTEGER NOT NULL,
      op TEXT NOT NULL CHECK (op IN ('add', 'delete')), global_id TEXT NOT NULL, parent_global_id TEXT,
      upload_id TEXT, sent_at TEXT, failed TEXT, created_at TEXT NOT NULL)]]):format(M.QUEUE),
    ([[CREATE TRIGGER %s AFTER INSERT ON %s
      WHEN %s AND (SELECT attachment_id FROM %s WHERE id = NEW.related_id) IS NULL
      BEGIN
        UPDATE %s SET layer_id = %s, parent_global_id = (SELECT %s FROM %s WHERE %s = NEW.base_id)
          WHERE id = NEW.related_id AND (layer_id IS NULL OR parent_global_id IS NULL);
        INSERT INTO %s (layer_id, op, global_id, parent_global_id, created_at)
          SELECT %s, 'add', a.global_id, a.parent_global_id, %s FROM %s AS a WHERE a.id = NEW.related_id
          AND NOT EXISTS (SELECT 1 FROM %s AS e WHERE e.global_id = a.global_id AND e.op = 'add');
      END]]):format(q("geoservices_attachment_add_" .. spec.table), q(map), CAPTURING, MEDIA,
      MEDIA, l, gid, t, fid, M.QUEUE, l, NOW, MEDIA, M.QUEUE),
    ([[CREATE TRIGGER %s AFTER DELETE ON %s
      WHEN %s AND OLD.layer_id = %s
      BEGIN
        DELETE FROM %s WHERE related_id = OLD.id;
        INSERT INTO %s (layer_id, op, global_id, parent_global_id, created_at)
          SELECT %s, 'delete', OLD.global_id, OLD.parent_global_id, %s
          WHERE NOT EXISTS (SELECT 1 FROM %s WHERE global_id = OLD.global_id AND op = 'add' AND sent_at IS NULL);
        DELETE FROM %s WHERE global_id = OLD.global_id AND op = 'add' AND sent_at IS NULL;
      END]]):format(q("geoservices_attachment_delete_" .. spec.table), MEDIA, CAPTURING, l,
      q(map), M.QUEUE, l, NOW, M.QUEUE, M.QUEUE),
  }
end

local function has_queue(st)
  local rows = st.db:rows("SELECT 1 AS yes FROM sqlite_master WHERE name = ?", M.QUEUE)
  return rows and rows[1] ~= nil
end

local function mapping_of(st, layer_id)
  local spec = st.layers[layer_id]
  if not spec or not has_queue(st) then return nil end
  local rows = st.db:rows("SELECT mapping_table_name, base_primary_column FROM gpkgext_relations "
    .. "WHERE base_table_name = ? AND related_table_name = ?", spec.table, MEDIA)
  return rows and rows[1], spec
end

local function new_gid()
  local hex = require("geoservices.core").random_bytes(16):gsub(".", function(c) return ("%02X"):format(c:byte()) end)
  return ("{%s-%s-4%s-%s%s-%s}"):format(hex:sub(1, 8), hex:sub(9, 12), hex:sub(14, 16),
    ("89AB"):sub(hex:byte(17) % 4 + 1, hex:byte(17) % 4 + 1), hex:sub(18, 20), hex:sub(21, 32))
end

--- st:add_attachment(layer_id, parent_global_id, {name =, content_type =, data = | path =}).
-- @return the new attachment's GlobalID, or nil, err
function M.add(st, layer_id, parent, a)
  if type(a) ~= "table" or (type(a.data) ~= "string" and type(a.path) ~= "string") then
    error("store:add_attachment: expects {name =, content_type =, data = bytes | path = file}", 3)
  end
  if type(parent) ~= "string" then error("store:add_attachment: parent_global_id must be a string", 3) end
  local map, spec = mapping_of(st, layer_id)
  if not map then
    return nil, errors.invalid("layer_id", ("a layer of this store with attachments (layer %s has none here, or the "
      .. "store was made before attachments were kept)"):format(tostring(layer_id)))
  end
  local gid = new_gid()
  return st:transaction(function()
    local f = st.db:rows(("SELECT %s AS fid, %s AS gid FROM %s WHERE upper(%s) = upper(?)"):format(
      q(map.base_primary_column), q(spec.globalid), q(spec.table), q(spec.globalid)), parent)
    if not (f and f[1]) then
      return nil, errors.new("invalid", ("layer %d has no feature %s"):format(layer_id, parent),
        { parameter = "parent" })
    end
    local name = a.name or (a.path and a.path:match("([^/]+)$")) or "attachment"
    -- the size first: an UPDATE of the row once it holds the bytes would read them all
    local size = a.data and #a.data
    if a.path then
      local file = io.open(a.path, "rb")
      if not file then return nil, errors.new("io", ("cannot read %s"):format(a.path), { path = a.path }) end
      size = file:seek("end")
      file:close()
    end
    local ok, id, code = st.db:run("INSERT INTO " .. MEDIA .. " (global_id, layer_id, parent_global_id, name, "
      .. "content_type, size, data) VALUES (?, ?, ?, ?, ?, ?, x'')", gid, layer_id, f[1].gid, name,
      a.content_type or "application/octet-stream", size)
    if not ok then return nil, db_fail(st, id, code) end
    local written, msg
    if a.path then
      written, msg, code = st.db:blob_from_file(MEDIA, "data", id, a.path)
    else
      written, msg, code = st.db:run("UPDATE " .. MEDIA .. " SET data = CAST(? AS BLOB) WHERE id = ?", a.data, id)
    end
    if not written then return nil, errors.new("io", ("%s: %s"):format(a.path or st.path, msg), { code = code }) end
    ok, msg, code = st.db:run(("INSERT INTO %s (base_id, related_id) VALUES (?, ?)"):format(
      q(map.mapping_table_name)), f[1].fid, id)
    if not ok then return nil, db_fail(st, msg, code) end
    return gid
  end)
end

--- st:delete_attachment(global_id): true, or nil, err.
function M.delete(st, gid)
  if type(gid) ~= "string" then error("store:delete_attachment: global_id must be a string", 3) end
  local ok, msg, code = st.db:run("DELETE FROM " .. MEDIA .. " WHERE upper(global_id) = upper(?)", gid)
  if not ok then return nil, db_fail(st, msg, code) end
  if ok == 0 then return nil, errors.new("invalid", ("no attachment %s in the store"):format(gid)) end
  return true
end

--- The attachment edits queued (`{seq, layer, op, globalId, parentGlobalId, uploadId, sent, failed}`).
function M.pending(st)
  if not has_queue(st) then return {} end
  local rows = st.db:rows("SELECT * FROM " .. M.QUEUE .. " ORDER BY seq") or {}
  local out = {}
  for _, r in ipairs(rows) do
    out[#out + 1] = { seq = r.seq, layer = r.layer_id, op = r.op, globalId = r.global_id,
                      parentGlobalId = r.parent_global_id, uploadId = r.upload_id, sent = r.sent_at ~= nil,
                      failed = r.failed }
  end
  return out
end

local function upload(st, client, rep, r)
  local tmp = paths.beside(st.path, "upload")
  local n, msg, code = st.db:blob_to_file(MEDIA, "data", r.media_id, tmp)
  if not n then
    os.remove(tmp)
    return nil, errors.new("io", ("%s: %s"):format(st.path, msg), { code = code })
  end
  local answer, err = client:post(client:url_for(rep.service .. "/FeatureServer/uploads/upload"), { f = "json" },
    { multipart = true, files = { { name = "file", file = tmp, filename = r.name or "attachment",
                                    type = r.content_type } } })
  os.remove(tmp)
  if not answer then return nil, err end
  local item = type(answer.item) == "table" and answer.item or {}
  if type(item.itemID) ~= "string" then
    return nil, errors.new("protocol", "the upload's answer has no item.itemID: " .. json.encode(answer))
  end
  local ok, m2, c2 = st.db:run("UPDATE " .. M.QUEUE .. " SET upload_id = ? WHERE seq = ?", item.itemID, r.seq)
  if not ok then return nil, db_fail(st, m2, c2) end
  return item.itemID
end

--- The attachment edits of layers that upload this time, their bytes
-- uploaded first. Returns `{[layer_id] = {adds =, deleteIds =}}`, the seqs,
-- and the edits that could not be uploaded (`{globalId, message}`; they stay queued).
function M.outgoing(st, client, rep, uploads_layer)
  local by_layer, seqs, not_uploaded = {}, {}, {}
  if not has_queue(st) then return by_layer, seqs, not_uploaded end
  local rows = st.db:rows("SELECT e.seq, e.layer_id, e.op, e.global_id, e.parent_global_id, e.upload_id, "
    .. "a.id AS media_id, a.name, a.content_type FROM " .. M.QUEUE .. " AS e LEFT JOIN " .. MEDIA
    .. " AS a ON a.global_id = e.global_id WHERE e.sent_at IS NULL AND e.failed IS NULL ORDER BY e.seq") or {}
  for _, r in ipairs(rows) do
    if uploads_layer(r.layer_id) then
      local l = by_layer[r.layer_id] or { adds = json.array(), deleteIds = json.array() }
      if r.op == "delete" then
        l.deleteIds[#l.deleteIds + 1] = r.global_id
        seqs[#seqs + 1] = r.seq
        by_layer[r.layer_id] = l
      elseif r.media_id then
        local id, err = r.upload_id, nil
        if not id then id, err = upload(st, client, rep, r) end
        if id then
          l.adds[#l.adds + 1] = { globalId = r.global_id, parentGlobalId = r.parent_global_id, name = r.name,
                                  contentType = r.content_type, uploadId = id }
          seqs[#seqs + 1] = r.seq
          by_layer[r.layer_id] = l
        else
          not_uploaded[#not_uploaded + 1] = { globalId = r.global_id, message = err.message }
        end
      end
    end
  end
  return by_layer, seqs, not_uploaded
end

--- Adds the attachment edits to a synchronizeReplica's `edits` (2.1).
function M.merge(edits, by_layer)
  edits = edits or json.array()
  for id, l in pairs(by_layer) do
    local entry
    for _, e in ipairs(edits) do
      if e.id == id then entry = e end
    end
    if not entry then
      entry = { id = id, features = { adds = json.array(), updates = json.array(), deleteIds = json.array() } }
      edits[#edits + 1] = entry
    end
    entry.attachments = { adds = l.adds, updates = json.array(), deleteIds = l.deleteIds }
  end
  table.sort(edits, function(a, b) return a.id < b.id end)
  return edits
end

--- Marks edits sent, before the request leaves (its outcome is read back).
function M.mark_sent(st, seqs)
  for _, seq in ipairs(seqs) do
    local ok, msg, code = st.db:run("UPDATE " .. M.QUEUE .. " SET sent_at = " .. NOW .. " WHERE seq = ?", seq)
    if not ok then return nil, db_fail(st, msg, code) end
  end
  return true
end

local function key(gid) return (tostring(gid):gsub("[{}]", ""):upper()) end

--- Settles the sent edits by reading the server back (queryAttachments of
-- their features). `succeeded`: the request that carried them succeeded.
-- @return `{applied = n, failed = {...}, requeued = n}`, or nil, err (they stay sent)
function M.settle(st, client, rep, succeeded)
  local out = { applied = 0, failed = {}, requeued = 0 }
  if not has_queue(st) then return out end
  local rows = st.db:rows("SELECT * FROM " .. M.QUEUE .. " WHERE sent_at IS NOT NULL ORDER BY seq") or {}
  if #rows == 0 then return out end
  local parents = {}
  for _, r in ipairs(rows) do
    parents[r.layer_id] = parents[r.layer_id] or {}
    if r.parent_global_id then parents[r.layer_id][r.parent_global_id] = true end
  end
  local present = {}
  for layer, set in pairs(parents) do
    local list = {}
    for gid in pairs(set) do list[#list + 1] = gid end
    table.sort(list)
    local answer, err = client:post(client:url_for(("%s/FeatureServer/%d/queryAttachments"):format(rep.service,
      layer)), { f = "json", globalIds = table.concat(list, ",") })
    if not answer then return nil, err end
    if type(answer.error) == "table" then
      return nil, errors.new("server", "queryAttachments: " .. tostring(answer.error.message))
    end
    for _, g in ipairs(type(answer.attachmentGroups) == "table" and answer.attachmentGroups or {}) do
      for _, info in ipairs(type(g.attachmentInfos) == "table" and g.attachmentInfos or {}) do
        present[key(info.globalId)] = true
      end
    end
  end
  return st:transaction(function()
    if not succeeded then
      -- the request's answer did not come: the server's generation may have
      -- moved without the store learning it (not another copy's doing)
      local ok, msg, code = require("geoservices.store.integrity").record_generation(st, rep, { unknown = true })
      if not ok then return nil, db_fail(st, msg, code) end
    end
    for _, r in ipairs(rows) do
      local here = present[key(r.global_id)]
      local sql, args
      if (r.op == "add") == (here == true) then
        sql, args = "DELETE FROM " .. M.QUEUE .. " WHERE seq = ?", { r.seq }
        out.applied = out.applied + 1
      elseif succeeded then
        local why = r.op == "add" and "the server did not keep the attachment (its answer named no failure)"
          or "the attachment is still on the server"
        sql, args = "UPDATE " .. M.QUEUE .. " SET sent_at = NULL, failed = ? WHERE seq = ?", { why, r.seq }
        out.failed[#out.failed + 1] = { globalId = r.global_id, op = r.op, message = why }
      else
        sql, args = "UPDATE " .. M.QUEUE .. " SET sent_at = NULL WHERE seq = ?", { r.seq }
        out.requeued = out.requeued + 1
      end
      local ok, msg, code = st.db:run(sql, table.unpack(args))
      if not ok then return nil, db_fail(st, msg, code) end
    end
    return out
  end)
end

return M
