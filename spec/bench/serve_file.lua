-- Serves one file over HTTP on 127.0.0.1 (a free port, printed) until killed,
-- through the emulator's HTTP layer: the benchmark's download source.
--   lua5.4 spec/bench/serve_file.lua FILE
local httpd = require "geoservices.httpd"
local path = assert(arg[1], "usage: serve_file.lua FILE")
local srv = assert(httpd.listen{ host = "127.0.0.1", port = 0 })
io.stdout:write("serving on http://127.0.0.1:", srv:port(), "/result.json\n")
io.stdout:flush()
while true do
  for _, ex in ipairs(srv:step(100)) do
    assert(ex:respond{ status = 200, headers = { ["Content-Type"] = "application/json" }, file = path })
  end
end
