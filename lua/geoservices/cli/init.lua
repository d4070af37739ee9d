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
-- (prefer `--token-env` or `--token-file`): tokens and passwords come from
-- files or standard input (`--token-file -`, `--password-file -`), the
-- environment or a prompt without echo, and `--dry-run` prints the request
-- with every secret as `<redacted>`.
--
-- Named profiles (`--profile NAME`, see geoservices.cli.profile) hold the
-- address, admin path, CA file and how to get the token; `geoservices
-- login` stores a generated token for the profile. Ctrl-C ends the command
-- with exit code 130 and one line naming what still runs on the server and
-- how to follow it (in `--json` mode the last line is still the `result`
-- event). `--version`, `--completion bash|zsh|fish` (installed by `make
-- install`), colours on a terminal unless `--no-color` or `NO_COLOR`.
-- @module geoservices.cli
local argparse = require "argparse"
local dry_run = require "geoservices.cli.dry_run"
local files = require "geoservices.cli.files"
local geoservices = require "geoservices"
local json = require "geoservices.json"
local output = require "geoservices.cli.output"
local profile = require "geoservices.cli.profile"

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
  login = require "geoservices.cli.commands.login",
  replica = require "geoservices.cli.commands.replica",
}

--- Exit codes of the command.
-- @table EXIT
-- @field ok 0: success
-- @field failed 1: the operation failed (network, server, authentication, job...)
-- @field usage 2: bad usage or invalid input (refused before anything was sent)
-- @field partial 3: the synchronization succeeded but some edits failed; getServicesById did not
--   return every id asked for
-- @field interrupted 130: interrupted (Ctrl-C); what still runs on the server is named
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
GEOSERVICES_PROFILE (default of --profile), GEOSERVICES_PASSWORD (password of --username),
ORG_ADMIN_PASSWORD and ORG_ADMIN_ANSWER (configure; see --password-env, --answer-env),
NO_COLOR (no colours). Profiles: $XDG_CONFIG_HOME/geoservices/config (see geoservices login --help).

Exit codes (each command's --help lists its own):
  0  success
  1  the operation failed (network, server, authentication, job failed)
  2  bad usage or invalid input (nothing was sent)
  3  partial: the synchronization succeeded but some edits failed; services: some ids not returned
  130  interrupted (Ctrl-C); the line printed says what still runs on the server]]

-- Each command's own exit codes, shown by its --help.
local COMMAND_EXITS = {
  sync = "0 every replica synchronized, 1 a synchronization failed, 2 bad usage or an invalid state file, "
    .. "3 partial (some edits failed), 130 interrupted (a job or edits that may have reached the server: "
    .. "run the same sync again to follow them)",
  configure = "0 the organization is ready (or, with --no-wait, the request was accepted), 1 configuration "
    .. "failed (a stage failed, the deadline passed, the server refused), 2 bad usage or invalid parameters "
    .. "(nothing sent), 130 interrupted (the configuration keeps running: follow it with --attach)",
  services = "0 every id was returned, 1 the request failed, 2 bad usage, 3 some ids were not returned "
    .. "(they are named)",
  snapshots = "0 listed, 1 the request failed, 2 bad usage",
  status = "0 the state was read (ready, in progress or not configured), 1 the request failed or the "
    .. "organization's configuration failed, 2 bad usage",
  login = "0 the token was generated and stored, 1 generateToken refused (wrong password...) or the token "
    .. "could not be stored, 2 bad usage (no address, no username)",
  emulator = "0 stopped, 1 could not start, 2 bad usage, 130 interrupted (Ctrl-C; nothing keeps running)",
  replica = "0 done, 1 the request or the job failed, 2 bad usage, an invalid state file or a request the service "
    .. "cannot take (refused before anything was sent: a sync model or direction it does not support...), "
    .. "3 partial (the createReplica job ended CompletedWithErrors), 130 interrupted (a createReplica job keeps "
    .. "running: follow it with replica resume)",
}

