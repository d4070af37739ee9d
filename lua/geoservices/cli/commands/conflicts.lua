--- `geoservices conflicts STORE.gpkg` (the local edits that conflict with
-- the server's version, each with its differing fields and their base,
-- local and server values; `--policy P` sets the store's conflict policy)
-- and `geoservices resolve STORE.gpkg GLOBALID...|--all --with
-- local|server|base`. Both run without a server, each with --json.
-- Returns the two command modules (see geoservices.cli).
local hints = require "geoservices.cli.hints"
local json = require "geoservices.base.json"
local output = require "geoservices.cli.output"
local store = require "geoservices.store"

local EXIT = output.EXIT

-- `reading`: the command only reads (the list): where the store cannot be
-- written it is opened read-only (geoservices.store.open, issue 39)
local function open(out, path, command, reading)
  local st, err = store.open(path, { readonly = reading and "where_needed" or nil })
  if not st then -- no store that opens at the path: input the command cannot work on (as sync, replica info)
    out:error(err)
    return nil, out:result(EXIT.usage, { command = command })
  end
  if st.read_note then out:progress(st.read_note) end
  return st
end

-- A value as the lines show it: text quoted, null as null, a geometry by its kind.
local function shown(v)
  if v == nil or v == json.null then return "null" end
  if type(v) == "string" then return output.quoted(v) end
  if type(v) == "table" then
    if v.x then return ("point (%s %s)"):format(tostring(v.x), tostring(v.y)) end
    for _, member in ipairs{ "points", "paths", "rings", "curvePaths", "curveRings" } do
      if v[member] then return ("%s (%d)"):format(member, #v[member]) end
    end
    return "(a geometry)"
  end
  return tostring(v)
end

local POLICY_WORDS = {
  manual = "manual: an edit in conflict is held back whole, the rest syncs, nothing is overwritten",
  server = "server: the server's values are kept where both sides changed a field, the rest of the edit is sent",
  ["local"] = "local: the local values are sent over the server's where both sides changed a field",
}

-- ---- conflicts ----------------------------------------------------------------------

local conflicts = {
  help = "The local edits of a replica store that conflict with the server's version (kept in its layer "
    .. "geoservices_conflicts, which QGIS draws): kind, layer, GlobalID, the policy and outcome, then each "
    .. "differing field with its base, local and server values. --policy sets the store's conflict policy. "
    .. "Needs no server.",
  exits = "0 listed (or the policy set), 1 the store cannot be read, 2 bad usage or no store that opens at the path",
  examples = { "geoservices conflicts crew-1.gpkg", "geoservices --json conflicts crew-1.gpkg",
               "geoservices conflicts --policy server crew-1.gpkg   # the store's policy from now on" },
  client = false,
}

function conflicts.define(command)
  command:argument("store", "A replica store (.gpkg).")
  command:option("--policy", "Set the store's conflict policy: manual (the default), server or local.")
    :choices{ "manual", "server", "local" }
end

function conflicts.run(args, out)
  local st, code = open(out, args.store, "conflicts", not args.policy)
  if not st then return code end
  if args.policy then
    local ok, err = st:set_conflict_policy(args.policy)
    if not ok then
      st:close()
      return output.fail(out, err, { command = "conflicts" })
    end
  end
  local list, err = st:conflicts()
  local policy = list and st:conflict_policy()
  st:close()
  if not list then return output.fail(out, err, { command = "conflicts" }) end
  if out.mode == "json" then
    for _, e in ipairs(list) do
      local differences = json.array()
      for _, d in ipairs(e.differences) do
        differences[#differences + 1] = { field = d.field, base = d.base, ["local"] = d["local"], server = d.server,
                                          conflict = d.conflict }
      end
      out:emit{ event = "conflict", seq = e.seq, op = e.op, layer = e.layer, layer_name = e.layer_name,
                globalId = e.globalId, kind = e.kind, policy = e.policy, outcome = e.outcome, detected = e.detected,
                description = e.description, differences = differences, feature = e.feature, base = e.base,
                server = e.server }
    end
  else
    out:line(tostring(list))
    for _, e in ipairs(list) do
      out:line(("  %-6s  %s  %s  %s%s, %s%s"):format(e.op, tostring(e.layer_name or e.layer), e.globalId,
        tostring(e.kind or "conflict"), e.policy and (" (policy " .. e.policy .. ")") or "", tostring(e.outcome),
        e.detected and (", " .. e.detected) or ""))
      local width = 0
      for _, d in ipairs(e.differences) do width = math.max(width, #d.field) end
      for _, d in ipairs(e.differences) do
        out:line(("      %s%s  base %s, here %s, server %s%s"):format(d.field, (" "):rep(width - #d.field),
          shown(d.base), shown(d["local"]), shown(d.server), d.conflict and "  (both changed)" or ""))
      end
      out:line(("      resolve: geoservices resolve %s %s --with local (or --with server, --with base)"):format(
        hints.shell_word(args.store), e.globalId))
    end
    out:line("conflict policy " .. POLICY_WORDS[policy])
  end
  return out:result(EXIT.ok, { command = "conflicts", count = #list, policy = policy })
end

-- ---- resolve ----------------------------------------------------------------------

local resolve = {
  help = "Resolve conflicts of a replica store: --with local queues the local version again on top of the "
    .. "server's, --with server drops it, --with base restores the values from before both edits. The next "
    .. "sync sends what it queued. Needs no server.",
  exits = "0 resolved, 1 the store cannot be written, 2 bad usage (no store that opens at the path, no GlobalID "
    .. "nor --all, no --with, no conflict of a GlobalID, a feature edited since the conflict)",
  examples = { "geoservices resolve crew-1.gpkg {0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01} --with local",
               "geoservices resolve crew-1.gpkg --all --with server" },
  client = false,
}

function resolve.define(command)
  command:argument("store", "A replica store (.gpkg).")
  command:argument("global_id", "GlobalIDs of the features whose conflicts to resolve.", nil, nil, "*")
  command:flag("--all", "Every conflict of the store.")
  command:option("--with", "The version kept: local, server or base."):choices{ "local", "server", "base" }
end

function resolve.run(args, out)
  if not args.with then
    return output.usage_error(out, "resolve: say which version to keep: --with local|server|base")
  end
  if not args.all and #args.global_id == 0 then
    return output.usage_error(out, "resolve: give the GlobalIDs of the conflicts to resolve, or --all")
  end
  local st, code = open(out, args.store, "resolve")
  if not st then return code end
  local total = { count = 0, queued = 0, globalIds = json.array() }
  local targets = args.all and { { all = true } } or args.global_id
  for _, which in ipairs(targets) do
    local done, err = st:resolve(which, args.with)
    if not done then
      st:close()
      return output.fail(out, err, { command = "resolve" })
    end
    total.count, total.queued = total.count + done.count, total.queued + done.queued
    for _, g in ipairs(done.globalIds) do total.globalIds[#total.globalIds + 1] = g end
    total.text = tostring(done)
  end
  st:close()
  if #targets > 1 then
    total.text = ("%d conflicts resolved with the %s version; %d edits queued"):format(total.count, args.with,
      total.queued)
  end
  if out.mode == "json" then
    out:emit{ event = "resolved", with = args.with, count = total.count, queued = total.queued,
              globalIds = total.globalIds, summary = total.text }
  else
    out:line(total.text)
  end
  return out:result(EXIT.ok, { command = "resolve", count = total.count })
end

return { conflicts = conflicts, resolve = resolve }
