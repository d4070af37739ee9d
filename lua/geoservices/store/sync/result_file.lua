--- Applying a synchronization result file to a replica store, chunk by
-- chunk through the C record extractor: memory stays flat whatever the
-- file's size. store.create_from and geoservices.store.sync use it.
-- @module geoservices.store.sync.result_file
-- @local
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"

local result_file = {}

local CHUNK = 1 << 20

--- Feeds a JSON result file to a records extractor chunk by chunk, applying
-- after each chunk: memory stays flat. `on_fill(bytes, total, records)`,
-- when given, follows it after each chunk (bytes of the file applied so far,
-- its size, records read so far: applied, or waiting for their layer's id);
-- its last call has bytes == total.
function result_file.apply(st, path, on_record, on_fill)
  local f, msg = io.open(path, "rb")
  if not f then return nil, errors.new("io", "cannot read the result file: " .. msg, { path = path }) end
  local size = f:seek("end")
  f:seek("set")
  local records = core.records()
  local total, bytes = 0, 0
  while true do
    -- read() takes the bytes from the file straight into the parser: no Lua string per chunk
    local got, m, offset = records:read(f, CHUNK)
    if not got then
      f:close()
      records:close()
      if not offset then return nil, errors.new("io", "result file " .. path .. ": " .. m, { path = path }) end
      return nil, errors.new("protocol", "result file " .. path .. ": " .. m, { offset = offset, path = path })
    end
    if got == 0 then break end
    local n, err = st:apply(records, on_record)
    if not n then
      f:close()
      records:close()
      return nil, err
    end
    total, bytes = total + n, bytes + got
    -- records read so far: applied, or waiting for their layer's id (a
    -- server may write it after the features): the count moves as the file does
    if on_fill and bytes < size then on_fill(bytes, size, total + st.db:waiting()) end
  end
  f:close()
  local ok, m, offset = records:finish()
  if not ok then
    records:close()
    return nil, errors.new("protocol", "result file " .. path .. ": " .. m, { offset = offset, path = path })
  end
  local n, err = st:apply(records, on_record)
  records:close()
  if not n then return nil, err end
  if on_fill then on_fill(size, size, total + n) end
  return total + n
end

return result_file
