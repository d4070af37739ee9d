--- What the replica store's modules (init, building, features, queue...)
-- share: the error of a SQLite failure, a list of statements run in order, the time stamp of a row, the one
-- spelling of a GlobalID, a layer's spec, the wait for another connection's
-- lock, a layer registered with the C core. Internal.
-- @module geoservices.store.shared
-- @local
local errors = require "geoservices.base.errors"

local shared = {}

--- The UTC time stamp written in the store's rows.
function shared.now() return os.date("!%Y-%m-%dT%H:%M:%SZ") end

--- The error of a failed SQLite call on the store at `path`: kind "busy"
-- (the lock wait ran out), "protocol" (a record the store cannot take), "io"
-- (anything else; `code` is SQLite's).
function shared.db_error(path, msg, code)
  if code == "busy" then
    return errors.new("busy", ("replica store %s is locked by another connection: %s"):format(path, msg),
      { code = code, path = path })
  elseif code == "data" then
    return errors.new("protocol", ("replica store %s: %s"):format(path, msg), { code = code, path = path })
  end
  if code == "cantopen" or code == "readonly" then -- why, in the system's words (issue 39)
    local f, why = io.open(path, "r+b")
    if f then
      f:close()
    elseif type(why) == "string" then
      local reason = why:find(path, 1, true) == 1 and why:sub(#path + 3) or why -- io.open's "PATH: reason"
      msg = ("%s (%s)"):format(msg, reason)
    end
  end
  return errors.new("io", ("replica store %s: %s"):format(path, msg), { code = code, path = path })
end

--- Runs the statements of `list` in order on `db`, up to the first that fails.
-- @param db the connection
-- @tparam {string,...} list SQL statements
-- @return true, or nil, msg, code (the failed statement's)
function shared.exec_all(db, list)
  for _, sql in ipairs(list) do
    local ok, m, c = db:exec(sql)
    if not ok then return nil, m, c end
  end
  return true
end

--- A word (a store's path) as the shell reads it back, for the commands
-- the messages advise: quoted when it holds anything the shell would split
-- or expand ("crew 1.gpkg" -> 'crew 1.gpkg').
function shared.shell_word(word)
  word = tostring(word)
  if word ~= "" and word:match("^[%w@%%+=:,./_-]+$") then return word end
  return "'" .. word:gsub("'", "'\\''") .. "'"
end

--- "{UPPERCASE}" of a GUID in any spelling (as the C core writes them);
-- anything else as it is.
function shared.normalize_gid(gid)
  local inner = gid:match("^{(.*)}$") or gid
  if #inner == 36 and inner:match("^%x+%-%x+%-%x+%-%x+%-%x+$") then return "{" .. inner:upper() .. "}" end
  return gid
end

--- The spec of a store's layer, or nil, err (kind "invalid") when the
-- store has no such layer. Raises (at the public method's caller) when the
-- id is not an integer.
function shared.layer_of(st, layer_id)
  if math.type(layer_id) ~= "integer" then error("store: layer id must be an integer", 3) end
  local spec = st.layers[layer_id]
  if not spec then return nil, errors.invalid("layer", ("layer %d is not in this store"):format(layer_id)) end
  return spec
end

local DEFAULT_BUSY_TIMEOUT = 5 -- seconds

--- The milliseconds a store waits for another connection's lock:
-- `opts.busy_timeout` seconds (default 5). Raises at the public function's
-- caller when it is not a number of seconds, 0 or more.
function shared.busy_ms(opts)
  local s = opts and opts.busy_timeout or DEFAULT_BUSY_TIMEOUT
  if type(s) ~= "number" or not (s >= 0 and s < math.huge) then -- NaN too
    error("store: busy_timeout must be a number of seconds, 0 or more", 3)
  end
  return math.floor(s * 1000 + 0.5)
end

--- Registers a layer spec with the C core (apply, put, get, remove): true, or nil, msg, code.
function shared.register_layer(db, spec)
  local ok, msg, code = db:layer{
    id = spec.id, table = spec.table, geometry_column = spec.geometry_column,
    geometry_kind = spec.geometry_kind, srs_id = spec.srs_id, columns = spec.columns,
    globalid = spec.globalid, oid = spec.oid,
  }
  if not ok then return nil, msg, code end
  return true
end

return shared
