--- Decoding of request bodies and query strings for the emulator.
local core = require "geoservices.core"

local forms = {}

--- Decodes an application/x-www-form-urlencoded text into a table; a
-- repeated name keeps its last value. Returns table or nil, err.
function forms.decode_urlencoded(text)
  local fields = {}
  for pair in text:gmatch("[^&]+") do
    local raw_name, raw_value = pair:match("^([^=]*)=?(.*)$")
    local name, value = core.urldecode(raw_name), core.urldecode(raw_value)
    if not name or not value then return nil, "malformed percent-escape in form field" end
    fields[name] = value
  end
  return fields
end

local function header_param(header, name)
  return header:match(';%s*' .. name .. '="([^"]*)"') or header:match(';%s*' .. name .. '=([^;%s]+)')
end

--- Decodes a multipart/form-data body. Returns fields (name -> value) and
-- files (name -> {filename =, type =, data =}), or nil, err.
function forms.decode_multipart(body, content_type)
  local boundary = content_type and header_param(content_type, "boundary")
  if not boundary then return nil, "multipart body without a boundary" end
  local delimiter = "--" .. boundary
  local fields, files = {}, {}
  local pos = body:find(delimiter, 1, true)
  if not pos then return nil, "multipart body without its first boundary" end
  pos = pos + #delimiter
  while true do
    if body:sub(pos, pos + 1) == "--" then return fields, files end -- closing delimiter
    if body:sub(pos, pos + 1) ~= "\r\n" then return nil, "malformed multipart boundary line" end
    local head_end = body:find("\r\n\r\n", pos + 2, true)
    if not head_end then return nil, "multipart part without a blank line after its headers" end
    local head = body:sub(pos + 2, head_end - 1)
    local next_pos = body:find("\r\n" .. delimiter, head_end + 4, true)
    if not next_pos then return nil, "truncated multipart body" end
    local data = body:sub(head_end + 4, next_pos - 1)
    local disposition = head:match("[Cc]ontent%-[Dd]isposition:([^\r\n]*)") or ""
    local name = header_param(disposition, "name")
    if not name then return nil, "multipart part without a name" end
    local filename = header_param(disposition, "filename")
    if filename then
      files[name] = { filename = filename, type = head:match("[Cc]ontent%-[Tt]ype:%s*([^\r\n]*)"), data = data }
    else
      fields[name] = data
    end
    pos = next_pos + 2 + #delimiter
  end
end

return forms
