--- Three-way merge of one feature: the base (the feature as it was when
-- the local edit was made), the local version and the server's current
-- version give the edit to send, the values kept from the server and the
-- conflicts. Pure: tables in, tables out, no I/O.
--
-- Field by field (the geometry is one more field, its conflict a "move"):
--
-- * changed here only: sent;
-- * changed on the server only: kept from the server (not sent);
-- * changed on both sides to the same value (at the precision the field's
--   type keeps): nothing to send, no conflict;
-- * changed on both sides to different values: a conflict (`field`, or
--   `move` for the geometry).
--
-- Whole-feature conflicts: an update of a feature the server deleted
-- (`update_delete`), a delete of a feature the server changed
-- (`delete_update`). A delete of a feature the server deleted too sends
-- nothing. Attachments merge the same way, by attachment id (`attachment`).
--
-- @{decide} applies a policy to a merge: `manual` (the default of a store:
-- the edit is held back whole, nothing is overwritten, the rest syncs),
-- `server` (the server's values win the conflicting fields, the rest of the
-- local edit is sent) or `local` (the local values are sent over the
-- server's; an update of a feature the server deleted is held back as
-- under manual: a server never takes the GlobalID of a deleted feature
-- again). Every conflict is returned whichever policy decides it: the
-- caller keeps it where the user sees it.
-- @module geoservices.sync.merge
-- @local
local compare = require "geoservices.sync.compare"
local json = require "geoservices.base.json"

local merge = {}

--- The policies, and the one a store uses when none is given.
merge.POLICIES = { manual = true, server = true, ["local"] = true }
merge.DEFAULT_POLICY = "manual"

--- The kinds of conflict.
merge.KINDS = { "field", "move", "update_delete", "delete_update", "attachment" }

local function is_null(v) return v == nil or v == json.null end

-- The comparison kind of a field: what its type keeps.
local KIND_OF_ESRI = {
  esriFieldTypeSingle = "single", esriFieldTypeDouble = "real", esriFieldTypeGUID = "guid",
  esriFieldTypeGlobalID = "guid", esriFieldTypeDate = "date", esriFieldTypeInteger = "integer",
  esriFieldTypeSmallInteger = "integer", esriFieldTypeBigInteger = "integer", esriFieldTypeOID = "integer",
}

--- The comparison kind of a field described as a store column
-- (`{type =, esri_type =}`) or a service field (`{type = "esriFieldType..."}`).
function merge.kind_of(field)
  if type(field) ~= "table" then return "any" end
  local k = KIND_OF_ESRI[field.esri_type or ""] or KIND_OF_ESRI[field.type or ""]
  if k then return k end
  if field.type == "real" then return "real" end
  if field.type == "guid" then return "guid" end
  return "any"
end

-- A merge's kind as geoservices.sync.compare's: a date is exact to the
-- millisecond (both sides hold the value as stored, none is read back at a
-- coarser unit); "real" and "any" are compare's unknown kind.
local COMPARE_KIND = { single = "single", integer = "integer", date = "integer", guid = "guid" }

