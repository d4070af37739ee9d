--- The emulator's files read whole: its world's data file, its state file
-- and journal, uploaded items, a spooled request body, the TLS certificate
-- and key it is given.
-- @module geoservices.emulator.disk
-- @local
local disk = {}

--- The bytes of the file at `path`.
-- @string path
-- @treturn[1] string the bytes
-- @return[2] nil
-- @treturn[2] string why it cannot be opened (io.open's message)
function disk.read(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local bytes = f:read("a")
  f:close()
  return bytes
end

return disk
