--- The options of the synchronization operations (synchronizeReplica,
-- createReplica), checked before anything is sent: a wrong type raises
-- (misuse), a bad value is refused naming the option. Internal.
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"

local options = {}

--- Checks `opts` against `types` (name -> Lua type). `where` names the
-- operation in a raised message; `data_format` is the request's dataFormat.
-- @return nil, or an error of kind "invalid"
-- @raise when opts is not a table or an option has the wrong type (at the operation's caller)
function options.check(where, opts, types, data_format)
  if type(opts) ~= "table" then error(where .. ": opts must be a table", 4) end
  for name, kind in pairs(types) do
    if opts[name] ~= nil and type(opts[name]) ~= kind then
      error(("%s: option '%s' must be a %s, got %s"):format(where, name, kind, type(opts[name])), 4)
    end
  end
  for _, name in ipairs{ "poll_interval", "timeout", "request_timeout", "lock_timeout" } do
    local v = types[name] and opts[name]
    if v and not (v > 0 and v < math.huge) then
      return errors.invalid(name, "must be a positive number of seconds")
    end
  end
  if data_format == "sqlite" and not opts.output then
    return errors.invalid("output", "is required with dataFormat = sqlite: a geodatabase is saved, not parsed")
  end
  if opts.output then
    -- the file must be writable before the server applies anything
    local probe, msg = core.make_temp(opts.output)
    if not probe then return errors.invalid("output", "must be a writable file path: " .. tostring(msg)) end
    os.remove(probe)
  end
  return nil
end

return options
