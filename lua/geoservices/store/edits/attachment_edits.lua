--- Local attachment edits: captured in the file, uploaded the vendor's way.
--
-- * Capture (plain SQL, like geoservices.store.edits.capture): a row inserted in a
--   layer's mapping table (geoservices.store.file.attachments) that links a
--   media row the server does not have queues an add (the media row gets
--   the layer and its feature's GlobalID); a linked media row whose bytes,
--   name or content type change queues an update (the server's metadata
--   kept with it); a media row deleted queues a delete. They fold as feature
--   edits do: an add then updates stay one add, an update then a delete is
--   the delete, an add then a delete nothing. QGIS adding a media row and
--   its link, or `st:add_attachment`, take the same path. The library's own
--   writes of downloaded data run with capture off. A feature deleted drops
--   its links, queuing nothing (the server deletes a deleted feature's
--   attachments itself); the rows stay until that delete is synchronized
--   (@{drop_orphans}), and a discard of it links them again.
-- * Sync: an add's bytes, and an update's new bytes, go first to the
--   service's uploads (`<service>/FeatureServer/uploads/upload`, multipart,
--   the blob copied to a file beside the store in pieces and streamed from
--   there), giving the itemID that the attachment add or update names as its
--   uploadId (INTERFACE.md 2.1); the upload is kept, so a later try does not
--   upload again. An upload the server refuses makes the edit failed; one
--   that does not reach it (network) leaves it queued. The adds, updates and
--   deletes go in the synchronizeReplica of the features' edits, marked sent
--   before it leaves.
-- * Outcome: the answer's per-edit failure, else read back from the
--   layer's queryAttachments (the attachments of the parent features), after
--   the request and, for a sync that was interrupted, at the start of the
--   next one: an add or update the server holds / a delete absent is
--   applied; otherwise, after a request that succeeded, the server did not
--   take it: kept as failed, with the reason (st:failed(), `geoservices
--   status`, `pending`), not sent again until edited or discarded
--   (geoservices.store.edits.attachment_discard); after one that failed or whose
--   answer was lost, it goes again. An edit whose read back fails stays
--   sent, its outcome unknown, and is read back by the next sync.
-- @module geoservices.store.edits.attachment_edits
-- @local
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"
local integrity = require "geoservices.store.sync.integrity"
local json = require "geoservices.base.json"
local paths = require "geoservices.store.paths"
local schema = require "geoservices.store.file.schema"
local shared = require "geoservices.store.shared"

local M = {}

local MEDIA = "geoservices_attachments"
M.QUEUE = "gpkgext_geoservices_attachment_edits"
-- the server's id and address of the attachments this store added, recorded
-- when their add is read back: a table of small rows, because an UPDATE of
-- the media row would read and rewrite its bytes
M.ADDED = "gpkgext_geoservices_attachments_added"
local CAPTURING = "(SELECT enabled FROM gpkgext_geoservices_capture WHERE id = 1) IS NOT 0"
local NOW = "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"

local function q(name) return '"' .. name:gsub('"', '""') .. '"' end

-- "the GlobalID in column_sql is value_sql", through the GlobalID index where the schema has one
local gid_match = schema.gid_match or function(column_sql, value_sql) return column_sql .. " = " .. value_sql end

local function db_fail(st, msg, code) return shared.db_error(st.path, msg, code) end

-- What the server knows of an attachment, kept with an update or a delete
-- queued (the discard puts it back): its metadata, as JSON.
local function base_sql(row)
  return ("json_object('name', %s.name, 'content_type', %s.content_type, 'size', %s.size, 'url', %s.url, "
    .. "'attachment_id', %s.attachment_id, 'keywords', %s.keywords)"):format(row, row, row, row, row, row)
end

