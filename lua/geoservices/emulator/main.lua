--- Command line of the emulator:
--   lua5.4 lua/geoservices/emulator/main.lua [--port N] [--data FILE] [--host 127.0.0.1]
--        [--base-path /server] [--configure-seconds S] [--exit-with PID] [--verbose]
--        [--state-file FILE] [--tls-cert PEM --tls-key PEM]
-- Prints "geoservices emulator listening on <url>" once ready.
local emulator = require "geoservices.emulator"

local function usage(msg)
  io.stderr:write(msg, "\n",
    "usage: main.lua [--port N] [--data FILE] [--host ADDR] [--base-path PATH] [--configure-seconds S]\n",
    "                [--exit-with PID] [--verbose] [--state-file FILE] [--tls-cert PEM --tls-key PEM]\n",
    "  --state-file FILE      keep replicas, jobs and result files across restarts (saved after every change)\n",
    "  --tls-cert/--tls-key   serve HTTPS with this certificate and private key (PEM files)\n",
    "  --configure-seconds S  seconds each organization configuration stage takes (default 0.5)\n")
  os.exit(2)
end

local opts = { port = 0, data = "examples/data/world.json" }
local exit_with, verbose
local i = 1
while i <= #arg do
  local a, v = arg[i], arg[i + 1]
  if a == "--port" then opts.port = tonumber(v) or usage("--port needs a number"); i = i + 1
  elseif a == "--data" then opts.data = v or usage("--data needs a file"); i = i + 1
  elseif a == "--host" then opts.host = v or usage("--host needs an address"); i = i + 1
  elseif a == "--base-path" then opts.base_path = v or usage("--base-path needs a path"); i = i + 1
  elseif a == "--configure-seconds" then
    opts.configure_seconds = tonumber(v) or usage("--configure-seconds needs a number"); i = i + 1
  elseif a == "--exit-with" then exit_with = v or usage("--exit-with needs a pid"); i = i + 1
  elseif a == "--state-file" then opts.state_file = v or usage("--state-file needs a file"); i = i + 1
  elseif a == "--tls-cert" then opts.tls_cert_file = v or usage("--tls-cert needs a PEM file"); i = i + 1
  elseif a == "--tls-key" then opts.tls_key_file = v or usage("--tls-key needs a PEM file"); i = i + 1
  elseif a == "--verbose" or a == "-v" then verbose = true
  elseif a == "--help" or a == "-h" then usage("geoservices emulator")
  else usage("unknown argument " .. a) end
  i = i + 1
end
local function read_pem(path)
  local f, err = io.open(path, "rb")
  if not f then usage("cannot read " .. tostring(err)) end
  local text = f:read("a")
  f:close()
  return text
end
if (opts.tls_cert_file == nil) ~= (opts.tls_key_file == nil) then usage("--tls-cert and --tls-key go together") end
if opts.tls_cert_file then
  opts.tls_cert, opts.tls_key = read_pem(opts.tls_cert_file), read_pem(opts.tls_key_file)
  opts.tls_cert_file, opts.tls_key_file = nil, nil
end
if verbose then opts.log = function(line) io.stderr:write(line, "\n") end end

local emu, err = emulator.new(opts)
if not emu then
  io.stderr:write("emulator: ", tostring(err), "\n")
  os.exit(1)
end
io.stdout:write("geoservices emulator listening on ", emu:url(), "\n")
io.stdout:flush()

-- With --exit-with, stop when that process is gone, so a crashed test run
-- never leaves an emulator behind.
local core = require "geoservices.core"
local next_check = core.monotonic() + 1
emu:run(function()
  if not exit_with or core.monotonic() < next_check then return false end
  next_check = core.monotonic() + 1
  local f = io.open("/proc/" .. exit_with .. "/stat")
  if f then f:close(); return false end
  return true
end)
emu:close()
