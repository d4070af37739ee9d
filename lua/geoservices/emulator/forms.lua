--- Decoding of request bodies and query strings for the emulator.
--
-- A body is a string (a small one, in memory) or a spooled file
-- `{path =, size =}` (the HTTP layer writes a body larger than its
-- spool_threshold to a temporary file). Both are read in chunks, so a large
-- body never becomes one Lua string: an urlencoded field is decoded in C
-- into one buffer, and a multipart file part larger than `part_threshold` is copied to
-- a file of its own (`tmpfile()`), which the caller removes (the emulator's
-- come from `exchange:tmpfile()` and go when the request ends).
--
-- The values decoded are counted: once a request's answer is out, the
-- emulator calls forms.release(), which runs a full collection after large
-- ones, so a 256 MiB field's memory goes back to the system when the
-- request ends, not whenever later allocations happen to run the collector
-- (an idle emulator makes almost none).
local core = require "geoservices.core"
local httpd = require "geoservices.httpd"

local forms = {}

local MALFORMED_ESCAPE = "malformed percent-escape in form field"

local CHUNK = 1024 * 1024           -- bytes read at a time from a source
local PART_THRESHOLD = 1024 * 1024  -- a larger file part goes to its own file
local MAX_PART_HEADERS = 64 * 1024

--- Bytes of decoded values after which forms.release() collects.
forms.RELEASE_AFTER = 4 * 1024 * 1024
local decoded_bytes = 0 -- of values handed out since the last release

local function counted(fields)
  for _, value in pairs(fields) do
    if type(value) == "string" then decoded_bytes = decoded_bytes + #value end
  end
  return fields
end

--- Returns the memory of the requests answered since the last call: a full
-- collection when their decoded values came to @{RELEASE_AFTER} bytes or
-- more (their tables are garbage once the answer is out). Returns whether it
-- collected.
function forms.release()
  if decoded_bytes < forms.RELEASE_AFTER then return false end
  decoded_bytes = 0
  collectgarbage("collect")
  return true
end

-- A reader of `source`: read(n) -> up to n bytes, or nil at the end; close().
local function open_source(source, chunk)
  if type(source) == "string" then
    local pos = 1
    return {
      read = function()
        if pos > #source then return nil end
        local piece = source:sub(pos, pos + chunk - 1)
        pos = pos + chunk
        return piece
      end,
      close = function() end,
    }
  end
  local f, err = io.open(source.path, "rb")
  if not f then return nil, "cannot read the request body: " .. tostring(err) end
  return {
    read = function() return f:read(chunk) end,
    close = function() f:close() end,
  }
end

--- Decodes an application/x-www-form-urlencoded body into a table; a
-- repeated name keeps its last value. The body is a string, or a spooled
-- file `{path =, size =}` decoded in C block by block
-- (httpd.decode_form_file: each value is built in one buffer and becomes a
-- Lua string once). `opts.chunk`: the block size for a file. Returns table
-- or nil, err.
function forms.decode_urlencoded(source, opts)
  if type(source) == "table" then
    local fields, err = httpd.decode_form_file(source.path, opts and opts.chunk)
    if not fields then
      if err ~= MALFORMED_ESCAPE then err = "cannot read the request body: " .. tostring(err) end
      return nil, err
    end
    return counted(fields)
  end
  local fields = {}
  for pair in source:gmatch("[^&]+") do
    local raw_name, raw_value = pair:match("^([^=]*)=?(.*)$")
    local name, value = core.urldecode(raw_name), core.urldecode(raw_value)
    if not name or not value then return nil, MALFORMED_ESCAPE end
    fields[name] = value
  end
  return counted(fields)
end

local function header_param(header, name)
  return header:match(';%s*' .. name .. '="([^"]*)"') or header:match(';%s*' .. name .. '=([^;%s]+)')
end

