--- A QGIS project archive (.qgz) as QGIS 3.22 keeps one in a GeoPackage's
-- `qgis_projects` table: a zip holding the project's .qgs (and, as QGIS
-- writes it, the .qgd of its auxiliary storage). Read to change a project a
-- user saved (geoservices.store.sync.server_schema: the fields the server
-- added get their aliases in it), written back with every other entry's
-- bytes as they were.
--
-- QGIS compresses its entries (deflate, RFC 1951): @{inflate} reads them
-- (plain Lua: the store has no zlib); the .qgs written back is stored
-- uncompressed, which QGIS reads as it reads the project geoservices
-- writes (geoservices.store.qgis.project).
-- @module geoservices.store.qgis.qgz
-- @local
local qgz = {}

-- ---- inflate (RFC 1951), after the structure of zlib's contrib/puff ----

local LEN_BASE = { 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
                   163, 195, 227, 258 }
local LEN_EXTRA = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0 }
local DIST_BASE = { 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049,
                    3073, 4097, 6145, 8193, 12289, 16385, 24577 }
local DIST_EXTRA = { 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13 }
local ORDER = { 16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15 }

local function bad(why) error({ inflate = why }, 0) end

-- A canonical Huffman code from its code lengths (lengths[0..n-1]):
-- counts by length and the symbols in code order.
local function huffman(lengths, n)
  local count, symbol, offs = {}, {}, { [1] = 0 }
  for len = 0, 15 do count[len] = 0 end
  for s = 0, n - 1 do count[lengths[s]] = count[lengths[s]] + 1 end
  for len = 1, 14 do offs[len + 1] = offs[len] + count[len] end
  for s = 0, n - 1 do
    local len = lengths[s]
    if len ~= 0 then
      symbol[offs[len]] = s
      offs[len] = offs[len] + 1
    end
  end
  return { count = count, symbol = symbol }
end

local FIXED_LIT, FIXED_DIST
do
  local l = {}
  for s = 0, 143 do l[s] = 8 end
  for s = 144, 255 do l[s] = 9 end
  for s = 256, 279 do l[s] = 7 end
  for s = 280, 287 do l[s] = 8 end
  FIXED_LIT = huffman(l, 288)
  local d = {}
  for s = 0, 29 do d[s] = 5 end
  FIXED_DIST = huffman(d, 30)
end

