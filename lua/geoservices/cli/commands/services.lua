--- `geoservices services ID...`: getServicesById.
local output = require "geoservices.cli.output"
local pp = require "geoservices.pp"

local EXIT = output.EXIT

return function(args, out, client)
  local list, err = client:get_services_by_id(args.id)
  if not list then return output.fail(out, err, { command = "services" }) end
  if out.mode == "json" then
    for _, s in ipairs(list) do out:emit{ event = "service", service = s } end
  else
    out:line(tostring(list))
    for _, s in ipairs(list) do
      out:line("  " .. tostring(s))
      if out.verbose > 0 then out:line(pp.format(s, { max_depth = out.verbose + 1 })) end
    end
  end
  return out:result(EXIT.ok, { command = "services", count = #list })
end
