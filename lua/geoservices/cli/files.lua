--- Local files the command reads, and path pieces.
local errors = require "geoservices.errors"

local files = {}

function files.read(path)
  local f, msg = io.open(path, "rb")
  if not f then return nil, errors.new("invalid", "cannot read " .. tostring(msg)) end
  local text = f:read("a")
  f:close()
  return text
end

function files.dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

function files.basename(path)
  return path:match("([^/]+)$") or path
end

return files
