-- One measurement in its own process (so peak RSS is its own):
--   lua5.4 spec/bench/parse_one.lua stream|cjson FILE
--   lua5.4 spec/bench/parse_one.lua download|download_only URL
-- Prints: method seconds bytes records peak_rss_kib
local common = require "spec.bench.common"
local core = require "geoservices.core"

local method, target = arg[1], arg[2]

local peak_rss_kib = common.peak_rss_kib

local walk = common.walk -- the same walk for every method

local records, bytes = 0, 0
local function on_record(kind, _, value)
  if kind == "add" or kind == "update" then
    records = records + 1
    walk(value)
  end
end

local t0 = core.monotonic()
if method == "stream" then
  local f = assert(io.open(target, "rb"))
  local rec = core.records()
  bytes = assert(rec:read_all(f, on_record)) -- the worker reads and parses, this thread builds the records
  f:close()
  assert(rec:finish())
  rec:drain(on_record)
elseif method == "cjson" then
  local cjson = require "cjson"
  local f = assert(io.open(target, "rb"))
  local text = f:read("a")
  f:close()
  bytes = #text
  local doc = cjson.decode(text)
  text = nil -- luacheck: ignore
  for _, layer in ipairs(doc.edits) do
    for _, list in ipairs{ layer.features.adds, layer.features.updates } do
      for _, record in ipairs(list) do
        records = records + 1
        walk(record)
      end
    end
  end
elseif method == "download" or method == "download_only" then
  local driver = core.driver()
  local rec = method == "download" and core.records() or nil
  local req = core.request{ url = target, records = rec, discard = rec == nil }
  driver:add(req)
  while req:state() == "running" do
    driver:step(100)
    if rec then req:drain(on_record) end
  end
  local res = assert(req:result())
  bytes = res.bytes
  if rec then
    assert(rec:finish())
    rec:drain(on_record)
  end
  req:close()
  driver:close()
else
  error("unknown method " .. tostring(method))
end
local seconds = core.monotonic() - t0
print(("%s %.6f %d %d %d"):format(method, seconds, bytes, records, peak_rss_kib()))