--- Builds the argument parser (lua-argparse).
-- @treturn table the parser; `parser:pparse(args)` parses without exiting
-- @raise never
function cli.parser()
  local p = argparse("geoservices", "Client of a GIS server's REST interface: synchronizeReplica, configure, "
    .. "getServicesById, notebooks/snapshots/list; and a local emulator of it.")
    :epilog(EPILOG)
  p:option("--url", "The server's {base_url}, e.g. https://host/server (default: $GEOSERVICES_URL, "
    .. "then the profile's).")
  p:option("--profile", "Named profile of $XDG_CONFIG_HOME/geoservices/config (default: $GEOSERVICES_PROFILE, "
    .. "then [default] when there is one).")
  p:option("--admin-path", "Administrative context path (default: admin, or the profile's).")
  p:option("--token", "Token (visible to other local users through the process list: prefer --token-file).")
  p:option("--token-file", "File holding the token; - reads it from standard input.")
  p:option("--token-env", "Name of the environment variable holding the token.", "GEOSERVICES_TOKEN")
  p:option("--username", "Generate tokens with the server's generateToken as this user (password: "
    .. "--password-file, $GEOSERVICES_PASSWORD, or a prompt).")
  p:option("--password-file", "File holding the password of --username; - reads it from standard input.")
  p:option("--token-endpoint", "Where generateToken is: server ({url}/tokens/generateToken) or portal "
    .. "({url}/sharing/rest/generateToken).")
    :choices{ "server", "portal" }
  p:flag("--bearer", "Send the token in an Authorization: Bearer header instead of a form field.")
  p:option("--timeout", "Seconds per request (default: 30, or the profile's)."):convert(tonumber)
  p:option("--enum-prefix", "Vendor prefix of enumerated values (esriTransportTypeUrl...).", "esri")
  p:option("--ca-file", "PEM file of the certificate authority to trust.")
  p:flag("--insecure", "Skip TLS certificate verification (never by default).")
  p:flag("--json", "One JSON object per line on standard output, for scripts.")
  p:flag("--dry-run", "Validate and print the request that would be sent, secrets redacted; send nothing.")
  p:flag("--no-color", "No colours on a terminal (also when NO_COLOR is set).")
  p:flag("--version", "Print the version and exit.")
  p:flag("-v --verbose", "More detail (repeatable)."):count("*")
  p:add_complete()
  p:command_target("command")
  p:require_command(false) -- --version alone; main reports a missing command
  local function command(name, description)
    return p:command(name, description):epilog("Exit codes: " .. COMMAND_EXITS[name] .. ".")
  end

  local sync = command("sync", "Synchronize one or more replicas from their state files (see geoservices.replica).")
  sync:argument("state", "Replica state file (JSON) or replica store (.gpkg).", nil, nil, "+")
  sync:option("--edits", "Edits to upload, a JSON file (the edits array); only with one state file.")
  sync:option("--direction", "syncDirection: download, upload, bidirectional or snapshot.")
    :choices{ "download", "upload", "bidirectional", "snapshot" }
  sync:option("--transport", "transportType: url or embedded.")
    :choices{ "url", "embedded" }
  sync:flag("--async", "Run as an asynchronous job and follow its status.")
  sync:option("--output", "Save the downloaded changes there: a file with one state file, else a directory "
    .. "(<state>.result.json). Default: <state>.changes-from-<generation>.json beside each state file.")
  sync:flag("--discard", "Count the downloaded changes and keep none of them (the generation still advances).")
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

  local replica = command("replica", "A replica's lifecycle: create one (createReplica) into a state file that "
    .. "sync then synchronizes, read the server's view of it, unregister it.")
  replica:command_target("replica_command")
  local rcreate = replica:command("create", "createReplica: register a replica of some layers of a feature "
    .. "service and download its data (async by default, followed until done); the state goes to OUT, the data "
    .. "beside it (OUT without .json, plus .data.json).")
  rcreate:argument("service", "The feature service, e.g. Parcels.")
  rcreate:argument("out", "The new replica's state file (JSON; must not exist), or a replica store (OUT.gpkg: a "
    .. "GeoPackage holding the data, its generations and the local edits).")
  rcreate:option("--layers", "Layer ids, e.g. 0,1."):args(1):count(1)
  rcreate:option("--name", "replicaName.")
  rcreate:option("--model", "syncModel (default perReplica, or perLayer where the service supports only that).")
    :choices{ "perReplica", "perLayer" }
  rcreate:option("--direction", "syncDirection of the replica.")
    :choices{ "bidirectional", "upload", "download" }
  rcreate:option("--transport", "transportType: url (default) or embedded."):choices{ "url", "embedded" }
  rcreate:option("--geometry", "Extent filter: xmin,ymin,xmax,ymax (--geometry=-117.2,34.0,... when it starts "
    .. "with a minus), or a geometry's JSON.")
  rcreate:option("--in-sr", "The geometry's spatial reference: a wkid or its JSON.")
  rcreate:flag("--attachments", "returnAttachments: the attachments' metadata too.")
  rcreate:flag("--sync", "A synchronous request (real servers answer HTTP 500 to large ones).")
  rcreate:option("--param", "Another createReplica parameter, NAME=VALUE, sent as given (repeatable).")
    :count("*")
  rcreate:option("--poll-interval", "First seconds between job status polls.", "0.5"):convert(tonumber)
  rcreate:option("--wait-timeout", "Overall seconds to wait for the job."):convert(tonumber)
  local rresume = replica:command("resume", "Follow the createReplica job an interrupted create left (journaled "
    .. "beside OUT) and keep its replica in OUT.")
  rresume:argument("out", "The state file create was given.")
  rresume:option("--poll-interval", "First seconds between job status polls.", "0.5"):convert(tonumber)
  rresume:option("--wait-timeout", "Overall seconds to wait for the job."):convert(tonumber)
  replica:command("info", "The replica's resource on the server beside its local state."):argument("state",
    "Replica state file (JSON) or replica store (.gpkg).")
  replica:command("unregister", "unRegisterReplica: the server forgets the replica; the state file is marked "
    .. "closed."):argument("state", "Replica state file (JSON) or replica store (.gpkg).")
  replica:command("failed", "The local edits of a replica store the server rejected, with its code and "
    .. "description."):argument("state", "Replica store (.gpkg).")

  local login = command("login", "Generate a token with the server's generateToken (--username, "
    .. "--password-file or a prompt) and store it for the profile, readable only by you (0600), in "
    .. "$XDG_CONFIG_HOME/geoservices/tokens/<profile>.json; later commands of the profile use it until it expires.")
  login:option("--expiration", "Minutes the token is asked for.", "120"):convert(tonumber)

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