--- The bytes a raw deflate stream holds.
-- @string data the compressed bytes
-- @treturn[1] string the bytes
-- @return[2] nil
-- @treturn[2] string why they cannot be read
function qgz.inflate(data)
  local pos, buf, cnt = 1, 0, 0
  local out, n = {}, 0
  local function bits(need)
    while cnt < need do
      local b = data:byte(pos)
      if not b then bad("the compressed data ends early") end
      pos = pos + 1
      buf = buf | (b << cnt)
      cnt = cnt + 8
    end
    local v = buf & ((1 << need) - 1)
    buf, cnt = buf >> need, cnt - need
    return v
  end
  local function decode(h)
    local code, first, index = 0, 0, 0
    local count, symbol = h.count, h.symbol
    for len = 1, 15 do
      code = code | bits(1)
      local c = count[len]
      if code - c < first then return symbol[index + code - first] end
      index, first = index + c, (first + c) << 1
      code = code << 1
    end
    bad("a code that is not in the block's table")
  end
  local function codes(lit, dist)
    while true do
      local s = decode(lit)
      if s < 256 then
        n = n + 1
        out[n] = s
      elseif s == 256 then
        return
      else
        s = s - 257
        if s >= 29 then bad("a length code out of range") end
        local len = LEN_BASE[s + 1] + bits(LEN_EXTRA[s + 1])
        local d = decode(dist)
        if d >= 30 then bad("a distance code out of range") end
        local back = DIST_BASE[d + 1] + bits(DIST_EXTRA[d + 1])
        if back > n then bad("a distance before the start") end
        for _ = 1, len do
          n = n + 1
          out[n] = out[n - back]
        end
      end
    end
  end
  local ok, err = pcall(function()
    repeat
      local last = bits(1)
      local kind = bits(2)
      if kind == 0 then
        buf, cnt = 0, 0 -- to the byte boundary
        if pos + 3 > #data then bad("a stored block ends early") end
        local len, nlen = string.unpack("<I2I2", data, pos)
        if len ~= (~nlen & 0xFFFF) then bad("a stored block's length does not check") end
        pos = pos + 4
        if pos + len - 1 > #data then bad("a stored block ends early") end
        for i = pos, pos + len - 1 do
          n = n + 1
          out[n] = data:byte(i)
        end
        pos = pos + len
      elseif kind == 1 then
        codes(FIXED_LIT, FIXED_DIST)
      elseif kind == 2 then
        local nlen, ndist, ncode = bits(5) + 257, bits(5) + 1, bits(4) + 4
        if nlen > 286 or ndist > 30 then bad("too many codes") end
        local lengths = {}
        for i = 0, 18 do lengths[i] = 0 end
        for i = 1, ncode do lengths[ORDER[i]] = bits(3) end
        local lencode = huffman(lengths, 19)
        local l, i = {}, 0
        while i < nlen + ndist do
          local s = decode(lencode)
          if s < 16 then
            l[i] = s
            i = i + 1
          else
            local v, rep = 0
            if s == 16 then
              if i == 0 then bad("a repeat with no length before it") end
              v, rep = l[i - 1], 3 + bits(2)
            elseif s == 17 then
              rep = 3 + bits(3)
            else
              rep = 11 + bits(7)
            end
            if i + rep > nlen + ndist then bad("too many lengths") end
            for _ = 1, rep do
              l[i] = v
              i = i + 1
            end
          end
        end
        local lit, dist = {}, {}
        for k = 0, nlen - 1 do lit[k] = l[k] end
        for k = 0, ndist - 1 do dist[k] = l[nlen + k] end
        codes(huffman(lit, nlen), huffman(dist, ndist))
      else
        bad("a block of an unknown type")
      end
    until last == 1
  end)
  if not ok then
    if type(err) == "table" and err.inflate then return nil, err.inflate end
    error(err, 0)
  end
  local parts = {}
  for i = 1, n, 4096 do parts[#parts + 1] = string.char(table.unpack(out, i, math.min(n, i + 4095))) end
  return table.concat(parts)
end

-- ---- the zip archive ----

local CRC = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if c & 1 == 1 then c = 0xEDB88320 ~ (c >> 1) else c = c >> 1 end
  end
  CRC[i] = c
end

--- The CRC-32 of a text (ISO 3309, as zip keeps it).
function qgz.crc32(s)
  local c = 0xFFFFFFFF
  for i = 1, #s do c = CRC[(c ~ s:byte(i)) & 0xFF] ~ (c >> 8) end
  return c ~ 0xFFFFFFFF
end

--- The entries of a zip archive, in its order: `{name, method, crc, raw,
-- size, flags, time, date}` (`raw`: the bytes as the archive holds them).
-- @string zip the archive's bytes
-- @treturn[1] table the entries
-- @return[2] nil
-- @treturn[2] string why it cannot be read
function qgz.entries(zip)
  if #zip < 22 then return nil, "not a zip archive" end
  local eocd
  for i = #zip - 21, math.max(1, #zip - 65557), -1 do
    if zip:sub(i, i + 3) == "PK\5\6" then
      eocd = i
      break
    end
  end
  if not eocd then return nil, "not a zip archive (no end of its central directory)" end
  local count, _, cd = string.unpack("<I2I4I4", zip, eocd + 10)
  local out, p = {}, cd + 1
  for _ = 1, count do
    if zip:sub(p, p + 3) ~= "PK\1\2" then return nil, "a damaged central directory" end
    local flags, method, time, date, crc, csize, size, nlen, xlen, clen = string.unpack("<I2I2I2I2I4I4I4I2I2I2", zip,
      p + 8)
    local lho = string.unpack("<I4", zip, p + 42)
    local name = zip:sub(p + 46, p + 45 + nlen)
    if csize == 0xFFFFFFFF or lho == 0xFFFFFFFF then return nil, "a zip64 archive" end
    if zip:sub(lho + 1, lho + 4) ~= "PK\3\4" then return nil, "a damaged entry " .. name end
    local lnlen, lxlen = string.unpack("<I2I2", zip, lho + 27)
    local start = lho + 31 + lnlen + lxlen
    out[#out + 1] = { name = name, method = method, crc = crc, raw = zip:sub(start, start + csize - 1), size = size,
                      flags = flags & ~0x8, time = time, date = date }
    p = p + 46 + nlen + xlen + clen
  end
  return out
end

--- An entry's bytes (stored or deflated).
-- @treturn[1] string
-- @return[2] nil
-- @treturn[2] string why not
function qgz.content(entry)
  local data, why
  if entry.method == 0 then
    data = entry.raw
  elseif entry.method == 8 then
    data, why = qgz.inflate(entry.raw)
    if not data then return nil, ("%s: %s"):format(entry.name, why) end
  else
    return nil, ("%s: compressed by method %d"):format(entry.name, entry.method)
  end
  if #data ~= entry.size or qgz.crc32(data) ~= entry.crc then
    return nil, ("%s: its bytes do not check (size or CRC)"):format(entry.name)
  end
  return data
end

--- An entry holding `data` stored as it is.
function qgz.stored(name, data, like)
  return { name = name, method = 0, crc = qgz.crc32(data), raw = data, size = #data, flags = 0,
           time = like and like.time or 0, date = like and like.date or 0x21 }
end

--- The zip archive of the entries (each one's bytes as it holds them).
-- @treturn string
function qgz.zip(entries)
  local body, central = {}, {}
  local offset = 0
  for _, e in ipairs(entries) do
    local head = string.pack("<I4I2I2I2I2I2I4I4I4I2I2", 0x04034b50, 20, e.flags, e.method, e.time, e.date, e.crc,
      #e.raw, e.size, #e.name, 0) .. e.name
    body[#body + 1] = head .. e.raw
    central[#central + 1] = string.pack("<I4I2I2I2I2I2I2I4I4I4I2I2I2I2I2I4I4", 0x02014b50, 20, 20, e.flags, e.method,
      e.time, e.date, e.crc, #e.raw, e.size, #e.name, 0, 0, 0, 0, 0, offset) .. e.name
    offset = offset + #head + #e.raw
  end
  local cd = table.concat(central)
  return table.concat(body) .. cd .. string.pack("<I4I2I2I2I2I4I4I2", 0x06054b50, 0, 0, #entries, #entries, #cd,
    offset, 0)
end

return qgz
