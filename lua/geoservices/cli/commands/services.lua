--- `geoservices services ID...`: getServicesById. Exits 3 when the server
-- did not return every id asked for (they are named).
local output = require "geoservices.cli.output"
local pp = require "geoservices.pp"

local EXIT = output.EXIT

return function(args, out, client)
  local list, err = client:get_services_by_id(args.id)
  if not list then return output.fail(out, err, { command = "services" }) end
  local missing = list.missing or {}
  if out.mode == "json" then
    for _, s in ipairs(list) do out:emit{ event = "service", service = s } end
    for _, id in ipairs(missing) do out:emit{ event = "missing", id = id } end
  else
    out:line(tostring(list))
    for _, s in ipairs(list) do
      out:line("  " .. tostring(s))
      if out.verbose > 0 then out:line(pp.format(s, { max_depth = out.verbose + 1 })) end
    end
    if #missing > 0 then
      out.stderr:write(out:paint("geoservices:", "red", "stderr"), (" the server did not return %d of the ids "
        .. "asked for: %s\n"):format(#missing, table.concat(missing, ", ")))
    end
  end
  return out:result(#missing > 0 and EXIT.partial or EXIT.ok,
    { command = "services", count = #list, missing = #missing > 0 and missing or nil })
end