local function prompt_secret(env, label)
  if not env.stdin_tty then return nil end
  env.stderr:write(label, ": ")
  env.stderr:flush()
  os.execute("stty -echo 2>/dev/null")
  local ok, value = pcall(io.read, "l")
  os.execute("stty echo 2>/dev/null")
  env.stderr:write("\n")
  if ok and value ~= "" then return value end
  return nil
end

--- The password of --username (or of the profile's username): a password
-- file (- for standard input), $GEOSERVICES_PASSWORD, or a prompt without
-- echo on a terminal; read once, when a token is first needed, and kept in
-- this closure only.
function cli.password_source(args, prof, env, username)
  local cached
  return function()
    if cached then return cached end
    local path = args.password_file or prof.password_file
    if path then
      local value, err = files.read_secret(path, "password")
      if not value then error(err, 0) end
      cached = value
    else
      local value = env.getenv("GEOSERVICES_PASSWORD")
      if value == "" then value = nil end
      cached = value or prompt_secret(env, ("Password of %s"):format(username))
    end
    return cached
  end
end

--- How the command gets its token, first that applies: --token,
-- --token-file, --username (generateToken), the --token-env variable, the
-- profile's token_file, token_env or username, the token `login` stored.
-- Returns the client option (a string or a geoservices.token provider) or
-- nil, or nil and an error.
function cli.token_option(args, prof, prof_name, url, env)
  if args.token and args.token ~= "" then return args.token end
  if args.token_file then return files.read_secret(args.token_file, "token") end
  local function provider(username)
    local ok, made = pcall(geoservices.token, {
      url = url, username = username, password = cli.password_source(args, prof, env, username),
      endpoint = args.token_endpoint or prof.token_endpoint, token_url = prof.token_url,
    })
    if not ok then return nil, geoservices.errors.new("invalid", (tostring(made):gsub("^[^:]*:%d+: ", ""))) end
    return made
  end
  if args.username then return provider(args.username) end
  local from_env = args.token_env and args.token_env ~= "" and env.getenv(args.token_env) or nil
  if from_env and from_env ~= "" then return from_env end
  if prof.token_file then return files.read_secret(prof.token_file, "token") end
  if prof.token_env then
    local value = env.getenv(prof.token_env)
    if value and value ~= "" then return value end
  end
  if prof.username then return provider(prof.username) end
  return (profile.load_token(prof_name, url, env.getenv))
end

local function truthy(v)
  return v == true or v == "true" or v == "yes" or v == "1"
end

local function make_client(args, env, prof, prof_name)
  local url = args.url or env.getenv("GEOSERVICES_URL")
  if not url or url == "" then url = prof.url end
  if not url or url == "" then return nil, "no server: give --url, set GEOSERVICES_URL or use a --profile" end
  local token, token_err = cli.token_option(args, prof, prof_name, (url:gsub("/+$", "")), env)
  if token_err then return nil, token_err end
  local generator = type(token) == "table" and token or nil
  if generator and args.dry_run then
    token = "generated-at-run-time" -- a dry run sends nothing: generateToken is only shown
  end
  local ok, client = pcall(geoservices.client, {
    url = url, admin_path = args.admin_path or prof.admin_path, token = token, enum_prefix = args.enum_prefix,
    timeout = args.timeout or tonumber(prof.timeout), ca_file = args.ca_file or prof.ca_file,
    insecure = (args.insecure or truthy(prof.insecure)) or nil,
    bearer = (args.bearer or truthy(prof.bearer)) or nil,
    token_endpoint = args.token_endpoint or prof.token_endpoint,
  })
  if not ok then return nil, tostring(client):gsub("^[^:]*:%d+: ", "") end
  return client, nil, generator
end

local function default_env()
  local function tty(fd)
    local forced = os.getenv("GEOSERVICES_TTY")
    if forced == "1" then return true elseif forced == "0" then return false end
    return os.execute(("test -t %d"):format(fd)) == true
  end
  return { stdout = io.stdout, stderr = io.stderr, getenv = os.getenv, tty = tty(1), stdin_tty = tty(0),
           stderr_tty = tty(2) }
end

-- The start of a command that reaches the same server, profile and token
-- the same way (never a secret itself: a --token value is left out): what an
-- interrupted command prints for following what it left running.
function cli.follow_prefix(args)
  local parts = { "geoservices" }
  local function add(flag, value)
    if value ~= nil and value ~= false then parts[#parts + 1] = value == true and flag or (flag .. " " .. value) end
  end
  add("--profile", args.profile)
  add("--url", args.url)
  if args.admin_path and args.admin_path ~= "admin" then add("--admin-path", args.admin_path) end
  if args.token_env ~= "GEOSERVICES_TOKEN" then add("--token-env", args.token_env) end
  if args.token_file ~= "-" then add("--token-file", args.token_file) end
  add("--username", args.username)
  if args.password_file ~= "-" then add("--password-file", args.password_file) end
  add("--token-endpoint", args.token_endpoint)
  add("--bearer", args.bearer)
  add("--ca-file", args.ca_file)
  add("--insecure", args.insecure)
  return table.concat(parts, " ")
end

-- Ctrl-C: one line naming what still runs on the server and how to follow
-- it; in --json mode an error event, then the result event, last.
local function interrupted(out, args)
  out:clear_live()
  local work = out.running
  local line
  if work then
    line = ("interrupted; %s keeps running on the server: follow it with `%s`"):format(work.what, work.follow)
  else
    line = "interrupted; nothing was left running on the server"
  end
  if out.mode == "json" then
    out:emit{ event = "error", kind = "interrupted", message = line }
    out:emit{ event = "result", exit = EXIT.interrupted, ok = false, interrupted = true, command = args.command,
              running = work and work.what or nil, follow = work and work.follow or nil }
  end
  out.stderr:write(out:paint("geoservices:", "red", "stderr"), " ", line, "\n")
  out.stderr:flush()
  return EXIT.interrupted
end

local function is_interrupt(err)
  return tostring(err):match("interrupted!") ~= nil
end

-- Usage errors: the usage and the message on standard error; with --json
-- also an error event and the result event on standard output.
local function usage_failure(env, json_mode, usage, message)
  env.stderr:write(usage, "\n\ngeoservices: ", message, "\n")
  if json_mode then
    env.stdout:write(json.encode{ event = "error", kind = "invalid", message = message }, "\n")
    env.stdout:write(json.encode{ event = "result", exit = EXIT.usage, ok = false }, "\n")
    env.stdout:flush()
  end
  return EXIT.usage
end

local function run_command(parsed, out, env)
  local command = parsed.command
  if command == "emulator" then return commands.emulator(parsed, out) end
  local prof, prof_name = profile.select(parsed.profile, env.getenv)
  if not prof then return output.usage_error(out, prof_name) end
  out.follow_prefix = cli.follow_prefix(parsed)
  if command == "login" then return commands.login(parsed, out, env, prof, prof_name) end
  local client, msg, generator = make_client(parsed, env, prof, prof_name)
  if not client then
    if type(msg) == "table" then return output.fail(out, msg, { command = command }) end
    return output.usage_error(out, msg)
  end
  if parsed.verbose > 0 and out.mode ~= "json" then env.stderr:write(tostring(client), "\n") end
  local captured = parsed.dry_run and dry_run.attach(client)
  if captured and generator then captured[#captured + 1] = generator:describe() end
  local code = commands[command](parsed, out, client, env)
  client:close()
  if captured and (#captured > 0 or code == nil) then return dry_run.finish(out, captured, command) end
  return code
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
  local json_mode = false -- --json before the command's own arguments (the emulator's are its own)
  for _, a in ipairs(list) do
    if a == "emulator" then break end
    if a == "--json" then json_mode = true end
  end
  local parser = cli.parser()
  local ok, parsed = parser:pparse(list)
  if not ok then return usage_failure(env, json_mode, parser:get_usage(), parsed) end
  if parsed.version then
    env.stdout:write(("geoservices %s (lua-geoservices, %s, libcurl %s)\n"):format(geoservices.VERSION,
      _VERSION, tostring(require("geoservices.core").curl_version().version)))
    return EXIT.ok
  end
  if not parsed.command then return usage_failure(env, json_mode, parser:get_usage(), "a command is required") end
  local out = output.new(parsed, env)
  -- Ctrl-C raises "interrupted!" (the interpreter's signal handler) wherever
  -- the command is: it ends here, with the one line and exit code 130.
  local ran, code = xpcall(run_command, function(err)
    if is_interrupt(err) then return err end
    return debug.traceback(err, 2)
  end, parsed, out, env)
  if ran then return code end
  if is_interrupt(code) then return interrupted(out, parsed) end
  error(code, 0)
end

return cli