-- Where one part's bytes go: memory up to the threshold; past it, for a
-- file part, a file of its own.
local function new_sink(is_file, threshold, tmpfile)
  local sink = { pieces = {}, size = 0 }
  function sink.write(data)
    if data == "" then return true end
    sink.size = sink.size + #data
    if sink.file then
      local ok, err = sink.file:write(data)
      if not ok then return nil, err end
      return true
    end
    sink.pieces[#sink.pieces + 1] = data
    if is_file and sink.size > threshold then
      local path, err = tmpfile()
      if not path then return nil, err end
      local f, open_err = io.open(path, "wb")
      if not f then return nil, open_err end
      sink.path, sink.file = path, f
      for _, p in ipairs(sink.pieces) do
        local ok, write_err = f:write(p)
        if not ok then return nil, write_err end
      end
      sink.pieces = nil
    end
    return true
  end
  function sink.finish()
    if sink.file then
      local ok, err = sink.file:close()
      sink.file = nil
      if not ok then return nil, err end
      return { path = sink.path, size = sink.size }
    end
    return { data = table.concat(sink.pieces), size = sink.size }
  end
  function sink.abort()
    if sink.file then sink.file:close() end
    sink.file = nil
  end
  return sink
end

--- Decodes a multipart/form-data body (a string, or a spooled file
-- `{path =, size =}`). Returns fields (name -> value) and files (name ->
-- `{filename =, type =, size =, data =}`; a part larger than
-- `opts.part_threshold` (1 MiB) has `path` instead of `data`: a file from
-- `opts.tmpfile()` (default os.tmpname) holding its bytes), or nil, err.
-- `opts.chunk`: bytes read at a time.
function forms.decode_multipart(source, content_type, opts)
  opts = opts or {}
  local boundary = content_type and header_param(content_type, "boundary")
  if not boundary then return nil, "multipart body without a boundary" end
  local reader, open_err = open_source(source, opts.chunk or CHUNK)
  if not reader then return nil, open_err end
  local threshold = opts.part_threshold or PART_THRESHOLD
  local tmpfile = opts.tmpfile or function()
    local p = os.tmpname()
    return p
  end
  local delimiter = "--" .. boundary
  local separator = "\r\n" .. delimiter
  local buf, eof = "", false
  local function fill()
    if eof then return false end
    local chunk = reader.read()
    if not chunk then
      eof = true
      return false
    end
    buf = buf .. chunk
    return true
  end
  -- at least n bytes in buf, unless the body ends first
  local function need(n)
    while #buf < n do
      if not fill() then return false end
    end
    return true
  end
  local fields, files = {}, {}
  local sink
  local function fail(msg)
    if sink then sink.abort() end
    reader.close()
    return nil, msg
  end

  -- the first delimiter; anything before it is a preamble
  while true do
    local i = buf:find(delimiter, 1, true)
    if i then
      buf = buf:sub(i + #delimiter)
      break
    end
    if #buf >= #delimiter then buf = buf:sub(-(#delimiter - 1)) end
    if not fill() then return fail("multipart body without its first boundary") end
  end
  while true do
    need(2)
    local mark = buf:sub(1, 2)
    if mark == "--" then -- closing delimiter
      reader.close()
      for _, part in pairs(files) do
        if part.data then decoded_bytes = decoded_bytes + #part.data end
      end
      return counted(fields), files
    end
    if mark ~= "\r\n" then return fail("malformed multipart boundary line") end
    -- the part's headers, up to a blank line
    local head_end
    while true do
      head_end = buf:find("\r\n\r\n", 1, true)
      if head_end then break end
      if #buf > MAX_PART_HEADERS then return fail("multipart part headers too long") end
      if not fill() then return fail("multipart part without a blank line after its headers") end
    end
    local head = buf:sub(3, head_end - 1)
    buf = buf:sub(head_end + 4)
    local disposition = head:match("[Cc]ontent%-[Dd]isposition:([^\r\n]*)") or ""
    local name = header_param(disposition, "name")
    local filename = header_param(disposition, "filename")
    sink = new_sink(filename ~= nil, threshold, tmpfile)
    -- the part's bytes, up to the next "\r\n--boundary"
    while true do
      local i = buf:find(separator, 1, true)
      if i then
        local ok, err = sink.write(buf:sub(1, i - 1))
        if not ok then return fail("cannot store a file part: " .. tostring(err)) end
        buf = buf:sub(i + #separator)
        break
      end
      local keep = #separator - 1
      if #buf > keep then
        local ok, err = sink.write(buf:sub(1, #buf - keep))
        if not ok then return fail("cannot store a file part: " .. tostring(err)) end
        buf = buf:sub(#buf - keep + 1)
      end
      if not fill() then return fail("truncated multipart body") end
    end
    local part, err = sink.finish()
    sink = nil
    if not part then return fail("cannot store a file part: " .. tostring(err)) end
    if not name then
      if part.path then os.remove(part.path) end
      return fail("multipart part without a name")
    end
    if filename then
      part.filename, part.type = filename, head:match("[Cc]ontent%-[Tt]ype:%s*([^\r\n]*)")
      files[name] = part
    else
      fields[name] = part.data
    end
  end
end

return forms
