--- `geoservices services ID...`: getServicesById. Exits 3 when the server
-- did not return every id asked for (they are named). `--search TEXT`: the
-- services whose name holds TEXT, from the administrator directory (exit 0
-- with none: an empty list is an answer).
local output = require "geoservices.cli.output"
local pp = require "geoservices.base.pp"

local EXIT = output.EXIT

-- `--search TEXT`: the services whose name holds TEXT, with folder, type and id.
local function search(args, out, client)
  local list, err = client:list_services{ search = args.search }
  if not list then return output.fail(out, err, { command = "services" }) end
  if out.mode == "json" then
    for _, s in ipairs(list) do
      out:emit{ event = "service", service = { serviceName = s.serviceName, folderName = s.folderName, type = s.type,
                                               id = s.id, description = s.description } }
    end
  else
    out:line(("%d service%s named like '%s'"):format(#list, #list == 1 and "" or "s", args.search))
    for _, s in ipairs(list) do
      local where = (s.folderName and s.folderName ~= "/") and (s.folderName .. "/") or ""
      out:line(output.one_line(("  %s%s.%s  %s"):format(where, tostring(s.serviceName), tostring(s.type),
        s.id and ("id " .. tostring(s.id)) or "(no id in its folder's listing)")))
    end
  end
  -- zero matches is an answer, not a failure: exit 0 with an empty list
  return out:result(EXIT.ok, { command = "services", count = #list })
end

return function(args, out, client)
  if args.search then return search(args, out, client) end
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
