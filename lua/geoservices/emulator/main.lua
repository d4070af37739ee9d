--- The emulator's one command line. The same program runs as
--
--     geoservices emulator [options]            (the client's command hands its arguments here)
--     geoservices-emulator [options]            (the command of the geoservices-emulator rock)
--     make emulator PORT=0 DATA=... ARGS=...
--     lua5.4 lua/geoservices/emulator/main.lua [options]
--
-- so every way of starting it takes the same options and prints the same
-- start-up line, "geoservices emulator listening on <url>" (with `--json`,
-- `{"event":"listening","url":...,"data":...}`), once it accepts connections.
-- It serves until interrupted (Ctrl-C) or terminated (SIGTERM), or until the
-- `--exit-with` process is gone.
-- @module geoservices.emulator.main
local argparse = require "argparse"
local core = require "geoservices.core"
local disk = require "geoservices.emulator.disk"
local emulator = require "geoservices.emulator"
local httpd = require "geoservices.httpd"
local json = require "geoservices.base.json"
local settings = require "geoservices.emulator.settings"

local M = {}

local EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
M.EXIT_INTERRUPTED = 130 -- 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
M.EXIT_TERMINATED = 143 -- 128 + SIGTERM

--- Parses a size: bytes, or a number with a K, M or G suffix (powers of 1024).
-- @string text the size as given
-- @treturn[1] integer the bytes
-- @return[2] nil
-- @treturn[2] string the message
function M.size(text)
  local n, unit = tostring(text):match("^(%d+)([KkMmGg]?)[Ii]?[Bb]?$")
  n = math.tointeger(tonumber(n))
  if not n then return nil, "a size in bytes, or with a K, M or G suffix, is expected" end
  local scale = ({ k = 1024, m = 1024 * 1024, g = 1024 * 1024 * 1024 })[unit:lower()] or 1
  return n * scale
end

--- The examples its `--help` ends with (each parsed by the emulator's spec).
M.EXAMPLES = {
  { "--port 8080", "the example world on http://127.0.0.1:8080/server until Ctrl-C" },
  { "--port 0 --json", "a free port, printed as {\"event\":\"listening\",\"url\":...}" },
  { "--port 8080 --data examples/data/world.json --state-file /tmp/emu.json", "replicas kept across restarts" },
  { "--port 8080 --supports-rollback-on-failure false --supports-per-replica-sync false",
    "a service as WildfireSync is: no rollback, per layer only" },
  { "--port 8080 --gateway 504 --gateway-delay-ms 2000", "a gateway that answers 504 while the server goes on" },
  { "--port 8080 --job-step-ms 50 --token-seconds 60", "fast async jobs, short-lived tokens" },
}

--- The examples as help text for `prog`.
function M.examples_text(prog)
  local lines = { "Examples:" }
  for _, e in ipairs(M.EXAMPLES) do
    lines[#lines + 1] = ("  %s %s\n      %s"):format(prog or "geoservices-emulator", e[1], e[2])
  end
  lines[#lines + 1] = "  at run time: curl -d '{\"rollback_default\": false}' http://127.0.0.1:8080/_emulator/settings"
  return table.concat(lines, "\n")
end

--- Builds the argument parser (lua-argparse).
-- @tparam[opt] string prog the program name shown in the usage ("geoservices-emulator")
-- @treturn table the parser; `-h/--help` is a plain flag (`main` prints the help and returns 0)
function M.parser(prog)
  local p = argparse(prog or "geoservices-emulator",
    "A local emulator of the GIS server's REST interface (synchronizeReplica, configure, getServicesById, "
    .. "notebooks/snapshots/list), serving until interrupted.")
    :add_help(false)
    :epilog("Exit codes: 0 stopped, 1 could not start (port in use, bad data file), 2 bad usage, "
      .. "130 interrupted (Ctrl-C), 143 terminated (SIGTERM).\n\n" .. M.examples_text(prog))
  p:flag("-h --help", "Show this help message and exit.")
  p:option("--port", "Port; 0 picks a free one (printed on start-up).", "0"):convert(math.tointeger)
  p:option("--host", "Address to bind.", "127.0.0.1")
  p:option("--data", "World data file (JSON or Lua); default: the example world.")
  p:option("--base-path", "Base path of the server's URL (http://HOST:PORT/server).", "/server")
  p:option("--configure-seconds", "Seconds each organization configuration stage takes.", "0.5")
    :convert(tonumber)
  p:option("--token-seconds", "Longest life of a token from generateToken, in seconds (short ones let tests "
    .. "watch a client refresh its token).", "3600"):convert(tonumber)
  p:option("--state-file", "Keep replicas, jobs and result files across restarts (saved after every change).")
  p:option("--tls-cert", "Serve HTTPS with this certificate (PEM file; with --tls-key).")
  p:option("--tls-key", "The private key of --tls-cert (PEM file).")
  p:option("--max-body", "Largest request body accepted, in bytes or with a K, M or G suffix; larger ones "
    .. "get 413. Bodies over 1 MiB are spooled to $TMPDIR, not kept in memory.", "1G"):convert(M.size)
  p:option("--exit-with", "Stop when the process with this PID is gone."):convert(math.tointeger)
  -- How the server answers where the interface leaves it open: the vendor's documented
  -- behaviour by default (emulator/settings.lua cites the source of each).
  local d = settings.DEFAULTS
  p:group("Server behaviour (defaults: as the vendor documents it)",
    p:option("--enum-prefix", ("Prefix of the enumerated values answered (esriTransportTypeUrl...); both "
      .. "prefixes, and none, are read in requests. Default: %s."):format(d.enum_prefix)),
    p:option("--default-transport", ("transportType when a request leaves it out, for synchronizeReplica and "
      .. "createReplica (async answers are always URL). Default: %s."):format(d.default_transport))
      :choices{ "url", "embedded" },
    p:option("--edit-results", ("Per-edit results in embedded answers (never in URL result files or NoEdits "
      .. "answers): all, failures (only the skipped edits) or none. Default: %s."):format(d.edit_results))
      :choices{ "all", "failures", "none" },
    p:option("--rollback-default", ("rollbackOnFailure when a request leaves it out: true (a failed edit "
      .. "undoes the request, an error names it) or false (failed edits skipped and reported). Default: %s.")
      :format(tostring(d.rollback_default))):choices{ "true", "false" },
    p:option("--supports-rollback-on-failure", ("syncCapabilities.supportsRollbackOnFailure; false: the "
      .. "parameter is ignored and the sync model decides. Default: %s.")
      :format(tostring(d.supports_rollback_on_failure))):choices{ "true", "false" },
    p:option("--rollback-names-edits", ("What a request rolled back for a failed edit answers: true (an error "
      .. "naming each failed edit) or false (only \"Operation rolled back.\", code 1003). Default: %s.")
      :format(tostring(d.rollback_names_edits))):choices{ "true", "false" },
    p:option("--field-lengths", ("true: a string longer than its field's length refuses that edit (code 1016), "
      .. "as a geodatabase column does. Default: %s."):format(tostring(d.field_lengths))):choices{ "true", "false" },
    p:option("--supports-per-replica-sync", "syncCapabilities.supportsPerReplicaSync of every service; false: "
      .. "createReplica refuses the perReplica model and syncs of such replicas are refused. Default: as the "
      .. "data file says (true)."):choices{ "true", "false" },
    p:option("--supports-per-layer-sync", "syncCapabilities.supportsPerLayerSync of every service, the same "
      .. "for the perLayer model. Default: as the data file says (true)."):choices{ "true", "false" },
    p:option("--supports-async", "syncCapabilities.supportsAsync of every service; false: async=true is "
      .. "refused. Default: as the data file says (true)."):choices{ "true", "false" },
    p:option("--supports-sync-direction-control", "syncCapabilities.supportsSyncDirectionControl; false: a "
      .. "direction other than the replica's is refused. Default: as the data file says (true).")
      :choices{ "true", "false" },
    p:option("--gateway", ("A gateway in front of the server: 504 (answers 504 Gateway Timeout at once) or "
      .. "drop (closes the connection), while the server applies the synchronizeReplica request "
      .. "--gateway-delay-ms later. Default: %s."):format(d.gateway)):choices{ "off", "504", "drop" },
    p:option("--gateway-delay-ms", ("How much later the server applies a request the gateway answered. "
      .. "Default: %d."):format(d.gateway_delay_ms)):convert(tonumber),
    p:option("--gateway-every", ("Every Nth synchronizeReplica request meets the gateway. Default: %d.")
      :format(d.gateway_every)):convert(math.tointeger),
    p:option("--result-lifetime", ("Seconds a result file lives unused before it is deleted (then 404). "
      .. "Default: %d."):format(d.result_lifetime_s)):convert(tonumber),
    p:option("--job-step-ms", ("Milliseconds each async job status lasts. Default: %d.")
      :format(d.job_step_ms)):convert(tonumber),
    p:option("--job-phase-ms", "Milliseconds of single job statuses, overriding --job-step-ms: "
      .. "NAME=MS[,NAME=MS...], e.g. ImportChanges=5000."),
    p:option("--layer-id-position", ("Where a createReplica result's layer entry writes its \"id\": before "
      .. "or after its features (JSON and the vendor leave it open). Default: %s."):format(d.layer_id_position))
      :choices{ "first", "last" }
  )
  p:flag("--json", 'Print the start-up line as JSON: {"event":"listening","url":...}.')
  p:flag("-v --verbose", "Log every request to standard error."):count("*")
  return p
end

-- The example world installed next to the emulator (the geoservices-emulator
-- rock and `make install-emulator` put it in geoservices/emulator/data/), else
-- the one of a source tree.
local function default_world()
  local init = package.searchpath("geoservices.emulator", package.path)
  if not init then return nil end
  local dir = init:match("^(.*)/[^/]*$") or "."
  for _, candidate in ipairs{ dir .. "/data/world.json", dir .. "/../../../examples/data/world.json" } do
    local f = io.open(candidate, "rb")
    if f then f:close(); return candidate end
  end
  return nil
end

local BEHAVIOUR_FLAGS = {
  enum_prefix = "enum_prefix", default_transport = "default_transport", edit_results = "edit_results",
  rollback_default = "rollback_default", supports_rollback_on_failure = "supports_rollback_on_failure",
  rollback_names_edits = "rollback_names_edits", field_lengths = "field_lengths",
  result_lifetime = "result_lifetime_s", job_step_ms = "job_step_ms", layer_id_position = "layer_id_position",
  supports_per_replica_sync = "supports_per_replica_sync", supports_per_layer_sync = "supports_per_layer_sync",
  supports_async = "supports_async", supports_sync_direction_control = "supports_sync_direction_control",
  gateway = "gateway", gateway_delay_ms = "gateway_delay_ms", gateway_every = "gateway_every",
}

--- The behaviour settings given on the command line (emulator.settings).
-- @tparam table opts the parsed arguments
-- @treturn[1] table setting name -> value (only those given)
-- @return[2] nil
-- @treturn[2] string the message
function M.behaviour(opts)
  local out = {}
  for flag, name in pairs(BEHAVIOUR_FLAGS) do
    if opts[flag] ~= nil then
      local v, err = settings.check(name, opts[flag])
      if err then return nil, "--" .. flag:gsub("_", "-") .. ": " .. err end
      out[name] = v
    end
  end
  if opts.job_phase_ms then
    local phases = {}
    for item in opts.job_phase_ms:gmatch("[^,]+") do
      local name, ms = item:match("^%s*([%a]+)%s*=%s*(%d+%.?%d*)%s*$")
      if not name then return nil, "--job-phase-ms: NAME=MS[,NAME=MS...] expected, not " .. item end
      phases[name] = tonumber(ms)
    end
    out.job_phase_ms = phases
  end
  return out
end

--- Runs the emulator until interrupted.
-- @tparam table args the arguments (the global `arg` of a script, or a list of strings)
-- @tparam[opt] table env `stdout`, `stderr` (files; the process's own by default) and
--   `prog` (the program name in the usage)
-- @treturn integer the exit code: 0 after `--help` or once `--exit-with`'s process is gone,
--   1 when it cannot start, 2 on bad usage
function M.main(args, env)
  env = env or {}
  local stdout, stderr = env.stdout or io.stdout, env.stderr or io.stderr
  local list = {}
  for i = 1, #(args or {}) do list[i] = args[i] end
  local prog = env.prog or "geoservices-emulator"
  local parser = M.parser(prog)
  local ok, opts = parser:pparse(list)
  if not ok then
    stderr:write(parser:get_usage(), "\n\n", prog, ": ", opts, "\n")
    return EXIT_USAGE
  end
  if opts.help then
    stdout:write(parser:get_help(), "\n")
    return EXIT_OK
  end

  local function failed(code, message)
    if opts.json then
      stdout:write(json.encode{ event = "error", kind = code == EXIT_USAGE and "invalid" or "emulator",
                                message = message }, "\n")
      stdout:write(json.encode{ event = "result", exit = code, ok = false }, "\n")
      stdout:flush()
    else
      stderr:write(prog, ": ", message, "\n")
    end
    return code
  end

  local data = opts.data or default_world()
  if not data then return failed(EXIT_USAGE, "no world data found; give --data FILE") end
  if (opts.tls_cert == nil) ~= (opts.tls_key == nil) then
    return failed(EXIT_USAGE, "--tls-cert and --tls-key go together")
  end
  local behaviour, behaviour_err = M.behaviour(opts)
  if not behaviour then return failed(EXIT_USAGE, behaviour_err) end
  local config = { port = opts.port, host = opts.host, data = data, base_path = opts.base_path,
                   configure_seconds = opts.configure_seconds, state_file = opts.state_file,
                   max_body = opts.max_body, token_seconds = opts.token_seconds, settings = behaviour }
  if opts.tls_cert then
    local err
    config.tls_cert, err = disk.read(opts.tls_cert)
    if not config.tls_cert then return failed(EXIT_USAGE, "cannot read " .. tostring(err)) end
    config.tls_key, err = disk.read(opts.tls_key)
    if not config.tls_key then return failed(EXIT_USAGE, "cannot read " .. tostring(err)) end
  end
  if opts.verbose > 0 then config.log = function(line) stderr:write(line, "\n") end end

  local emu, err = emulator.new(config)
  if not emu then return failed(EXIT_FAILED, tostring(err)) end
  if opts.json then
    stdout:write(json.encode{ event = "listening", url = emu:url(), data = data }, "\n")
  else
    stdout:write("geoservices emulator listening on ", emu:url(), "\n")
  end
  stdout:flush()

  -- With --exit-with, stop when that process is gone, so a crashed test run
  -- never leaves an emulator behind. Ctrl-C (the interpreter's "interrupted!"
  -- error) stops it with one line and exit code 130, like any interrupted
  -- command; SIGTERM (how scripts and service managers stop it) the same
  -- way with 143; either way it closes itself (its temporary result files
  -- go) and nothing keeps running.
  httpd.catch_terminate()
  local exit_with = opts.exit_with
  local next_check = core.monotonic() + 1
  local ran, stopped = pcall(emu.run, emu, function()
    if not exit_with or core.monotonic() < next_check then return false end
    next_check = core.monotonic() + 1
    local f = io.open("/proc/" .. exit_with .. "/stat")
    if f then f:close(); return false end
    return true
  end)
  emu:close()
  if not ran then
    local how = tostring(stopped):match("interrupted!$") and "interrupted"
      or tostring(stopped):match("terminated$") and "terminated"
    if not how then error(stopped, 0) end
    local code = how == "interrupted" and M.EXIT_INTERRUPTED or M.EXIT_TERMINATED
    if opts.json then
      stdout:write(json.encode{ event = "result", exit = code, ok = false, [how] = true }, "\n")
      stdout:flush()
    end
    stderr:write(prog, ": ", how, "; the emulator stopped (nothing keeps running)\n")
    return code
  end
  return EXIT_OK
end

-- Run as a script (`lua5.4 lua/geoservices/emulator/main.lua --port 0`), the
-- chunk's `...` are the command-line arguments; loaded by require, the first
-- is the module's name. So the one file is both the module and the program.
if (...) ~= "geoservices.emulator.main" then os.exit(M.main(arg)) end

return M
