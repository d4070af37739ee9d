--- Discarding local attachment edits not sent (queued, or refused by the
-- server): the attachment is put back as the server has it, as
-- `st:discard` does for features (geoservices.store.edits.inspect).
--
-- * an add: the attachment's row and links go;
-- * an update: its name and content type from before the edit come back;
--   new bytes give way to the server's, fetched again by the next sync from
--   the attachment's address (cleared until then); an attachment with no
--   address known keeps the local bytes, and the result says so;
-- * a delete: the row comes back with its metadata, linked to its feature;
--   its bytes are fetched again by the next sync, or were kept with the
--   delete when no address was known (geoservices.store.edits.attachment_edits).
--
-- Runs inside the caller's uncaptured transaction. Internal.
-- @module geoservices.store.edits.attachment_discard
-- @local
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local shared = require "geoservices.store.shared"

local M = {}

local MEDIA = "geoservices_attachments"
local QUEUE = "gpkgext_geoservices_attachment_edits"
local ADDED = "gpkgext_geoservices_attachments_added" -- geoservices.store.edits.attachment_edits

local function q(name) return '"' .. name:gsub('"', '""') .. '"' end

local function has_queue(st)
  local rows = st.db:rows("SELECT 1 AS yes FROM sqlite_master WHERE name = ?", QUEUE)
  return rows and rows[1] ~= nil
end

--- The queue rows of attachment edits to discard: those of `gids` (any
-- spelling), or all of them not sent; nil, err when one is in flight.
-- @return the rows (none for a GlobalID that has no attachment edit)
function M.rows(st, gids, all)
  if not has_queue(st) then return {} end
  if all then return st.db:rows("SELECT * FROM " .. QUEUE .. " WHERE sent_at IS NULL ORDER BY seq") or {} end
  local out = {}
  for _, g in ipairs(gids) do
    local found = st.db:rows("SELECT * FROM " .. QUEUE .. " WHERE upper(global_id) = upper(?) ORDER BY seq",
      shared.normalize_gid(g)) or {}
    for _, r in ipairs(found) do
      if r.sent_at then
        return nil, errors.invalid("global_id", ("the attachment %s of %s is in flight: synchronize to settle it "
          .. "first"):format(r.op, r.global_id))
      end
      out[#out + 1] = r
    end
  end
  return out
end

local function link(st, r)
  local spec = st.layers[r.layer_id]
  if not spec then return true end
  local map = MEDIA .. "_" .. spec.table
  return st.db:run(("INSERT INTO %s (base_id, related_id) SELECT f.%s, a.id FROM %s AS a JOIN %s AS f ON f.%s = "
    .. "a.parent_global_id WHERE a.global_id = ? AND NOT EXISTS (SELECT 1 FROM %s AS m WHERE m.related_id = a.id)")
    :format(q(map), q(spec.fid_column or "fid"), MEDIA, q(spec.table), q(spec.globalid), q(map)), r.global_id)
end

--- Undoes one queue row (see the module's description).
-- @return `{refetch = bool, bytes_kept = bool, bytes_missing = bool}`, or nil, err
function M.undo(st, r)
  local db = st.db
  local base = r.base and json.decode(r.base) or {}
  local out = {}
  local ok, msg, code = true, nil, nil
  local media = (db:rows("SELECT a.id, coalesce(a.url, s.url) AS url FROM " .. MEDIA .. " AS a LEFT JOIN "
    .. ADDED .. " AS s ON s.global_id = a.global_id WHERE a.global_id = ?", r.global_id) or {})[1]
  if r.op == "add" then
    if media then
      ok, msg, code = db:run("DELETE FROM " .. MEDIA .. " WHERE id = ?", media.id)
      for _, spec in pairs(st.layers) do
        if ok then
          local map = MEDIA .. "_" .. spec.table
          local exists = (db:rows("SELECT 1 AS yes FROM sqlite_master WHERE name = ?", map) or {})[1]
          if exists then ok, msg, code = db:run(("DELETE FROM %s WHERE related_id = ?"):format(q(map)), media.id) end
        end
      end
    end
  elseif r.op == "update" then
    if media then -- gone: the server's version (a download deleted it) is already here
      ok, msg, code = db:run("UPDATE " .. MEDIA .. " SET name = ?, content_type = coalesce(?, content_type) "
        .. "WHERE id = ?", base.name, base.content_type, media.id)
      local url = base.url or media.url
      if ok and r.data_changed == 1 then
        if url then
          ok, msg, code = db:run("UPDATE " .. MEDIA .. " SET url = ?, size = ?, fetched_at = NULL, data = x'' "
            .. "WHERE id = ?", url, base.size, media.id)
          out.refetch = true
        else
          out.bytes_kept = true
        end
      end
    end
  elseif not media then -- a delete: the row back, linked
    ok, msg, code = db:run("INSERT INTO " .. MEDIA .. " (global_id, layer_id, parent_global_id, attachment_id, "
      .. "name, content_type, size, keywords, url, fetched_at, data) VALUES (?, ?, ?, ?, ?, coalesce(?, "
      .. "'application/octet-stream'), ?, ?, ?, CASE WHEN ? IS NULL THEN NULL ELSE "
      .. "strftime('%Y-%m-%dT%H:%M:%SZ', 'now') END, coalesce(?, x''))", r.global_id, r.layer_id,
      r.parent_global_id, base.attachment_id, base.name, base.content_type, base.size, base.keywords, base.url,
      r.bytes, r.bytes)
    if ok then ok, msg, code = link(st, r) end
    out.refetch = r.bytes == nil and base.url ~= nil
    out.bytes_missing = r.bytes == nil and base.url == nil
  end
  if ok then ok, msg, code = db:run("DELETE FROM " .. QUEUE .. " WHERE seq = ?", r.seq) end
  if not ok then return nil, shared.db_error(st.path, msg, code) end
  return out
end

return M
