--- `geoservices status`: the organization root resource, state and stages.
local organization = require "geoservices.configure.organization"
local output = require "geoservices.cli.output"

local EXIT = output.EXIT

return function(_, out, client)
  local root, err = client:configure_status()
  if not root then return output.fail(out, err, { command = "status" }) end
  local state = organization.state(root)
  if out.mode == "json" then
    out:emit{ event = "status", state = state, summary = tostring(root), root = root }
  else
    out:line(tostring(root))
    for _, stage in ipairs(organization.stages(root)) do out:line(output.stage_line(stage)) end
  end
  return out:result(EXIT.ok, { command = "status", state = state })
end
