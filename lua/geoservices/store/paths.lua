--- Files beside a store: whether one exists, and a new temporary name next
-- to the store (the store being built, a download, a sync's result), so a
-- rename into place never crosses a file system.
-- @module geoservices.store.paths
-- @local
local core = require "geoservices.core"

local paths = {}

--- True when `path` can be opened for reading.
function paths.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- `<path>.<tag>-<8 random hex digits><ext>`.
-- @string path the store's path
-- @string tag what the file is ("creating", "download", "sync")
-- @string[opt=""] ext its extension
function paths.beside(path, tag, ext)
  local hex = core.random_bytes(4):gsub(".", function(c) return ("%02x"):format(c:byte()) end)
  return ("%s.%s-%s%s"):format(path, tag, hex, ext or "")
end

return paths
