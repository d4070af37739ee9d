--- `geoservices emulator ...`: hands its arguments to the emulator's own
-- program (geoservices.emulator.main, in the geoservices-emulator rock).
local output = require "geoservices.cli.output"

local EXIT = output.EXIT

-- The emulator is its own program, shipped in its own rock so that the client
-- needs only libcurl. `--json` and `-v` given before `emulator` are passed on.
local EMULATOR_MODULES = { ["geoservices.emulator.main"] = true, ["geoservices.emulator"] = true,
                           ["geoservices.httpd"] = true }

return function(args, out)
  local ok, emulator_main = pcall(require, "geoservices.emulator.main")
  if not ok then
    local missing = tostring(emulator_main):match("module '([%w_.]+)' not found")
    if not EMULATOR_MODULES[missing] then error(emulator_main, 0) end
    out.stderr:write("geoservices: the emulator is a separate rock (", missing, " is not installed): "
      .. "luarocks install geoservices-emulator\n")
    return out:result(EXIT.usage, { command = "emulator" })
  end
  -- its usage errors end like every command's (with --json, an error event
  -- and the result event), so they are found here before it starts
  local parsed, usage_err = emulator_main.parser("geoservices emulator"):pparse(args.emulator_args)
  if not parsed then
    out.stderr:write(emulator_main.parser("geoservices emulator"):get_usage(), "\n\n")
    return output.usage_error(out, usage_err)
  end
  local list = {}
  if out.mode == "json" then list[#list + 1] = "--json" end
  for _ = 1, out.verbose do list[#list + 1] = "--verbose" end
  for _, a in ipairs(args.emulator_args) do list[#list + 1] = a end
  return emulator_main.main(list, { stdout = out.stdout, stderr = out.stderr, prog = "geoservices emulator" })
end

