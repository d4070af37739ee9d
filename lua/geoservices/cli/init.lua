--- The `geoservices` command line: the four operations and the emulator for
-- scripts and people. The installed command is a launcher that runs
-- `os.exit(require("geoservices.cli").main(arg))`.
--
--     geoservices --url http://127.0.0.1:8080/server --token-env TOKEN services ID...
--     geoservices sync crew-1.json --edits crew-1.edits.json --json
--
-- Output: on a terminal, live progress (a progress bar for downloads, a live
-- stage list for configure, a spinner with the job status for async syncs);
-- otherwise one line per event; with `--json`, one JSON object per line on
-- standard output, each with an `event` member, the last one
-- `{"event": "result", "exit": N, ...}`. Exit codes are @{EXIT}.
--
-- Secrets never come from the command line arguments except `--token`
-- (prefer `--token-env`): the configure password and security answer come
-- from environment variables or a prompt without echo, and `--dry-run`
-- prints the request with every secret as `<redacted>`.
-- @module geoservices.cli
local argparse = require "argparse"
local dry_run = require "geoservices.cli.dry_run"
local geoservices = require "geoservices"
local output = require "geoservices.cli.output"

local cli = {}

-- One file per subcommand: function(args, out, client, env) -> exit code
-- (nil after a dry run's refused request: main prints what was captured).
local commands = {
  services = require "geoservices.cli.commands.services",
  snapshots = require "geoservices.cli.commands.snapshots",
  status = require "geoservices.cli.commands.status",
  configure = require "geoservices.cli.commands.configure",
  sync = require "geoservices.cli.commands.sync",
  emulator = require "geoservices.cli.commands.emulator",
}

--- Exit codes of the command.
-- @table EXIT
-- @field ok 0: success
-- @field failed 1: the operation failed (network, server, authentication, job...)
-- @field usage 2: bad usage or invalid input (refused before anything was sent)
-- @field partial 3: the synchronization succeeded but some edits failed
cli.EXIT = output.EXIT
local EXIT = cli.EXIT

--- A progress bar of a download: `[#####.....] 52% 1.2 MiB, 3400 records`
-- when the total size is known, a moving marker otherwise.
-- @function progress_bar
-- @tparam number bytes bytes received so far
-- @tparam[opt] number total expected bytes, when known
-- @tparam[opt] integer records records parsed so far
-- @tparam[opt] integer tick a counter that moves the marker when the total is unknown
-- @tparam[opt] integer width of the bar in characters (20)
-- @tparam[opt] boolean with_total show the size too when it is known: `52% 1.2 MiB of 2.3 MiB`
-- @treturn string the bar
-- @raise never
cli.progress_bar = output.progress_bar

local EPILOG = [[
Environment: GEOSERVICES_URL (default of --url), GEOSERVICES_TOKEN (default token),
ORG_ADMIN_PASSWORD and ORG_ADMIN_ANSWER (configure; see --password-env, --answer-env).

Exit codes:
  0  success
  1  the operation failed (network, server, authentication, job failed)
  2  bad usage or invalid input (nothing was sent)
  3  partial: the synchronization succeeded but some edits failed]]

--- Builds the argument parser (lua-argparse).
-- @treturn table the parser; `parser:pparse(args)` parses without exiting
-- @raise never
function cli.parser()
  local p = argparse("geoservices", "Client of a GIS server's REST interface: synchronizeReplica, configure, "
    .. "getServicesById, notebooks/snapshots/list; and a local emulator of it.")
    :epilog(EPILOG)
  p:option("--url", "The server's {base_url}, e.g. https://host/server (default: $GEOSERVICES_URL).")
  p:option("--admin-path", "Administrative context path.", "admin")
  p:option("--token", "Token (visible to other local users through the process list: prefer --token-env).")
  p:option("--token-env", "Name of the environment variable holding the token.", "GEOSERVICES_TOKEN")
  p:option("--timeout", "Seconds per request.", "30"):convert(tonumber)
  p:option("--enum-prefix", "Vendor prefix of enumerated values (svcTransportTypeUrl...).", "svc")
  p:option("--ca-file", "PEM file of the certificate authority to trust.")
  p:flag("--insecure", "Skip TLS certificate verification (never by default).")
  p:flag("--json", "One JSON object per line on standard output, for scripts.")
  p:flag("--dry-run", "Validate and print the request that would be sent, secrets redacted; send nothing.")
  p:flag("-v --verbose", "More detail (repeatable)."):count("*")
  p:command_target("command")
  local function command(name, description)
    return p:command(name, description):epilog("Exit codes: 0 success, 1 failed, 2 bad usage or invalid input, "
      .. "3 partial (some edits failed); see geoservices --help.")
  end

  local sync = command("sync", "Synchronize one or more replicas from their state files (see geoservices.replica).")
  sync:argument("state", "Replica state file (JSON).", nil, nil, "+")
  sync:option("--edits", "Edits to upload, a JSON file (the 2.1 edits array); only with one state file.")
  sync:option("--direction", "syncDirection: download, upload, bidirectional or snapshot.")
    :choices{ "download", "upload", "bidirectional", "snapshot" }
  sync:option("--transport", "transportType: url or embedded.")
    :choices{ "url", "embedded" }
  sync:flag("--async", "Run as an asynchronous job and follow its status.")
  sync:option("--output", "Save the downloaded changes there: a file with one state file, else a directory "
    .. "(<state>.result.json). Default: <state>.changes-from-<generation>.json beside each state file.")
  sync:flag("--discard", "Count the downloaded changes and keep none of them (the generation still advances).")
  sync:flag("--resend", "The --edits were sent before by a sync that failed ambiguously: adds and deletes "
    .. "already applied are reported as such.")
  sync:option("--lock-timeout", "Seconds to wait while another process synchronizes the same replica."):convert(
    tonumber)
  sync:option("--poll-interval", "First seconds between job status polls.", "0.5"):convert(tonumber)
  sync:option("--wait-timeout", "Overall seconds to wait for an async job."):convert(tonumber)

  local conf = command("configure", "Create the organization and follow its stages until it is ready.")
  conf:argument("params", "Parameters: a JSON file, or a Lua file returning a table (relative paths "
    .. "in it are relative to the file).", nil, nil, "?")
  conf:option("--password-env", "Environment variable holding the administrator password "
    .. "(else a prompt without echo on a terminal).", "ORG_ADMIN_PASSWORD")
  conf:option("--answer-env", "Environment variable holding the security question answer.", "ORG_ADMIN_ANSWER")
  conf:flag("--no-wait", "Return once the server accepted the request.")
  conf:flag("--attach", "Do not send configure: follow a configuration already running.")
  conf:option("--poll-interval", "Seconds between polls of the root resource.", "5"):convert(tonumber)
  conf:option("--stall-after", "Fail when no stage progresses for this many seconds."):convert(tonumber)
  conf:option("--wait-timeout", "Overall seconds to wait.", "10800"):convert(tonumber)

  local services = command("services", "getServicesById: service definitions by id.")
  services:argument("id", "Service id.", nil, nil, "+")

  local snapshots = command("snapshots", "notebooks/snapshots/list: the snapshots of a notebook item.")
  snapshots:argument("item_id", "Notebook item id.")

  command("status", "The organization root resource: state and stages.")

  -- The emulator's options belong to its own program (geoservices.emulator.main,
  -- in the geoservices-emulator rock): everything after `emulator`, --help
  -- included, is handed to it unparsed.
  command("emulator", "Start the local emulator until interrupted (the geoservices-emulator rock); "
    .. "geoservices emulator --help lists its options.")
    :handle_options(false)
    :argument("emulator_args", "Options of the emulator.", nil, nil, "*")
  return p
