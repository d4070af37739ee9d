--- The conflicts of a replica store and their resolution: `st:conflicts()`
-- (the list, with the differing fields and their three values),
-- `st:resolve(gid, with)`, `st:discard_conflict(seq)`, and the store's
-- conflict policy (`st:conflict_policy()`, `st:set_conflict_policy(p)`:
-- geoservices.sync.merge's `manual`, `server`, `local`; manual unless set).
-- These are methods of the Store (geoservices.store), which attaches them (its METHODS).
--
-- Resolving writes the chosen values into the feature table as an edit
-- of the user's (the capture triggers queue it, geoservices.store.edits.capture)
-- on top of what the table holds (the server's version after a held or
-- server-kept conflict, ours after a local-kept one), and forgets the
-- conflict:
--
-- * `local`: the fields the local edit changed take its values (a local
--   delete deletes the feature again);
-- * `server`: the fields the server changed take its values;
-- * `base`: every differing field takes the value from before both edits.
--
-- A version the table no longer has (the server deleted the feature and
-- keeps its GlobalID) comes back as a new feature with a GlobalID of its
-- own. The next sync sends the queued edit, merged as any other.
-- @module geoservices.store.edits.resolve
local conflicts = require "geoservices.store.edits.conflicts"
local edit_list = require "geoservices.store.edits.edit_list"
local edits = require "geoservices.sync.edits"
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local merge = require "geoservices.sync.merge"
local queue = require "geoservices.store.edits.queue"
local shared = require "geoservices.store.shared"

local db_error, normalize_gid = shared.db_error, shared.normalize_gid

local resolve = {}

local Store = {}
resolve.Store = Store

local function is_null(v) return v == nil or v == json.null end

local function present(f) return type(f) == "table" and f ~= json.null and type(f.attributes) == "table" end

--- The local edits that conflict with the server's version, kept in the
-- table geoservices_conflicts (QGIS draws it: its geometry is the local
-- version's) until resolved or discarded. Each: `seq`, `op`, `layer`,
-- `layer_name`, `globalId`, `kind` ("field", "move", "update_delete",
-- "delete_update"), `policy` (the one that decided it, nil for a conflict
-- found by a download), `outcome` ("held": nothing of the edit sent, the
-- server's version in the table; "server_kept": the server's values kept;
-- "local_kept": ours sent over the server's), `feature` (the local
-- version; nil for a delete), `base` (the feature before the local edit),
-- `server` (the server's version, or null when it deleted the feature),
-- `differences` (`{field =, base =, ["local"] =, server =, conflict =}` of
-- each field that differs, `conflict` when both sides changed it),
-- `description`, `attempt`, `detected` (UTC time).
-- @return the list, or nil, err: kind "io", code "damaged" when a row cannot be decoded
function Store:conflicts()
  if self.format < 2 then return edit_list.of({}, "conflict") end -- a store of format 1 opened read-only has none
  local rows, msg, code = self:_db():rows("SELECT * FROM geoservices_conflicts ORDER BY seq")
  if not rows then return nil, db_error(self.path, msg, code) end
  local list, err = queue.edit_rows(self, rows, "conflict", "geoservices_conflicts")
  if not list then return nil, err end
  for i, e in ipairs(list) do
    local r = rows[i]
    local spec = self.layers[e.layer]
    e.layer_name = r.layer_name or (spec and spec.table)
    e.kind, e.policy = r.kind, r.policy
    local server = present(e.server) and e.server or nil
    e.differences = conflicts.differences(spec, e.base, e.feature, server)
    for _, d in ipairs(e.differences) do d.column = nil end
  end
  return list
end

--- Forgets a conflict (once the user has seen it, or made the edit again).
-- @int seq the conflict's `seq`
-- @return true, or nil, err: kind "invalid" (no such conflict), "busy", "io"
-- @raise when seq is not an integer
function Store:discard_conflict(seq)
  if math.type(seq) ~= "integer" then error("store:discard_conflict: seq must be an integer", 2) end
  return self:transaction(function()
    local changes, msg, code = self.db:run("DELETE FROM geoservices_conflicts WHERE seq = ?", seq)
    if not changes then return nil, db_error(self.path, msg, code) end
    if changes == 0 then return nil, errors.invalid("seq", ("no conflict %d in this store"):format(seq)) end
    if self.format >= 5 then
      local ok, m, c = self.db:run("DELETE FROM geoservices_conflict_fields WHERE conflict_seq = ?", seq)
      if not ok then return nil, db_error(self.path, m, c) end
    end
    return true
  end)
end

local WITH = { ["local"] = true, server = true, base = true }

-- The version a resolution takes a field from.
local function chosen(d, with)
  if with == "base" then return true, d.base end
  if with == "local" then return not merge.same("any", d.base, d["local"]), d["local"] end
  return not merge.same("any", d.base, d.server), d.server
end

-- Resolves one conflict: the table's row moved to the chosen values (captured: queued).
local function resolve_one(st, e, with)
  local spec = st.layers[e.layer]
  if not spec then return nil, errors.invalid("layer", ("layer %s is not in this store"):format(tostring(e.layer))) end
  local current, m, c = st.db:get(e.layer, e.globalId)
  if current == nil and m then return nil, db_error(st.path, m, c) end
  local server = present(e.server) and e.server or nil
  -- the table holds the server's version (or a newer one a download brought) unless ours went over it
  if with == "server" and e.outcome ~= "local_kept" then return false end
  -- the version chosen is gone entirely: the local delete, the server's delete, no base
  local whole = (with == "local" and (e.op == "delete" or (e.op ~= "add" and not present(e.feature))))
    or (with == "server" and not server) or (with == "base" and not present(e.base))
  if with == "local" and e.op == "add" then whole = false end
  local queued = false
  if whole then
    if current then
      local n, rm, rc = st.db:remove(e.layer, e.globalId)
      if not n then return nil, db_error(st.path, rm, rc) end
      queued = n > 0
    end
    return queued
  end
  local target
  if current then
    target = { attributes = json.object(), geometry = current.geometry }
    for k, v in pairs(current.attributes) do target.attributes[k] = v end
    for _, d in ipairs(conflicts.differences(spec, e.base, e.feature, server)) do
      local take, value = chosen(d, with)
      if take then
        if d.field == "geometry" then target.geometry = value
        else target.attributes[d.field] = is_null(value) and json.null or value end
      end
    end
    if merge.same("any", target.attributes, current.attributes)
        and merge.same("geometry", target.geometry, current.geometry) then
      return false
    end
  else
    -- not in the table: the chosen version comes back as a new feature (the server keeps the old GlobalID)
    local from = with == "local" and e.feature or with == "server" and server or e.base
    target = { attributes = json.object(), geometry = from.geometry }
    for k, v in pairs(from.attributes) do target.attributes[k] = v end
    if e.op ~= "add" or with ~= "local" then target.attributes[spec.globalid] = edits.new_global_id() end
    if spec.oid then target.attributes[spec.oid] = nil end
  end
  local ok, pm, pc = st.db:put(e.layer, target)
  if not ok then return nil, db_error(st.path, pm, pc) end
  return true
end

local Resolved = { __name = "geoservices.store.Resolved" }
function Resolved:__tostring()
  if self.count == 0 then return "no conflict resolved" end
  return ("%d conflict%s resolved with the %s version%s; %d edit%s queued%s"):format(self.count,
    self.count == 1 and "" or "s", self.with == "base" and "base" or self.with, self.with == "base" and
    " (from before both edits)" or "", self.queued, self.queued == 1 and "" or "s",
    self.queued > 0 and (" (`geoservices sync %s` sends %s)"):format(shared.shell_word(self.path),
      self.queued == 1 and "it" or "them") or "")
end

--- Resolves conflicts: the chosen values go into the feature table as a
-- local edit (queued; the next sync sends it, merged with the server's
-- version as any edit), and the conflict leaves the list.
-- @tparam string|table which a GlobalID (any spelling), or `{all = true}`
-- @string with "local" (the local version again, on top of the server's), "server" (the
--   server's version stays: the local one is dropped) or "base" (the values from before both edits)
-- @treturn[1] table `count`, `queued` (edits queued by it), `globalIds`, `with`; prints as one line
-- @return[2] nil
-- @treturn[2] table err: kind "invalid" (`parameter` "global_id": no conflict of that GlobalID;
--   or the feature has a local edit made since, not sent: sync or discard it first), "busy", "io"
-- @raise when `with` is not one of the three, or `which` neither a string nor `{all = true}`
function Store:resolve(which, with)
  if not WITH[with] then error("store:resolve: with must be local, server or base", 2) end
  local all = type(which) == "table" and which.all == true
  if not all and type(which) ~= "string" then
    error("store:resolve: give a GlobalID or {all = true}", 2)
  end
  self:_db()
  return self:transaction(function()
    local list, err = self:conflicts()
    if not list then return nil, err end
    local key = not all and normalize_gid(which):upper():gsub("[{}]", "")
    local todo = {}
    for _, e in ipairs(list) do
      if all or normalize_gid(e.globalId):upper():gsub("[{}]", "") == key then todo[#todo + 1] = e end
    end
    if #todo == 0 and not all then
      return nil, errors.invalid("global_id", ("no conflict of GlobalID %s in %s (geoservices conflicts %s lists them)")
        :format(which, self.path, shared.shell_word(self.path)))
    end
    local done = setmetatable({ count = 0, queued = 0, globalIds = json.array(), with = with, path = self.path },
      Resolved)
    for _, e in ipairs(todo) do
      local waiting, m, c = self.db:rows("SELECT seq FROM gpkgext_geoservices_edits WHERE layer_id = ? AND "
        .. "global_id = ?",
        e.layer, e.globalId)
      if not waiting then return nil, db_error(self.path, m, c) end
      if #waiting > 0 then
        return nil, errors.invalid("global_id", ("feature %s has a local edit made since the conflict, not "
          .. "synchronized yet: sync (or discard it) first, then resolve"):format(e.globalId))
      end
      local queued, qerr = resolve_one(self, e, with)
      if queued == nil then return nil, qerr end
      local ok, derr = self:discard_conflict(e.seq)
      if not ok then return nil, derr end
      done.count = done.count + 1
      done.queued = done.queued + (queued and 1 or 0)
      done.globalIds[#done.globalIds + 1] = e.globalId
    end
    return done
  end)
end

--- The store's conflict policy: "manual" (the default), "server" or "local"
-- (geoservices.sync.merge); a sync's `conflicts` option overrides it.
-- @return the policy, or nil, err
function Store:conflict_policy()
  local rep, err = self:replica()
  if not rep then return nil, err end
  local p = type(rep.info) == "table" and rep.info.conflict_policy
  return merge.POLICIES[p] and p or merge.DEFAULT_POLICY
end

--- Sets the store's conflict policy.
-- @string policy "manual", "server" or "local"
-- @return true, or nil, err
-- @raise when policy is not one of the three
function Store:set_conflict_policy(policy)
  if not merge.POLICIES[policy] then error("store:set_conflict_policy: policy must be manual, server or local", 2) end
  return self:transaction(function()
    local rep, err = self:replica()
    if not rep then return nil, err end
    local info = type(rep.info) == "table" and rep.info or {}
    info.conflict_policy = policy
    local ok, m, c = self.db:run("UPDATE gpkgext_geoservices_replica SET info = ? WHERE id = 1", json.encode(info))
    if not ok then return nil, db_error(self.path, m, c) end
    return true
  end)
end

return resolve
