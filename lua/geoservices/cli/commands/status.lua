--- `geoservices status`: the organization root resource, state and stages.
-- Exits 1 when the organization's configuration failed (or the request did).
local organization = require "geoservices.configure.organization"
local output = require "geoservices.cli.output"

local EXIT = output.EXIT

return function(_, out, client)
  local root, err = client:configure_status()
  if not root then return output.fail(out, err, { command = "status" }) end
  local state = organization.state(root)
  local failed = state == "failed"
  if out.mode == "json" then
    out:emit{ event = "status", state = state, summary = tostring(root), root = root }
  else
    local color = failed and "red" or (organization.is_done(state) and "green" or "bold")
    out:line(out:paint(tostring(root), color))
    for _, stage in ipairs(organization.stages(root)) do out:line(output.stage_line(stage, out)) end
  end
  if failed then
    local status = type(root.status) == "table" and root.status or {}
    out:error(("the organization's configuration failed%s"):format(
      type(status.message) == "string" and (": " .. status.message) or ""))
    return out:result(EXIT.failed, { command = "status", state = state })
  end
  return out:result(EXIT.ok, { command = "status", state = state })
end
