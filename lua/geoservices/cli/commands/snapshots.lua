--- `geoservices snapshots ITEM_ID`: notebooks/snapshots/list.
local output = require "geoservices.cli.output"
local pp = require "geoservices.base.pp"

local EXIT = output.EXIT

local function ms_date(ms)
  ms = math.tointeger(tonumber(ms))
  if not ms then return "?" end
  return os.date("!%Y-%m-%d %H:%M", ms // 1000)
end

return function(args, out, client)
  local list, err = client:list_snapshots(args.item_id)
  if not list then return output.fail(out, err, { command = "snapshots" }) end
  local snaps = list.snapshots or {}
  if out.mode == "json" then
    for _, s in ipairs(snaps) do out:emit{ event = "snapshot", item = args.item_id, snapshot = s } end
  else
    out:line(tostring(list))
    for _, s in ipairs(snaps) do
      local props = type(s.properties) == "table" and s.properties or {}
      out:line(("  %-24s %-36s %s%s"):format(output.one_line(props.name or "?"), output.one_line(s.resourceKey or "?"),
        ms_date(s.created), props.private == true and " private" or ""))
      if out.verbose > 0 then out:line(pp.format(s)) end
    end
  end
  return out:result(EXIT.ok, { command = "snapshots", count = #snaps, total = list.total })
end
