--- `--dry-run`: the library validates everything and builds every request
-- exactly as usual; an observer of the client (Client:observe) captures each
-- request as it is about to go out, with every secret redacted, and refuses
-- it, so nothing reaches the network. The captured requests are printed.
local json = require "geoservices.base.json"
local output = require "geoservices.cli.output"

local dry_run = {}

--- Attaches the capturing observer; returns the list it fills.
function dry_run.attach(client)
  local captured = {}
  client:observe(function(event)
    if event.type ~= "request" then return nil end
    captured[#captured + 1] = { method = event.method, url = event.url, content_type = event.content_type,
                                fields = event.fields or {}, files = event.files or {} }
    return output.DRY_RUN
  end)
  return captured
end

local function show_request(out, req)
  if out.mode == "json" then
    local fields = {}
    for _, pair in ipairs(req.fields) do fields[pair[1]] = pair[2] end
    out:emit{ event = "request", dry_run = true, method = req.method, url = req.url,
              content_type = req.content_type, fields = json.object(fields), files = json.array(req.files) }
    return
  end
  out:line(("%s %s (%s)"):format(req.method, req.url, req.content_type or "no body"))
  for _, pair in ipairs(req.fields) do
    local value = pair[2]:gsub("\n", "\\n")
    if #value > 160 and out.verbose == 0 then
      value = value:sub(1, 120) .. ("... (%d bytes; -v shows all)"):format(#value)
    end
    out:line(("  %s = %s"):format(pair[1], value))
  end
  for _, f in ipairs(req.files) do out:line(("  %s = file %s (%s)"):format(f.name, f.filename, f.source)) end
end

--- Prints the captured requests and the closing result.
function dry_run.finish(out, captured, command)
  if out.mode ~= "json" then out:line("dry run: nothing was sent; the request would be:") end
  for _, req in ipairs(captured) do show_request(out, req) end
  return out:result(output.EXIT.ok, { command = command, dry_run = true })
end

return dry_run
