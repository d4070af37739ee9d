--- The `geoservices` command line: the operations and the emulator for
-- scripts and people. The installed command is a launcher that runs
-- `os.exit(require("geoservices.cli").main(arg))`.
--
--     geoservices replica create Parcels --layers 0 --name crew-1 crew-1.gpkg
--     geoservices --json sync crew-1.gpkg
--     geoservices replicas Parcels
--
-- Output: on a terminal, a live line per replica redrawn on a timer (the
-- job's status and elapsed time, a download's bytes, rate and ETA, the
-- store's filling) and configure's stages; otherwise one line per event,
-- nothing on a timer; with `--json`, one JSON object per line on standard
-- output, each with an `event` member (`progress` at most once a second),
-- the last one `{"event": "result", "exit": N, ...}`. Exit codes are
-- @{EXIT}: 2 for every input error, found before anything is sent. An
-- error is followed by what to do next where one action fits
-- (geoservices.cli.hints); a mistake inside a subcommand prints that
-- subcommand's usage; every `--help` ends with examples.
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
-- a command to paste that follows it (never a secret nor a file gone with
-- the process: it says what to give again); in `--json` mode the last line
-- is still the `result` event. `--version`, `geoservices completion
-- bash|zsh|fish` (or `--completion`), colours on a terminal unless
-- `--no-color` or `NO_COLOR`.
-- @module geoservices.cli
local dry_run = require "geoservices.cli.dry_run"
local files = require "geoservices.cli.files"
local hints = require "geoservices.cli.hints"
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local output = require "geoservices.cli.output"
local parser_mod = require "geoservices.cli.parser"
local profile = require "geoservices.cli.profile"
local secrets = require "geoservices.cli.secrets"

local cli = {}

-- One file per subcommand: function(args, out, client, env) -> exit code
-- (nil after a dry run's refused request: main prints what was captured).
-- A command file may instead define its own grammar: it returns
-- `{help = "...", exits = "0 ..., 2 ...", examples = {"geoservices NAME ...", ...},
-- define = function(command) (argparse: add its arguments) end,
-- run = function(args, out, client, env, parser) -> exit code, client = false
-- (runs without a server: no client)}`; naming it here is all it takes
-- (geoservices.cli.parser builds its command from it). `parser` is the one
-- that read the command line (the completion command prints its script):
-- a command never requires this module back.
local commands = {
  services = require "geoservices.cli.commands.services",
  snapshots = require "geoservices.cli.commands.snapshots",
  status = require "geoservices.cli.commands.status",
  configure = require "geoservices.cli.commands.configure",
  sync = require "geoservices.cli.commands.sync",
  emulator = require "geoservices.cli.commands.emulator",
  login = require "geoservices.cli.commands.login",
  replica = require "geoservices.cli.commands.replica",
  replicas = require "geoservices.cli.commands.replicas",
  completion = require "geoservices.cli.commands.completion",
  pending = require("geoservices.cli.commands.store").pending,
  conflicts = require("geoservices.cli.commands.conflicts").conflicts,
  resolve = require("geoservices.cli.commands.conflicts").resolve,
  discard = require("geoservices.cli.commands.store").discard,
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

--- Builds the argument parser (lua-argparse).
-- @treturn table the parser; `parser:pparse(args)` parses without exiting
-- @raise never
function cli.parser()
  return parser_mod.new(commands)
end

-- main -------------------------------------------------------------------------

-- Kept for callers of the earlier names: see geoservices.cli.secrets.
cli.password_source = secrets.password_source
cli.token_option = secrets.token_option

local function truthy(v)
  return v == true or v == "true" or v == "yes" or v == "1"
end

local function make_client(args, env, prof, prof_name, url)
  if not url then return nil, "no server: give --url, set GEOSERVICES_URL or use a --profile" end
  local unreadable = files.check_readable(args.ca_file or prof.ca_file, "--ca-file")
  if unreadable then return nil, unreadable end
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
-- the same way (see geoservices.cli.hints.follow_words).
function cli.follow_prefix(args)
  return hints.follow_command(args)
end

-- Ctrl-C: one line naming what still runs on the server and how to follow
-- it; in --json mode an error event, then the result event, last.
local function interrupted(out, args)
  out:clear_live()
  local work = out.running
  local line
  -- what the pasted command needs that it cannot hold: a secret, a file gone with this process
  local again = work and (work.resupply or out.resupply)
  if work then
    line = ("interrupted; %s keeps running on the server: %s with `%s`%s"):format(work.what,
      work.verb or "follow it", work.follow, again and ("; " .. again) or "")
  else
    line = ("interrupted; %snothing was left running on the server"):format(out.complete and (out.complete .. "; ")
      or "")
  end
  if out.mode == "json" then
    out:emit{ event = "error", kind = "interrupted", message = line }
    out:emit{ event = "result", exit = EXIT.interrupted, ok = false, interrupted = true, command = args.command,
              running = work and work.what or nil, follow = work and work.follow or nil, resupply = again }
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

local function run_command(parsed, out, env, parser)
  local command = parsed.command
  if command == "emulator" then return commands.emulator(parsed, out) end
  local cmd = commands[command]
  if command == "status" and parsed.store then cmd = require("geoservices.cli.commands.store").status end
  if type(cmd) == "table" and cmd.client == false then return cmd.run(parsed, out, nil, env, parser) end
  local prof, prof_name = profile.select(parsed.profile, env.getenv)
  if not prof then return output.usage_error(out, prof_name) end
  local url, set_aside
  url, prof, set_aside = profile.effective(parsed, env.getenv, prof, prof_name, parsed.profile ~= nil)
  if set_aside and out.mode ~= "json" then env.stderr:write("geoservices: ", set_aside, "\n") end
  out.follow_prefix = cli.follow_prefix(parsed)
  out.follow_command = function(...) return hints.follow_command(parsed, ...) end
  out.resupply = select(2, hints.follow_words(parsed))
  -- what to do next after an error (geoservices.cli.hints): the addresses
  -- that answered tell a wrong base URL from a missing resource
  local ctx = { args = parsed, profile = prof, answered = {},
                base_url = url, terminal = env.stdin_tty }
  out.advise = function(err) return hints.advise(err, ctx) end
  if command == "login" then return commands.login(parsed, out, env, prof, prof_name, url) end
  local client, msg, generator = make_client(parsed, env, prof, prof_name, url)
  if not client then
    if type(msg) == "table" then return output.fail(out, msg, { command = command }) end
    return output.usage_error(out, msg)
  end
  ctx.base_url = client.url
  client:observe(function(event)
    if event.type == "response" and event.status and event.status < 400 then ctx.answered[event.url] = true end
    return nil
  end)
  if parsed.verbose > 0 and out.mode ~= "json" then
    out.stderr:write(tostring(client), "\n")
    -- each request as it ends: method, URL, status (or the failure), seconds; through the scrubbed stream
    client:observe(function(event)
      if event.type == "response" then
        out.stderr:write(("%s %s -> %s (%.2f s)\n"):format(event.method, event.url,
          event.status and tostring(event.status) or ("failed: " .. tostring(event.error)), event.seconds or 0))
      end
      return nil
    end)
  end
  local captured = parsed.dry_run and dry_run.attach(client)
  if captured and generator then captured[#captured + 1] = generator:describe() end
  local code = (type(cmd) == "table" and cmd.run or cmd)(parsed, out, client, env, parser)
  client:close()
  -- a dry run shows what would have been sent unless the command failed
  -- first (invalid input: its own exit code, never 0)
  if captured and (code == nil or (code == EXIT.ok and #captured > 0)) then
    return dry_run.finish(out, captured, command)
  end
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
  local ok, parsed, failed_in = parser_mod.parse(parser, list)
  if not ok then return usage_failure(env, json_mode, failed_in:get_usage(), parsed) end
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
  end, parsed, out, env, parser)
  if ran then return code end
  if is_interrupt(code) then return interrupted(out, parsed) end
  error(code, 0)
end

return cli
