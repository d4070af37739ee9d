--- A copy of a store and its -wal in a writable folder, to read commits
-- that cannot be read where they are: a store on a read-only medium (or a
-- full disk) whose last commits are still in STORE-wal, without the
-- STORE-shm SQLite needs beside them (a store copied while open, or left by
-- a crash, without its -shm). SQLite's immutable open would read the main
-- file alone and miss those commits; the copy, opened as a store, takes
-- them in. The copy is in $TMPDIR (else /tmp) and removed by `remove`.
-- Internal.
-- @module geoservices.store.file.wal_copy
-- @local
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"

local wal_copy = {}

local CHUNK = 1 << 20

local function copy_file(from, to)
  local src, why = io.open(from, "rb")
  if not src then return nil, why end
  local dst
  dst, why = io.open(to, "wb")
  if not dst then
    src:close()
    return nil, why
  end
  local ok = true
  while ok do
    local block = src:read(CHUNK)
    if not block then break end
    ok, why = dst:write(block)
  end
  src:close()
  local closed, cwhy = dst:close()
  if ok and not closed then ok, why = nil, cwhy end
  if not ok then return nil, why end
  return true
end

--- Removes a copy made by @{make} (the file, its -wal and its -shm).
function wal_copy.remove(copy)
  for _, suffix in ipairs{ "", "-wal", "-shm" } do os.remove(copy .. suffix) end
end

--- Copies `path` and `path-wal` to a new name in $TMPDIR. Returns the
-- copy's path and a note for the user in words, or nil, err (kind "io",
-- the path and the cause: a full $TMPDIR...).
function wal_copy.make(path)
  local hex = core.random_bytes(8):gsub(".", function(c) return ("%02x"):format(c:byte()) end)
  local copy = ("%s/geoservices-read-%s.gpkg"):format(os.getenv("TMPDIR") or "/tmp", hex)
  local ok, why = copy_file(path, copy)
  if ok then ok, why = copy_file(path .. "-wal", copy .. "-wal") end
  if not ok then
    wal_copy.remove(copy)
    return nil, errors.new("io", ("replica store %s: its last commits are in %s-wal, which cannot be read where it "
      .. "is without %s-shm, and copying them to read failed: %s"):format(path, path, path, tostring(why)),
      { path = path, code = "wal" })
  end
  return copy, ("%s-wal holds the store's last commits and cannot be read in place without %s-shm "
    .. "(a read-only medium or a full disk): read from a copy in %s, removed after"):format(path, path,
    copy:match("^(.*)/") or ".")
end

return wal_copy
