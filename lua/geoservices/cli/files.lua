--- Local files the command reads, and path pieces.
local errors = require "geoservices.base.errors"

local files = {}

function files.read(path)
  local f, msg = io.open(path, "rb")
  if not f then return nil, errors.new("invalid", "cannot read " .. tostring(msg)) end
  local text = f:read("a")
  f:close()
  return text
end

--- A secret (a token, a password) from a file, or from standard input
-- when `path` is "-": its first line, without the line end. Never from the
-- command line itself.
-- @string path the file, or "-"
-- @string what what it holds ("token", "password"), for the message
-- @treturn[1] string the secret
-- @return[2] nil
-- @treturn[2] table err, kind "invalid"
function files.read_secret(path, what)
  local text
  if path == "-" then
    text = io.stdin:read("l")
    if not text then return nil, errors.new("invalid", ("no %s on standard input"):format(what)) end
  else
    local f, msg = io.open(path, "rb")
    if not f then return nil, errors.new("invalid", ("cannot read the %s file: %s"):format(what, tostring(msg))) end
    text = f:read("l") or ""
    f:close()
  end
  text = text:gsub("\r$", "")
  if text == "" then return nil, errors.new("invalid", ("the %s file %s is empty"):format(what, path)) end
  return text
end

--- An input error (kind "invalid") when `path` is given but cannot be read;
-- nil otherwise. `option` names where it was given ("--ca-file").
function files.check_readable(path, option)
  if path == nil then return nil end
  local f, msg = io.open(path, "rb")
  if not f then return errors.new("invalid", ("%s: cannot read %s"):format(option, tostring(msg))) end
  f:close()
  return nil
end

function files.dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

function files.basename(path)
  return path:match("([^/]+)$") or path
end

return files