end

-- main -------------------------------------------------------------------------

local function make_client(args, env)
  local url = args.url or env.getenv("GEOSERVICES_URL")
  if not url or url == "" then return nil, "no server: give --url or set GEOSERVICES_URL" end
  local token = args.token
  if not token and args.token_env and args.token_env ~= "" then token = env.getenv(args.token_env) end
  if token == "" then token = nil end
  local ok, client = pcall(geoservices.client, {
    url = url, admin_path = args.admin_path, token = token, timeout = args.timeout, enum_prefix = args.enum_prefix,
    ca_file = args.ca_file, insecure = args.insecure or nil,
  })
  if not ok then return nil, tostring(client):gsub("^[^:]*:%d+: ", "") end
  return client
end

local function default_env()
  local function tty(fd)
    local forced = os.getenv("GEOSERVICES_TTY")
    if forced == "1" then return true elseif forced == "0" then return false end
    return os.execute(("test -t %d"):format(fd)) == true
  end
  return { stdout = io.stdout, stderr = io.stderr, getenv = os.getenv, tty = tty(1), stdin_tty = tty(0) }
end

--- Runs the command.
-- @tparam table args the arguments (the global `arg` of the launcher, or a list of strings)
-- @tparam[opt] table env overrides for tests: `stdout`, `stderr` (files), `getenv` (function),
--   `tty`, `stdin_tty` (booleans); by default the process's own, and a terminal is detected
--   with `test -t` (the environment variable `GEOSERVICES_TTY=1` or `0` overrides it)
-- @treturn integer the exit code (@{EXIT}); `--help` prints the help and exits the process with 0
-- @raise never for bad input or failed operations (they are exit codes); a bug raises
function cli.main(args, env)
  local list = {}
  for i = 1, #(args or {}) do list[i] = args[i] end
  env = env or {}
  for k, v in pairs(default_env()) do
    if env[k] == nil then env[k] = v end
  end
  local parser = cli.parser()
  local ok, parsed = parser:pparse(list)
  if not ok then
    env.stderr:write(parser:get_usage(), "\n\ngeoservices: ", parsed, "\n")
    return EXIT.usage
  end
  local out = output.new(parsed, env)
  local command = parsed.command
  if command == "emulator" then return commands.emulator(parsed, out) end
  local client, msg = make_client(parsed, env)
  if not client then return output.usage_error(out, msg) end
  if parsed.verbose > 0 and out.mode ~= "json" then env.stderr:write(tostring(client), "\n") end
  local captured = parsed.dry_run and dry_run.attach(client)
  local code = commands[command](parsed, out, client, env)
  client:close()
  if captured and (#captured > 0 or code == nil) then return dry_run.finish(out, captured, command) end
  return code
end

return cli
