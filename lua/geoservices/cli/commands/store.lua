--- The commands that read and change a replica store without a server:
-- `geoservices status STORE.gpkg` (the replica, its generation, the last
-- sync, the local edits waiting by layer and kind, the failed ones, the
-- conflicts), `geoservices pending STORE.gpkg` (one line per local edit,
-- the attachment edits after the features'),
-- `geoservices discard STORE.gpkg GLOBALID...|--all` (drops local edits
-- and puts the server's version back); `conflicts` and `resolve` are in
-- geoservices.cli.commands.conflicts. Each with --json.
-- Returns the three command modules (see geoservices.cli: help, exits,
-- examples, define, run, client = false); `status` is the store half of
-- `geoservices status`.
local hints = require "geoservices.cli.hints"
local json = require "geoservices.base.json"
local output = require "geoservices.cli.output"
local store = require "geoservices.store"

local EXIT = output.EXIT
local word = hints.shell_word -- a path in the commands advised, as the shell reads it back

-- The commands that only read: where the store cannot be written (a
-- read-only medium, another user's folder, a full disk) they open it
-- read-only rather than fail (geoservices.store.open, issue 39).
local READ_ONLY = { status = true, pending = true }

-- (what the user changed in the tables' shapes is said on standard error by
-- every command but status, which lists it)
local function open(out, path, command)
  local st, err = store.open(path, { readonly = READ_ONLY[command] and "where_needed" or nil })
  if not st then -- no store that opens at the path: input the command cannot work on (as sync, replica info)
    out:error(err)
    return nil, out:result(EXIT.usage, { command = command })
  end
  if st.read_note then out:progress(st.read_note) end
  if command ~= "status" then
    for _, note in ipairs(st:schema_notes()) do out:progress(note) end
  end
  return st
end

local function layer_name(st, id)
  local spec = st.layers[id]
  return spec and spec.table or tostring(id)
end

-- A text value on one line (output.quoted), so one edit stays one line.
local quoted = output.quoted

-- NAME=value pairs of an edit's attributes (not its GlobalID), and "geometry" when it carries one.
local function fields_text(st, e)
  local f = type(e.feature) == "table" and e.feature or {}
  local spec = st.layers[e.layer]
  local names = {}
  for k in pairs(type(f.attributes) == "table" and f.attributes or {}) do
    if not spec or k ~= spec.globalid then names[#names + 1] = k end
  end
  table.sort(names)
  local parts = {}
  for _, k in ipairs(names) do
    local v = f.attributes[k]
    parts[#parts + 1] = ("%s=%s"):format(k, v == json.null and "null" or type(v) == "string" and quoted(v)
      or tostring(v))
  end
  if f.geometry ~= nil and f.geometry ~= json.null then parts[#parts + 1] = "geometry" end
  return table.concat(parts, " ")
end

-- The rows as aligned lines: op, layer, GlobalID, then what is left.
local function edit_lines(st, list, rest)
  local width = 0
  for _, e in ipairs(list) do width = math.max(width, #layer_name(st, e.layer)) end
  local lines = {}
  for _, e in ipairs(list) do
    local name = layer_name(st, e.layer)
    local tail = rest(e)
    lines[#lines + 1] = ("  %-6s  %s%s  %s%s"):format(e.op, name, (" "):rep(width - #name), e.globalId,
      tail ~= "" and ("  " .. tail) or "")
  end
  return lines
end

local function edit_event(st, event, e)
  local ev = { event = event, layer_name = layer_name(st, e.layer) }
  for _, k in ipairs{ "kind", "seq", "op", "layer", "globalId", "feature", "base", "server", "attempt", "created",
                      "detected", "description", "outcome", "refused" } do
    ev[k] = e[k]
  end
  return ev
end

-- ---- status ------------------------------------------------------------------

local status = { client = false }

--- `geoservices status STORE.gpkg`.
function status.run(args, out)
  local st, code = open(out, args.store, "status")
  if not st then return code end
  local s, err = st:status()
  local notes = st:schema_notes()
  st:close()
  if not s then return output.fail(out, err, { command = "status" }) end
  if out.mode == "json" then
    local layers = json.array()
    for _, l in ipairs(s.pending.layers) do
      layers[#layers + 1] = { id = l.id, name = l.name, add = l.add, update = l.update, delete = l.delete }
    end
    out:emit{ event = "store_status", path = s.path, service = s.service, replicaID = s.replicaID,
              replicaName = s.replicaName, syncModel = s.syncModel, syncDirection = s.syncDirection,
              generation = s.generation, layerServerGens = s.layerGenerations and json.array(s.layerGenerations),
              lastSync = s.lastSync, pending = s.pending.total, in_flight = s.pending.in_flight,
              pending_by_layer = layers, failed = s.failed, conflicts = s.conflicts, refused = s.refused,
              unknownCrs = json.array(s.unknownCrs or {}), schema = json.array(notes), summary = tostring(s),
              unregistered = s.unregistered }
  else
    out:line(("%s: replica %s %s of %s (%s, %s)"):format(s.path, tostring(s.replicaName or "-"),
      tostring(s.replicaID), tostring(s.service), tostring(s.syncModel), tostring(s.syncDirection)))
    local last = s.lastSync
    out:line(("  %s, %s"):format(s.generation and ("generation " .. tostring(s.generation))
      or ("%d layer generations"):format(#(s.layerGenerations or {})),
      last and ("last %s %s: %s%s"):format(last.operation, last.at, last.outcome,
        last.message and (" (" .. last.message .. ")") or "") or "never synchronized"))
    local parts = {}
    for _, l in ipairs(s.pending.layers) do
      local kinds = {}
      for _, op in ipairs{ "add", "update", "delete" } do
        if l[op] > 0 then kinds[#kinds + 1] = ("%d %s%s"):format(l[op], op, l[op] == 1 and "" or "s") end
      end
      parts[#parts + 1] = ("%s: %s"):format(l.name, table.concat(kinds, ", "))
    end
    out:line(("  %d local edit%s%s%s%s"):format(s.pending.total, s.pending.total == 1 and "" or "s",
      #parts > 0 and (" (" .. table.concat(parts, "; ") .. ")") or "",
      s.pending.in_flight > 0 and (", %d in flight"):format(s.pending.in_flight) or "",
      (s.refused or 0) > 0 and (", %d refused here (geoservices pending %s)"):format(s.refused, word(s.path)) or ""))
    out:line(("  %d failed%s, %d conflict%s%s"):format(s.failed,
      s.failed > 0 and (" (geoservices replica failed " .. word(s.path) .. ")") or "", s.conflicts,
      s.conflicts == 1 and "" or "s", s.conflicts > 0 and (" (geoservices conflicts " .. word(s.path) .. ")") or ""))
    if s.unregistered then
      out:line(("  unregistered: this store can no longer synchronize%s"):format(s.pending.total > 0
        and (" (its %d local edit%s will never be sent)"):format(s.pending.total, s.pending.total == 1 and "" or "s")
        or ""))
    end
    for _, u in ipairs(s.unknownCrs or {}) do -- GDAL and QGIS show these layers without a CRS
      out:line(("  unknown CRS: %s %s:%s (%s)"):format(u.layer, u.organization, tostring(u.code), u.reason))
    end
    local unrepresentable = require "geoservices.store.file.unrepresentable" -- kept as the server sent them
    if s.unrepresentable.count > 0 then out:line("  " .. unrepresentable.summary(s.unrepresentable) .. ":") end
    for _, u in ipairs(s.unrepresentable) do out:line("    layer " .. unrepresentable.line(u)) end
    for _, note in ipairs(notes) do out:line("  " .. note) end
  end
  return out:result(EXIT.ok, { command = "status", pending = s.pending.total })
end

-- ---- pending -------------------------------------------------------------------

local pending = {
  help = "The local edits of a replica store not yet committed by the server, one line each: kind, layer, "
    .. "GlobalID and what it sends. Needs no server, and reads a store it cannot write (a read-only medium, a "
    .. "full disk).",
  exits = "0 listed, 1 the store cannot be read (damaged: the message names the row), 2 bad usage or no store "
    .. "that opens at the path",
  examples = { "geoservices pending crew-1.gpkg", "geoservices --json pending crew-1.gpkg" },
  client = false,
}

function pending.define(command)
  command:argument("store", "A replica store (.gpkg).")
end

-- `pending`: one of a store's lists, a line (or an event)
-- an edit; `detail(st, edit)` the end of its line; `more(st, out)` lists
-- what follows (the attachment edits) and returns how many.
local function list_command(name, event, detail, more)
  return function(args, out)
    local st, code = open(out, args.store, name)
    if not st then return code end
    local list, err = st[name](st)
    if not list then
      st:close()
      return output.fail(out, err, { command = name })
    end
    if out.mode == "json" then
      for _, e in ipairs(list) do out:emit(edit_event(st, event, e)) end
    else
      out:line(tostring(list))
      for _, line in ipairs(edit_lines(st, list, function(e) return detail(st, e) end)) do out:line(line) end
    end
    local extra = more and more(st, out) or 0
    st:close()
    return out:result(EXIT.ok, { command = name, count = #list + extra })
  end
end


-- The attachment edits waiting or refused: after the features' lines, one
-- each, kind "attachment" (geoservices.store.edits.attachment_edits).
local function attachment_lines(st, out)
  local list = st:attachment_edits()
  if out.mode == "json" then
    for _, e in ipairs(list) do
      out:emit{ event = "pending_edit", kind = "attachment", seq = e.seq, op = e.op, layer = e.layer,
                layer_name = layer_name(st, e.layer), globalId = e.globalId, parentGlobalId = e.parentGlobalId,
                name = e.name, sent = e.sent, failed = e.failed, code = e.code }
    end
    return #list
  end
  if #list > 0 then out:line(("%d attachment edit%s:"):format(#list, #list == 1 and "" or "s")) end
  for _, e in ipairs(list) do
    out:line(("  attachment %-6s  %s  %s  %s%s%s"):format(e.op, layer_name(st, e.layer), e.globalId,
      tostring(e.name or ""), e.sent and "  (in flight)" or "",
      e.failed and ("  (refused: %s%s; geoservices discard %s %s)"):format(e.failed,
        e.code and (" code " .. tostring(e.code)) or "", word(st.path), e.globalId) or ""))
  end
  return #list
end

local list_pending = list_command("pending", "pending_edit", function(st, e)
  return (e.attempt and "(in flight) " or "") .. fields_text(st, e)
    .. (e.refused and ("  (refused here, not sent: %s)"):format(e.refused) or "")
end, attachment_lines)

pending.run = list_pending

-- ---- discard ------------------------------------------------------------------

local discard = {
  help = "Drop local edits of a replica store not yet sent and put the server's version back (an add removed, "
    .. "an update's or a delete's values from before it written back). Needs no server.",
  exits = "0 discarded, 1 the store cannot be written, 2 bad usage (no store that opens at the path, no GlobalID "
    .. "nor --all, no local edit of a GlobalID, one in flight)",
  examples = { "geoservices discard crew-1.gpkg {0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}",
               "geoservices discard --all crew-1.gpkg" },
  client = false,
}

function discard.define(command)
  command:argument("store", "A replica store (.gpkg).")
  command:argument("global_id", "GlobalIDs of the features whose local edits go.", nil, nil, "*")
  command:flag("--all", "Every local edit not sent yet.")
end

function discard.run(args, out)
  if not args.all and #args.global_id == 0 then
    return output.usage_error(out, "discard: give the GlobalIDs of the edits to drop, or --all")
  end
  local st, code = open(out, args.store, "discard")
  if not st then return code end
  local done, err
  if args.all then done, err = st:discard{ all = true } else done, err = st:discard(args.global_id) end
  st:close()
  if not done then return output.fail(out, err, { command = "discard" }) end
  if out.mode == "json" then
    out:emit{ event = "discarded", count = done.count, removed = done.removed, restored = done.restored,
              globalIds = done.globalIds, summary = tostring(done) }
  else
    out:line(tostring(done))
  end
  return out:result(EXIT.ok, { command = "discard", count = done.count })
end

return { status = status, pending = pending, discard = discard }