--- The queue (once) and the capture triggers of a layer with attachments:
-- a link inserted (an add), a media row updated (an update: its bytes,
-- name or content type) or deleted (a delete), and its feature deleted
-- (its links go, and come back when a feature of its GlobalID is inserted
-- again: the discard of the delete, or a download replacing the row).
-- @tparam table spec the layer's spec
-- @string map its mapping table
function M.layer_sql(spec, map)
  local l, t = tostring(math.tointeger(spec.id)), q(spec.table)
  local fid, gid = q(spec.fid_column or "fid"), q(spec.globalid)
  -- an edit of this attachment not sent yet (an add or an update takes a later change)
  local unsent = "global_id = OLD.global_id AND sent_at IS NULL AND op IN ('add', 'update')"
  local data_changed = "OLD.data IS NOT NEW.data"
  return {
    -- upload_id: the uploaded bytes' item (kept so a retry does not upload
    -- again); data_changed: an update's bytes changed (uploaded, else only
    -- its name or type go); sent: what went (read back against the server);
    -- base: the server's metadata before the first local change; bytes: a
    -- deleted attachment's, when no address to fetch them again is known
    ([[CREATE TABLE IF NOT EXISTS %s (seq INTEGER PRIMARY KEY AUTOINCREMENT, layer_id INTEGER NOT NULL,
      op TEXT NOT NULL CHECK (op IN ('add', 'update', 'delete')), global_id TEXT NOT NULL, parent_global_id TEXT,
      upload_id TEXT, sent_at TEXT, failed TEXT, created_at TEXT NOT NULL, data_changed INTEGER NOT NULL DEFAULT 0,
      sent TEXT, base TEXT, bytes BLOB, code INTEGER, failed_at TEXT)]]):format(M.QUEUE),
    ("CREATE INDEX IF NOT EXISTS %s ON %s (global_id)"):format(q(M.QUEUE .. "_global_id"), M.QUEUE),
    ("CREATE TABLE IF NOT EXISTS %s (global_id TEXT PRIMARY KEY, attachment_id INTEGER, url TEXT)"):format(M.ADDED),
    ("CREATE INDEX %s ON %s (base_id)"):format(q(map .. "_base"), q(map)),
    -- (not for an attachment the server has: downloaded, with its id, or added by this store and
    -- applied: a link made again, when its feature's row is replaced, is no new attachment)
    ([[CREATE TRIGGER %s AFTER INSERT ON %s
      WHEN %s AND (SELECT attachment_id FROM %s WHERE id = NEW.related_id) IS NULL
        AND NOT EXISTS (SELECT 1 FROM %s AS s JOIN %s AS a ON a.global_id = s.global_id WHERE a.id = NEW.related_id)
      BEGIN
        UPDATE %s SET layer_id = %s, parent_global_id = (SELECT %s FROM %s WHERE %s = NEW.base_id)
          WHERE id = NEW.related_id AND (layer_id IS NULL OR parent_global_id IS NULL);
        INSERT INTO %s (layer_id, op, global_id, parent_global_id, created_at)
          SELECT %s, 'add', a.global_id, a.parent_global_id, %s FROM %s AS a WHERE a.id = NEW.related_id
          AND NOT EXISTS (SELECT 1 FROM %s AS e WHERE e.global_id = a.global_id AND e.op = 'add');
      END]]):format(q("geoservices_attachment_add_" .. spec.table), q(map), CAPTURING, MEDIA, M.ADDED, MEDIA,
      MEDIA, l, gid, t, fid, M.QUEUE, l, NOW, MEDIA, M.QUEUE),
    -- a linked row's bytes, name or content type changed: an update queued
    -- (folded into an add or update not sent yet: a failed one goes again;
    -- new bytes are uploaded again), its size kept true
    ([[CREATE TRIGGER %s AFTER UPDATE OF data, name, content_type ON %s
      WHEN %s AND OLD.layer_id = %s AND NEW.layer_id = %s AND OLD.global_id IS NEW.global_id
        AND (%s OR OLD.name IS NOT NEW.name OR OLD.content_type IS NOT NEW.content_type)
        AND EXISTS (SELECT 1 FROM %s WHERE related_id = NEW.id)
      BEGIN
        UPDATE %s SET size = length(NEW.data) WHERE id = NEW.id AND %s AND size IS NOT length(NEW.data);
        UPDATE %s SET upload_id = CASE WHEN %s THEN NULL ELSE upload_id END,
          data_changed = (data_changed OR %s), failed = NULL, code = NULL, failed_at = NULL WHERE %s;
        INSERT INTO %s (layer_id, op, global_id, parent_global_id, data_changed, base, created_at)
          SELECT %s, 'update', OLD.global_id, OLD.parent_global_id, %s, %s, %s
          WHERE NOT EXISTS (SELECT 1 FROM %s WHERE %s);
      END]]):format(q("geoservices_attachment_update_" .. spec.table), MEDIA, CAPTURING, l, l, data_changed,
      q(map), MEDIA, data_changed, M.QUEUE, data_changed, data_changed, unsent, M.QUEUE, l, data_changed,
      base_sql("OLD"), NOW, M.QUEUE, unsent),
    -- a delete: an add never sent is dropped instead; an update not sent
    -- becomes the delete (keeping the server's metadata it kept)
    ([[CREATE TRIGGER %s AFTER DELETE ON %s
      WHEN %s AND OLD.layer_id = %s
      BEGIN
        DELETE FROM %s WHERE related_id = OLD.id;
        INSERT INTO %s (layer_id, op, global_id, parent_global_id, base, bytes, created_at)
          SELECT %s, 'delete', OLD.global_id, OLD.parent_global_id,
            coalesce((SELECT base FROM %s WHERE global_id = OLD.global_id AND op = 'update' AND sent_at IS NULL),
              %s), CASE WHEN OLD.url IS NULL THEN OLD.data END, %s
          WHERE NOT EXISTS (SELECT 1 FROM %s WHERE global_id = OLD.global_id AND op = 'add' AND sent_at IS NULL);
        DELETE FROM %s WHERE global_id = OLD.global_id AND op IN ('add', 'update') AND sent_at IS NULL;
      END]]):format(q("geoservices_attachment_delete_" .. spec.table), MEDIA, CAPTURING, l,
      q(map), M.QUEUE, l, M.QUEUE, base_sql("OLD"), NOW, M.QUEUE, M.QUEUE),
    -- a feature deleted, by anyone: its links go, and no attachment delete
    -- is queued (the server deletes a deleted feature's attachments
    -- itself). The attachments' rows stay until the delete is synchronized
    -- (M.drop_orphans), so that discarding it brings them back: a feature
    -- of that GlobalID inserted again (the discard, or a download's REPLACE
    -- of the row, which fires this trigger too: recursive triggers) is
    -- linked to them again by the next trigger.
    ([[CREATE TRIGGER %s AFTER DELETE ON %s
      BEGIN
        DELETE FROM %s WHERE base_id = OLD.%s;
      END]]):format(q("geoservices_attachment_parent_delete_" .. spec.table), t, q(map), fid),
    ([[CREATE TRIGGER %s AFTER INSERT ON %s
      BEGIN
        INSERT INTO %s (base_id, related_id) SELECT NEW.%s, a.id FROM %s AS a
          WHERE a.layer_id = %s AND a.parent_global_id = NEW.%s
          AND NOT EXISTS (SELECT 1 FROM %s AS m WHERE m.related_id = a.id);
      END]]):format(q("geoservices_attachment_parent_insert_" .. spec.table), t, q(map), fid, MEDIA, l, gid,
      q(map)),
  }
end

local function has_queue(st)
  -- (pragma_table_list: a read-only store made before format 10 has it as a temporary view)
  local rows = st.db:rows("SELECT 1 AS yes FROM pragma_table_list WHERE name = ?", M.QUEUE)
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
  local hex = core.random_bytes(16):gsub(".", function(c) return ("%02X"):format(c:byte()) end)
  return ("{%s-%s-4%s-%s%s-%s}"):format(hex:sub(1, 8), hex:sub(9, 12), hex:sub(14, 16),
    ("89AB"):sub(hex:byte(17) % 4 + 1, hex:byte(17) % 4 + 1), hex:sub(18, 20), hex:sub(21, 32))
end

--- st:add_attachment(layer_id, parent_global_id, {name =, content_type =, data = | path =}).
-- @return the new attachment's GlobalID, or nil, err
function M.add(st, layer_id, parent, a)
  st:_db() -- a closed store is misuse
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
  st:_db() -- a closed store is misuse
  if type(gid) ~= "string" then error("store:delete_attachment: global_id must be a string", 3) end
  local ok, msg, code = st.db:run("DELETE FROM " .. MEDIA .. " WHERE upper(global_id) = upper(?)", gid)
  if not ok then return nil, db_fail(st, msg, code) end
  if ok == 0 then return nil, errors.new("invalid", ("no attachment %s in the store"):format(gid)) end
  return true
end

--- The attachment edits queued (`{seq, kind = "attachment", layer, op, globalId, parentGlobalId, name,
-- uploadId, sent, failed (the reason, when the server refused it), code, failedAt, created}`).
function M.pending(st)
  st:_db() -- a closed store is misuse
  if not has_queue(st) then return {} end
  local rows = st.db:rows("SELECT e.*, a.name FROM " .. M.QUEUE .. " AS e LEFT JOIN " .. MEDIA
    .. " AS a ON a.global_id = e.global_id ORDER BY e.seq") or {}
  local out = {}
  for _, r in ipairs(rows) do
    out[#out + 1] = { seq = r.seq, kind = "attachment", layer = r.layer_id, op = r.op, globalId = r.global_id,
                      parentGlobalId = r.parent_global_id, name = r.name, uploadId = r.upload_id,
                      sent = r.sent_at ~= nil, failed = r.failed, code = r.code, failedAt = r.failed_at,
                      created = r.created_at }
  end
  return out
end

--- The attachment edits the server refused, as @{geoservices.store.edits.queue}'s
-- failed edits are listed: `{kind = "attachment", seq, layer, op, globalId,
-- parentGlobalId, name, code, description, failed}`.
function M.failed(st)
  local out = {}
  for _, e in ipairs(M.pending(st)) do
    if e.failed then
      out[#out + 1] = { kind = "attachment", seq = e.seq, layer = e.layer, op = e.op, globalId = e.globalId,
                        parentGlobalId = e.parentGlobalId, name = e.name, code = e.code, description = e.failed,
                        failed = e.failedAt }
    end
  end
  return out
end

--- Counts for st:status(): `{pending =, failed =}` (pending: not refused).
function M.counts(st)
  if not has_queue(st) then return { pending = 0, failed = 0 } end
  local rows = st.db:rows("SELECT count(*) - count(failed) AS pending, count(failed) AS failed FROM " .. M.QUEUE)
  return rows and rows[1] or { pending = 0, failed = 0 }
end

-- Marks a queued edit refused by the server (not sent again until it is
-- edited or discarded).
local function refuse(st, seq, why, code)
  return st.db:run("UPDATE " .. M.QUEUE .. " SET sent_at = NULL, failed = ?, code = ?, failed_at = " .. NOW
    .. " WHERE seq = ?", why, math.tointeger(code), seq)
end

-- Whether the server refused what was asked (its answer), rather than not
-- being reached (network, timeout, a server error status): then it stays queued.
local function refused_by_server(err)
  return err.kind == "server" or err.kind == "protocol"
    or (err.kind == "http" and math.type(err.status) == "integer" and err.status >= 400 and err.status < 500
        and err.status ~= 408 and err.status ~= 429)
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
-- uploaded first (an add's, an update's whose bytes changed). Returns
-- `{[layer_id] = {adds =, updates =, deleteIds =}}`, the seqs, and the edits
-- that could not be uploaded (`{globalId, message, failed}`: `failed` when
-- the server refused the bytes, kept as a failed edit; otherwise they stay
-- queued). An edit of an attachment whose feature is deleted locally waits
-- for that delete (the server deletes the attachments with the feature).
function M.outgoing(st, client, rep, uploads_layer)
  local by_layer, seqs, not_uploaded = {}, {}, {}
  if not has_queue(st) then return by_layer, seqs, not_uploaded end
  local rows = st.db:rows("SELECT e.seq, e.layer_id, e.op, e.global_id, e.parent_global_id, e.upload_id, "
    .. "e.data_changed, a.id AS media_id, a.name, a.content_type, a.size FROM " .. M.QUEUE .. " AS e LEFT JOIN "
    .. MEDIA .. " AS a ON a.global_id = e.global_id WHERE e.sent_at IS NULL AND e.failed IS NULL ORDER BY e.seq")
    or {}
  for _, r in ipairs(rows) do
    local spec = st.layers[r.layer_id]
    local parent_here = spec and r.parent_global_id and (st.db:rows(("SELECT 1 AS yes FROM %s WHERE %s")
      :format(q(spec.table), gid_match(q(spec.globalid), "?1")), r.parent_global_id) or {})[1]
    if uploads_layer(r.layer_id) and (parent_here or r.op == "delete") then
      local l = by_layer[r.layer_id] or { adds = json.array(), updates = json.array(), deleteIds = json.array() }
      if r.op == "delete" then
        l.deleteIds[#l.deleteIds + 1] = r.global_id
        seqs[#seqs + 1] = r.seq
        by_layer[r.layer_id] = l
      elseif r.media_id then
        local id, err = r.upload_id, nil
        if not id and (r.op == "add" or r.data_changed == 1) then id, err = upload(st, client, rep, r) end
        if id or not err then
          local a = { globalId = r.global_id, parentGlobalId = r.parent_global_id, name = r.name,
                      contentType = r.content_type, uploadId = id }
          local list = r.op == "add" and l.adds or l.updates
          list[#list + 1] = a
          seqs[#seqs + 1] = r.seq
          by_layer[r.layer_id] = l
          local ok, msg, code = st.db:run("UPDATE " .. M.QUEUE .. " SET sent = ? WHERE seq = ?", json.encode{
            name = r.name, contentType = r.content_type, size = r.data_changed == 1 and r.size or nil }, r.seq)
          if not ok then return nil, db_fail(st, msg, code) end
        else
          local failed = refused_by_server(err)
          if failed then
            local ok, msg, code = refuse(st, r.seq, "the upload of its bytes was refused: " .. tostring(err.message),
              err.code)
            if not ok then return nil, db_fail(st, msg, code) end
          end
          not_uploaded[#not_uploaded + 1] = { globalId = r.global_id, message = err.message, failed = failed }
        end
      end
    end
  end
  return by_layer, seqs, not_uploaded
end

--- Whether attachment edits wait to go in a layer that uploads this time
-- (the request then asks for per-edit results, as for features').
function M.waiting(st, uploads_layer)
  if not has_queue(st) then return false end
  for _, r in ipairs(st.db:rows("SELECT DISTINCT layer_id FROM " .. M.QUEUE
    .. " WHERE sent_at IS NULL AND failed IS NULL") or {}) do
    if uploads_layer(r.layer_id) then return true end
  end
  return false
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
    entry.attachments = { adds = l.adds, updates = l.updates, deleteIds = l.deleteIds }
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

--- An attachment's GlobalID as a key: upper case, no braces.
function M.key(gid) return (tostring(gid):gsub("[{}]", ""):upper()) end
local key = M.key

--- The server's attachments of the parents of queue `rows` (queryAttachments,
-- a layer at a time): `[key] = attachmentInfo`, or nil, err. `post_opts`
-- go with each request (retry, timeout).
function M.server_attachments(client, rep, rows, post_opts)
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
      layer)), { f = "json", globalIds = table.concat(list, ",") }, post_opts)
    if not answer then return nil, err end
    if type(answer.error) == "table" then
      return nil, errors.new("server", "queryAttachments: " .. tostring(answer.error.message))
    end
    for _, g in ipairs(type(answer.attachmentGroups) == "table" and answer.attachmentGroups or {}) do
      for _, info in ipairs(type(g.attachmentInfos) == "table" and g.attachmentInfos or {}) do
        present[key(info.globalId)] = info
      end
    end
  end
  return present
end

--- Drops the attachments of features deleted for good: their feature is
-- not in the store and no local edit of it waits (queued, in flight or
-- refused), so the server has deleted it and its attachments with it. Their
-- edits not sent go too (their attachment is gone). In the caller's
-- transaction, uncaptured.
-- @return true, or nil, err
function M.drop_orphans(st)
  if not has_queue(st) then return true end
  for id, spec in pairs(st.layers) do
    local match = gid_match("f." .. q(spec.globalid), "a.parent_global_id")
    local orphans = ("SELECT a.global_id FROM %s AS a WHERE a.layer_id = %d AND a.parent_global_id IS NOT NULL "
      .. "AND NOT EXISTS (SELECT 1 FROM %s AS f WHERE %s) "
      .. "AND NOT EXISTS (SELECT 1 FROM gpkgext_geoservices_edits AS e WHERE e.global_id = a.parent_global_id) "
      .. "AND NOT EXISTS (SELECT 1 FROM gpkgext_geoservices_failed_edits AS e WHERE e.global_id = a.parent_global_id)")
      :format(MEDIA, id, q(spec.table), match)
    local ok, msg, code = st.db:run(("DELETE FROM %s WHERE sent_at IS NULL AND global_id IN (%s)"):format(M.QUEUE,
      orphans))
    if ok then ok, msg, code = st.db:run(("DELETE FROM %s WHERE global_id IN (%s)"):format(M.ADDED, orphans)) end
    if ok then ok, msg, code = st.db:run(("DELETE FROM %s WHERE global_id IN (%s)"):format(MEDIA, orphans)) end
    if not ok then return nil, db_fail(st, msg, code) end
  end
  return true
end

-- The server's answer about a sent edit: its per-edit failure, if the answer listed one.
local function failures_of(failed_edits)
  local out = {}
  for _, f in ipairs(failed_edits or {}) do
    if f.target == "attachment" and f.globalId then out[f.op .. "|" .. key(f.globalId)] = f end
  end
  return out
end

-- Whether the server holds what an add or update sent (its name, content
-- type and, when the bytes changed, their size).
local function holds(info, sent)
  if not info then return false end
  sent = sent and json.decode(sent) or {}
  if sent.name ~= nil and info.name ~= nil and info.name ~= sent.name then return false end
  if sent.contentType ~= nil and info.contentType ~= nil and info.contentType ~= sent.contentType then return false end
  if math.type(sent.size) == "integer" and math.type(info.size) == "integer" and info.size ~= sent.size then
    return false
  end
  return true
end

--- Settles the sent edits: the answer's per-edit failures (`failed_edits`
-- of the result, when it carried them) and the server read back
-- (queryAttachments of their features). `succeeded`: the request that
-- carried them succeeded. An applied add keeps the server's id and address
-- of the attachment (M.ADDED: its bytes can be fetched again after a
-- discard, and a link made again queues no add). Then the attachments of features deleted for good go.
-- @return `{applied = n, failed = {...}, requeued = n}`, or nil, err (they stay sent)
function M.settle(st, client, rep, succeeded, failed_edits)
  local out = { applied = 0, failed = {}, requeued = 0 }
  if not has_queue(st) then return out end
  local rows = st.db:rows("SELECT * FROM " .. M.QUEUE .. " WHERE sent_at IS NOT NULL ORDER BY seq") or {}
  local present, err = M.server_attachments(client, rep, rows)
  if not present then return nil, err end
  local refusals = failures_of(failed_edits)
  return st:_uncaptured(function()
    if not succeeded and #rows > 0 then
      -- the request's answer did not come: the server's generation may have
      -- moved without the store learning it (not another copy's doing)
      local ok, msg, code = integrity.record_generation(st, rep, { unknown = true })
      if not ok then return nil, db_fail(st, msg, code) end
    end
    for _, r in ipairs(rows) do
      local info = present[key(r.global_id)]
      local refusal = refusals[r.op .. "|" .. key(r.global_id)]
      local ok, msg, code
      if refusal then
        local why = tostring(refusal.description or "refused by the server")
        ok, msg, code = refuse(st, r.seq, why, refusal.code)
        out.failed[#out.failed + 1] = { globalId = r.global_id, op = r.op, message = why, code = refusal.code }
      elseif (r.op == "delete" and not info) or (r.op ~= "delete" and holds(info, r.sent)) then
        ok, msg, code = st.db:run("DELETE FROM " .. M.QUEUE .. " WHERE seq = ?", r.seq)
        if ok and info and r.op == "add" then
          ok, msg, code = st.db:run("INSERT OR REPLACE INTO " .. M.ADDED .. " (global_id, attachment_id, url) "
            .. "VALUES (?, ?, ?)", r.global_id, math.tointeger(info.id), type(info.url) == "string" and info.url or nil)
        end
        out.applied = out.applied + 1
      elseif succeeded then
        local why = r.op == "add" and "the server did not keep the attachment (its answer named no failure)"
          or r.op == "update" and (info and "the server holds other values of the attachment"
            or "the attachment is not on the server")
          or "the attachment is still on the server"
        ok, msg, code = refuse(st, r.seq, why)
        out.failed[#out.failed + 1] = { globalId = r.global_id, op = r.op, message = why }
      else
        ok, msg, code = st.db:run("UPDATE " .. M.QUEUE .. " SET sent_at = NULL WHERE seq = ?", r.seq)
        out.requeued = out.requeued + 1
      end
      if not ok then return nil, db_fail(st, msg, code) end
    end
    local dropped, derr = M.drop_orphans(st)
    if not dropped then return nil, derr end
    return out
  end)
end

return M
