--- `geoservices replicas SERVICE`: the replicas a feature service holds
-- (client:list_replicas with details: its replicas resource, then each
-- replica's), one row each: name, id, owner, model, last sync, generation.
-- An administrator sees every replica, another user their own.
local json = require "geoservices.base.json"
local output = require "geoservices.cli.output"

local EXIT = output.EXIT

local replicas_cmd = {
  help = "The replicas of a feature service on the server (its replicas resource): name, id, owner, sync model, "
    .. "last sync, generation. An administrator sees every replica, another user their own.",
  exits = "0 listed, 1 the request failed (no such service...), 2 bad usage",
  examples = {
    "geoservices replicas Parcels",
    "geoservices --json replicas Parcels",
  },
}

function replicas_cmd.define(command)
  command:argument("service", "The feature service, e.g. Parcels.")
end

local function date_text(ms)
  if math.type(ms) ~= "integer" or ms <= 0 then return "-" end
  return os.date("!%Y-%m-%d %H:%M UTC", ms // 1000)
end

local function generation_text(r)
  if r.layerServerGens and #r.layerServerGens > 0 then
    local parts = {}
    for _, l in ipairs(r.layerServerGens) do parts[#parts + 1] = ("%s:%s"):format(l.id, tostring(l.serverGen)) end
    return table.concat(parts, " ")
  end
  return r.replicaServerGen and tostring(r.replicaServerGen) or "-"
end

local function owner_of(r)
  if type(r.replicaOwner) == "string" and r.replicaOwner ~= "" then return r.replicaOwner end
  return nil
end

-- The rows as columns padded to their widest cell.
local function table_lines(rows)
  local widths = {}
  for _, row in ipairs(rows) do
    for i, cell in ipairs(row) do widths[i] = math.max(widths[i] or 0, #cell) end
  end
  local lines = {}
  for _, row in ipairs(rows) do
    local cells = {}
    for i, cell in ipairs(row) do cells[i] = i < #row and (cell .. (" "):rep(widths[i] - #cell)) or cell end
    lines[#lines + 1] = "  " .. table.concat(cells, "  ")
  end
  return lines
end

function replicas_cmd.run(args, out, client)
  local list, err = client:list_replicas(args.service, { details = true })
  if not list then return output.fail(out, err, { command = "replicas" }) end
  if out.mode == "json" then
    for _, r in ipairs(list) do
      out:emit{ event = "replica", service = args.service, replicaName = r.replicaName, replicaID = r.replicaID,
                owner = owner_of(r), model = r.syncModel, syncDirection = r.syncDirection,
                creationDate = r.creationDate, lastSyncDate = r.lastSyncDate, generation = r.replicaServerGen,
                layerServerGens = r.layerServerGens and json.array(r.layerServerGens) or nil,
                layers = r.layers and json.array(r.layers) or nil,
                error = r.error and tostring(r.error) or nil }
    end
  else
    out:line(("%d replica%s of %s"):format(#list, #list == 1 and "" or "s", args.service))
    if #list > 0 then
      local rows = { { "NAME", "ID", "OWNER", "MODEL", "LAST SYNC", "GENERATION" } }
      for _, r in ipairs(list) do
        rows[#rows + 1] = { output.one_line(r.replicaName or "-"), output.one_line(r.replicaID),
                            output.one_line(owner_of(r) or "-"),
                            tostring(r.syncModel or "-"), date_text(r.lastSyncDate),
                            r.error and "(gone)" or generation_text(r) }
      end
      for _, line in ipairs(table_lines(rows)) do out:line(line) end
    end
  end
  return out:result(EXIT.ok, { command = "replicas", service = args.service, count = #list })
end

return replicas_cmd