-- Relative tolerance of a double written with 17 digits and read back (a
-- float32 field and geometries: geoservices.sync.compare's own).
local STORED = { double = 1e-12 }

--- Whether two values of a field of comparison kind `kind` are the same at
-- the precision the field keeps: null and absent alike, numbers within
-- the type's tolerance (float32, double), GUIDs whatever their case and
-- braces, dates to the millisecond, tables member by member
-- (geoservices.sync.compare.value). Geometries as geoservices.sync.compare
-- reads them back (coordinates at the server's resolution, a polygon's rings
-- in any order, orientation and start point); the spatial reference is not
-- part of the shape.
-- @string kind from @{kind_of} ("any" when unknown), or "geometry"
-- @param a a value
-- @param b a value
-- @treturn boolean
function merge.same(kind, a, b)
  if kind == "geometry" then return compare.geometry(a, b, nil) end
  return compare.value(COMPARE_KIND[kind], a, b, STORED)
end

local function attrs(f) return type(f) == "table" and type(f.attributes) == "table" and f.attributes or {} end

-- The names of the fields to compare: those of `fields` (a list of
-- {name =, ...}), else every attribute any version has; never `skip`'s.
local function field_list(opts, base, mine, theirs)
  local list, seen = {}, {}
  local function add(name, field)
    if not seen[name] and not opts.skip[name] then
      seen[name] = true
      list[#list + 1] = { name = name, kind = merge.kind_of(field) }
    end
  end
  if opts.fields then
    for _, f in ipairs(opts.fields) do add(f.name, f) end
  else
    local names = {}
    for _, f in ipairs{ base, mine, theirs } do
      for k in pairs(attrs(f)) do names[#names + 1] = k end
    end
    table.sort(names)
    for _, k in ipairs(names) do add(k) end
  end
  return list
end

-- Merges one value: returns what happens ("none", "mine", "theirs", "same",
-- "conflict").
local function merge_value(kind, b, m, t)
  local mine_changed = not merge.same(kind, b, m)
  local theirs_changed = not merge.same(kind, b, t)
  if not mine_changed and not theirs_changed then return "none" end
  if mine_changed and not theirs_changed then return "mine" end
  if theirs_changed and not mine_changed then return "theirs" end
  if merge.same(kind, m, t) then return "same" end
  return "conflict"
end

-- Attachments by id: `{[id] = {name =, size =, hash = ...} }` (any table
-- compared member by member), nil when a side has none.
local function merge_attachments(r, base, mine, theirs)
  if not (base or mine or theirs) then return end
  base, mine, theirs = base or {}, mine or {}, theirs or {}
  local ids, seen = {}, {}
  for _, side in ipairs{ base, mine, theirs } do
    for id in pairs(side) do
      if not seen[id] then
        seen[id] = true
        ids[#ids + 1] = id
      end
    end
  end
  table.sort(ids, function(x, y) return tostring(x) < tostring(y) end)
  r.attachments = { send = {}, kept = {} }
  for _, id in ipairs(ids) do
    local b, m, t = base[id], mine[id], theirs[id]
    local what = merge_value("any", b, m, t)
    if what == "mine" then
      -- a local add, update or delete of an attachment the server has as it was
      r.attachments.send[#r.attachments.send + 1] = { id = id, op = b == nil and "add" or m == nil and "delete"
        or "update", value = m }
    elseif what == "theirs" then
      r.attachments.kept[#r.attachments.kept + 1] = { id = id, value = t }
    elseif what == "conflict" then
      local how = (m == nil and "delete_update") or (t == nil and "update_delete") or "update_update"
      r.conflicts[#r.conflicts + 1] = { kind = "attachment", id = id, how = how, base = b, mine = m, theirs = t }
    end
  end
end

--- Merges three versions of a feature.
-- @tparam table v `base` (the feature before the local edit: `{attributes =, geometry =}`; nil for a
--   local add), `mine` (the local version; nil when deleted here), `theirs` (the server's; nil when
--   deleted there), `fields` (optional list of `{name =, type =}`, the store's columns or the
--   service's fields: their types set the precision; without it every attribute is compared as it
--   is), `skip` (names never merged: the OBJECTID and GlobalID fields), `geometry` (false: the layer
--   has none), `base_attachments`, `mine_attachments`, `theirs_attachments` (`[id] = description`)
-- @treturn table `op` ("add", "update", "delete" or "none": what is left to send), `send`
--   (`{attributes =, geometry =}`: the fields only we changed, for an update), `kept` (`[field] =
--   server value` of the fields only the server changed; `geometry` among them when it moved
--   there), `same` (list of fields both sides changed alike), `conflicts` (list of `{kind =, field
--   =, base =, mine =, theirs =}`; `changed` lists the server's changed fields of a
--   delete_update), `attachments` (`send`, `kept`) when attachments were given
function merge.feature(v)
  local opts = { skip = v.skip or {}, fields = v.fields }
  local base, mine, theirs = v.base, v.mine, v.theirs
  local r = { op = "none", send = nil, kept = {}, same = {}, conflicts = {} }
  merge_attachments(r, v.base_attachments, v.mine_attachments, v.theirs_attachments)
  if base == nil then
    -- a local add: nobody else knew its GlobalID; the server's copy, if any, is our own add applied
    if mine ~= nil and theirs == nil then
      r.op, r.send = "add", { attributes = attrs(mine), geometry = mine.geometry }
    end
    return r
  end
  local list = field_list(opts, base, mine, theirs)
  local with_geometry = v.geometry ~= false
  if mine == nil and theirs == nil then return r end -- deleted on both sides
  if mine == nil then
    -- our delete: a conflict when the server changed anything since the base
    local changed = {}
    for _, f in ipairs(list) do
      if not merge.same(f.kind, attrs(base)[f.name], attrs(theirs)[f.name]) then changed[#changed + 1] = f.name end
    end
    if with_geometry and not merge.same("geometry", base.geometry, theirs.geometry) then
      changed[#changed + 1] = "geometry"
    end
    if #changed == 0 then
      r.op = "delete"
    else
      r.conflicts[#r.conflicts + 1] = { kind = "delete_update", changed = changed, base = base, theirs = theirs }
    end
    return r
  end
  local send = { attributes = json.object() }
  local sends = false
  local changed_here = {}
  for _, f in ipairs(list) do
    local b, m, t = attrs(base)[f.name], attrs(mine)[f.name], theirs and attrs(theirs)[f.name]
    if not merge.same(f.kind, b, m) then changed_here[#changed_here + 1] = f.name end
    if theirs then
      local what = merge_value(f.kind, b, m, t)
      if what == "mine" then
        send.attributes[f.name] = is_null(m) and json.null or m
        sends = true
      elseif what == "theirs" then
        r.kept[f.name] = is_null(t) and json.null or t
      elseif what == "same" then
        r.same[#r.same + 1] = f.name
      elseif what == "conflict" then
        r.conflicts[#r.conflicts + 1] = { kind = "field", field = f.name, base = b, mine = m, theirs = t }
      end
    end
  end
  if with_geometry and not merge.same("geometry", base.geometry, mine.geometry) then
    changed_here[#changed_here + 1] = "geometry"
  end
  if theirs == nil then
    -- the server deleted what we changed
    if #changed_here > 0 then
      r.conflicts[#r.conflicts + 1] = { kind = "update_delete", changed = changed_here, base = base, mine = mine }
    end
    return r
  end
  if with_geometry then
    local what = merge_value("geometry", base.geometry, mine.geometry, theirs.geometry)
    if what == "mine" then
      send.geometry = is_null(mine.geometry) and json.null or mine.geometry
      sends = true
    elseif what == "theirs" then
      r.kept.geometry = is_null(theirs.geometry) and json.null or theirs.geometry
    elseif what == "same" then
      r.same[#r.same + 1] = "geometry"
    elseif what == "conflict" then
      r.conflicts[#r.conflicts + 1] = { kind = "move", field = "geometry", base = base.geometry, mine = mine.geometry,
                                        theirs = theirs.geometry }
    end
  end
  if sends then r.op, r.send = "update", send end
  return r
end

--- What a policy makes of a merge.
-- @tparam table r from @{feature}
-- @string policy "manual", "server" or "local"
-- @treturn table `op` ("add", "update", "delete" or "none": what is sent), `send` (the feature for an
--   add or update), `outcome`: "sent" (no conflict, the server had not changed the feature), "merged"
--   (no conflict; the server's changes of other fields kept), "held" (manual: a conflict, nothing of
--   this edit sent), "server_kept" (the server's values kept for the conflicts, the rest of the edit
--   sent), "local_kept" (the local values sent over the server's), "nothing" (nothing left to send);
--   `conflicts` (r's)
function merge.decide(r, policy)
  if not merge.POLICIES[policy] then
    error(("merge.decide: policy must be manual, server or local, not %s"):format(tostring(policy)), 2)
  end
  local d = { conflicts = r.conflicts }
  local theirs_changed = next(r.kept) ~= nil or #r.same > 0
  if #r.conflicts == 0 then
    d.op, d.send = r.op, r.send
    if r.op == "none" then d.outcome = "nothing"
    else d.outcome = theirs_changed and "merged" or "sent" end
    return d
  end
  if policy == "manual" then
    d.op, d.outcome = "none", "held"
    return d
  end
  if policy == "server" then
    -- what does not conflict still goes; a whole-feature conflict sends nothing
    d.op, d.send, d.outcome = r.op, r.send, "server_kept"
    return d
  end
  -- local: our values over the server's
  local send = { attributes = json.object() }
  for k, val in pairs(r.send and r.send.attributes or {}) do send.attributes[k] = val end
  if r.send then send.geometry = r.send.geometry end
  d.outcome = "local_kept"
  for _, k in ipairs(r.conflicts) do
    if k.kind == "field" then
      send.attributes[k.field] = is_null(k.mine) and json.null or k.mine
    elseif k.kind == "move" then
      send.geometry = is_null(k.mine) and json.null or k.mine
    elseif k.kind == "delete_update" then
      d.op = "delete"
    elseif k.kind == "update_delete" then
      -- a server keeps the GlobalID of a feature it deleted (an add of it is refused): held back as under
      -- manual; resolving it with the local version adds that as a new feature
      d.op, d.send, d.outcome = "none", nil, "held"
      return d
    end
  end
  if d.op == nil then -- field and move conflicts
    d.op = (next(send.attributes) ~= nil or send.geometry ~= nil) and "update" or "none"
    d.send = d.op == "update" and send or nil
  end
  return d
end

--- A conflict in words: "OWNER: base "A", here "C", server "B"".
-- @tparam table k a conflict from @{feature}
-- @treturn string
function merge.describe(k)
  local function show(v)
    if is_null(v) then return "null" end
    if type(v) == "string" then return ("%q"):format(v) end
    if type(v) == "table" then return "(a geometry)" end
    return tostring(v)
  end
  if k.kind == "field" then
    return ("%s: base %s, here %s, server %s"):format(k.field, show(k.base), show(k.mine), show(k.theirs))
  elseif k.kind == "move" then
    return "geometry: moved here and on the server, to different places"
  elseif k.kind == "update_delete" then
    return ("changed here (%s), deleted on the server"):format(table.concat(k.changed, ", "))
  elseif k.kind == "delete_update" then
    return ("deleted here, changed on the server (%s)"):format(table.concat(k.changed, ", "))
  end
  return ("attachment %s: %s"):format(tostring(k.id), k.how)
end

return merge
