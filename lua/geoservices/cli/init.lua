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
local core = require "geoservices.core"
local geoservices = require "geoservices"
local configure_mod = require "geoservices.configure"
local errors = require "geoservices.errors"
local json = require "geoservices.json"
local organization = require "geoservices.configure.organization"
local params_mod = require "geoservices.form"
local pp = require "geoservices.pp"

local cli = {}

--- Exit codes of the command.
-- @table EXIT
-- @field ok 0: success
-- @field failed 1: the operation failed (network, server, authentication, job...)
-- @field usage 2: bad usage or invalid input (refused before anything was sent)
-- @field partial 3: the synchronization succeeded but some edits failed
cli.EXIT = { ok = 0, failed = 1, usage = 2, partial = 3 }
local EXIT = cli.EXIT

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
    .. "(<state>.result.json). Without it they are only counted.")
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

  local emu = command("emulator", "Start the local emulator (until interrupted).")
  emu:option("--port", "Port; 0 picks a free one.", "0"):convert(tonumber)
  emu:option("--host", "Address to bind.", "127.0.0.1")
  emu:option("--data", "World data file (JSON or Lua); default: the example world.")
  emu:option("--base-path", "Base path of the {base_url}.", "/server")
  emu:option("--configure-seconds", "Seconds each configuration stage takes.", "0.5"):convert(tonumber)
  return p
end

-- Output ------------------------------------------------------------------

-- The "error" a dry run's replaced post returns once it captured the request.
local DRY_RUN = setmetatable({ kind = "dry_run", message = "dry run: nothing sent" },
  { __tostring = function(e) return e.message end })

local Out = {}
Out.__index = Out

local function new_out(args, env)
  local mode = args.json and "json" or (env.tty and "tty" or "lines")
  return setmetatable({ mode = mode, stdout = env.stdout, stderr = env.stderr, verbose = args.verbose or 0,
                        live_shown = false }, Out)
end

function Out:emit(event)
  self.stdout:write(json.encode(event), "\n")
  self.stdout:flush()
end

function Out:line(text)
  self:clear_live()
  self.stdout:write(text, "\n")
  self.stdout:flush()
end

-- One line redrawn in place (terminal only).
function Out:live(text)
  self.stdout:write("\r\27[2K", text)
  self.stdout:flush()
  self.live_shown = true
end

function Out:clear_live()
  if self.live_shown then
    self.stdout:write("\r\27[2K")
    self.live_shown = false
  end
end

local function error_fields(err)
  if type(err) ~= "table" then return { kind = "failed", message = tostring(err) } end
  return { kind = err.kind, message = err.message, code = err.code, parameter = err.parameter,
           status = err.status, url = err.url }
end

-- Reports an error: a JSON event, or a line on standard error.
function Out:error(err, extra)
  if self.mode == "json" then
    local ev = error_fields(err)
    ev.event = "error"
    for k, v in pairs(extra or {}) do ev[k] = v end
    self:emit(ev)
  else
    self:clear_live()
    local where = extra and extra.replica and (extra.replica .. ": ") or ""
    self.stderr:write("geoservices: ", where, tostring(err), "\n")
    self.stderr:flush()
  end
end

function Out:result(code, fields)
  if self.mode == "json" then
    local ev = { event = "result", exit = code, ok = code == EXIT.ok }
    for k, v in pairs(fields or {}) do ev[k] = v end
    self:emit(ev)
  end
  return code
end

local function exit_for(err)
  if type(err) == "table" and err.kind == "invalid" then return EXIT.usage end
  return EXIT.failed
end

-- Reports a failure and returns its exit code; a dry run's captured request
-- is not a failure (nil: main prints the request).
local function fail(out, err, extra)
  if err == DRY_RUN then return nil end
  out:error(err, extra)
  return out:result(exit_for(err), { command = extra and extra.command })
end

local function usage_error(out, message)
  return fail(out, errors.new("invalid", message))
end

-- Dry run ------------------------------------------------------------------

-- What the client would have sent: the client's post and download are
-- replaced on this client object only, so the library validates everything
-- and builds the request exactly as usual, and nothing reaches the network.

local function install_dry_run(client, captured)
  client.post = function(self, url, fields, opts)
    opts = opts or {}
    local form = params_mod.to_form(configure_mod.redact(fields))
    local shown = {}
    for i, pair in ipairs(form) do shown[i] = { pair[1], params_mod.text(pair[2]) } end
    if self.has_token then shown[#shown + 1] = { "token", "<redacted>" } end
    local files = {}
    for _, f in ipairs(opts.files or {}) do
      local source = f.file and ("streamed from " .. f.file) or (#(f.data or "") .. " bytes in memory")
      files[#files + 1] = { name = f.name, filename = f.filename, source = source }
    end
    captured[#captured + 1] = { method = "POST", url = url, fields = shown, files = files,
                                content_type = opts.multipart and "multipart/form-data"
                                  or "application/x-www-form-urlencoded" }
    return nil, DRY_RUN, { attempts = 0, ambiguous = false }
  end
  client.download = function(_, url)
    captured[#captured + 1] = { method = "GET", url = url, fields = {}, files = {} }
    return nil, DRY_RUN, { attempts = 0, ambiguous = false }
  end
end

local function show_request(out, req)
  if out.mode == "json" then
    local fields = {}
    for _, pair in ipairs(req.fields) do fields[pair[1]] = pair[2] end
    out:emit{ event = "request", dry_run = true, method = req.method, url = req.url,
              content_type = req.content_type, fields = json.object(fields), files = json.array(req.files) }
    return
  end
  out:line(("%s %s (%s)"):format(req.method, req.url, req.content_type or "no body"))
  for _, pair in ipairs(req.fields) do
    local value = pair[2]:gsub("\n", "\\n")
    if #value > 160 and out.verbose == 0 then
      value = value:sub(1, 120) .. ("... (%d bytes; -v shows all)"):format(#value)
    end
    out:line(("  %s = %s"):format(pair[1], value))
  end
  for _, f in ipairs(req.files) do out:line(("  %s = file %s (%s)"):format(f.name, f.filename, f.source)) end
end

local function finish_dry_run(out, captured, command)
  if out.mode ~= "json" then out:line("dry run: nothing was sent; the request would be:") end
  for _, req in ipairs(captured) do show_request(out, req) end
  return out:result(EXIT.ok, { command = command, dry_run = true })
end

-- Shared helpers -------------------------------------------------------------

local function read_file(path)
  local f, msg = io.open(path, "rb")
  if not f then return nil, errors.new("invalid", "cannot read " .. tostring(msg)) end
  local text = f:read("a")
  f:close()
  return text
end

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

local function basename(path)
  return path:match("([^/]+)$") or path
end

local function make_client(args, env)
  local url = args.url or env.getenv("GEOSERVICES_URL")
  if not url or url == "" then return nil, "no server: give --url or set GEOSERVICES_URL" end
  local token = args.token
  if not token and args.token_env and args.token_env ~= "" then token = env.getenv(args.token_env) end
  if token == "" then token = nil end
  local ok, client = pcall(geoservices.client, {
    url = url, admin_path = args.admin_path, token = token, timeout = args.timeout,
    ca_file = args.ca_file, insecure = args.insecure or nil,
  })
  if not ok then return nil, tostring(client):gsub("^[^:]*:%d+: ", "") end
  return client
end

local SPINNER = { "|", "/", "-", "\\" }

local function human_bytes(n)
  if n < 1024 then return ("%d B"):format(n) end
  if n < 1024 * 1024 then return ("%.1f KiB"):format(n / 1024) end
  return ("%.1f MiB"):format(n / (1024 * 1024))
end

--- A progress bar of a download: `[#####.....] 52% 1.2 MiB, 3400 records`
-- when the total size is known, a moving marker otherwise.
-- @tparam number bytes bytes received so far
-- @tparam[opt] number total expected bytes, when known
-- @tparam[opt] integer records records parsed so far
-- @tparam[opt] integer tick a counter that moves the marker when the total is unknown
-- @tparam[opt] integer width of the bar in characters (20)
-- @tparam[opt] boolean with_total show the size too when it is known: `52% 1.2 MiB of 2.3 MiB`
-- @treturn string the bar
-- @raise never
function cli.progress_bar(bytes, total, records, tick, width, with_total)
  width = width or 20
  local bar
  if total and total > 0 then
    local filled = math.min(width, math.floor(width * bytes / total + 0.5))
    bar = ("[%s%s] %3d%%"):format(("#"):rep(filled), ("."):rep(width - filled), math.floor(100 * bytes / total))
  else
    local pos = (tick or 0) % width
    bar = ("[%s<=>%s]"):format((" "):rep(pos), (" "):rep(width - pos))
  end
  local text = ("%s %s"):format(bar, human_bytes(bytes))
  if with_total and total and total > 0 then text = text .. " of " .. human_bytes(total) end
  if records then text = text .. (", %d records"):format(records) end
  return text
end

-- Commands -------------------------------------------------------------------

local commands = {}

function commands.services(args, out, client)
  local list, err = client:get_services_by_id(args.id)
  if not list then return fail(out, err, { command = "services" }) end
  if out.mode == "json" then
    for _, s in ipairs(list) do out:emit{ event = "service", service = s } end
  else
    out:line(tostring(list))
    for _, s in ipairs(list) do
      out:line("  " .. tostring(s))
      if out.verbose > 0 then out:line(pp.format(s, { max_depth = out.verbose + 1 })) end
    end
  end
  return out:result(EXIT.ok, { command = "services", count = #list })
end

local function ms_date(ms)
  ms = math.tointeger(tonumber(ms))
  if not ms then return "?" end
  return os.date("!%Y-%m-%d %H:%M", ms // 1000)
end

function commands.snapshots(args, out, client)
  local list, err = client:list_snapshots(args.item_id)
  if not list then return fail(out, err, { command = "snapshots" }) end
  local snaps = list.snapshots or {}
  if out.mode == "json" then
    for _, s in ipairs(snaps) do out:emit{ event = "snapshot", item = args.item_id, snapshot = s } end
  else
    out:line(tostring(list))
    for _, s in ipairs(snaps) do
      local props = type(s.properties) == "table" and s.properties or {}
      out:line(("  %-24s %-36s %s%s"):format(tostring(props.name or "?"), tostring(s.resourceKey or "?"),
        ms_date(s.created), props.private == true and " private" or ""))
      if out.verbose > 0 then out:line(pp.format(s)) end
    end
  end
  return out:result(EXIT.ok, { command = "snapshots", count = #snaps, total = list.total })
end

local MARK = { not_started = " ", in_progress = ">", completed = "x", not_applicable = "-" }

local function stage_line(stage)
  local state = type(stage.state) == "string" and stage.state:lower() or "?"
  return ("  [%s] %-32s %s"):format(MARK[state] or "!", tostring(stage.name), tostring(stage.state))
end

function commands.status(_, out, client)
  local root, err = client:configure_status()
  if not root then return fail(out, err, { command = "status" }) end
  local state = organization.state(root)
  if out.mode == "json" then
    out:emit{ event = "status", state = state, summary = tostring(root), root = root }
  else
    out:line(tostring(root))
    for _, stage in ipairs(organization.stages(root)) do out:line(stage_line(stage)) end
  end
  return out:result(EXIT.ok, { command = "status", state = state })
end

-- configure -----------------------------------------------------------------

local function load_params(path)
  local params
  if path:match("%.lua$") then
    local env = setmetatable({ geoservices = geoservices }, { __index = _G })
    local chunk, msg = loadfile(path, "t", env)
    if not chunk then return nil, errors.new("invalid", "parameters file: " .. msg) end
    local ok, value = pcall(chunk)
    if not ok then return nil, errors.new("invalid", "parameters file: " .. tostring(value)) end
    params = value
  else
    local text, err = read_file(path)
    if not text then return nil, err end
    local decoded, msg, offset = json.decode(text)
    if decoded == nil then
      return nil, errors.new("invalid", ("parameters file %s: invalid JSON at byte %s: %s"):format(
        path, tostring(offset), tostring(msg)))
    end
    params = decoded
  end
  if type(params) ~= "table" then
    return nil, errors.new("invalid", "parameters file " .. path .. " must give a table of parameters")
  end
  if type(params.licenseFile) == "string" and params.licenseFile:sub(1, 1) ~= "/" then
    params.licenseFile = dirname(path) .. "/" .. params.licenseFile
  end
  return params
end

local function prompt_secret(env, label)
  if not env.stdin_tty then return nil end
  env.stderr:write(label, ": ")
  env.stderr:flush()
  os.execute("stty -echo 2>/dev/null")
  local ok, value = pcall(io.read, "l")
  os.execute("stty echo 2>/dev/null")
  env.stderr:write("\n")
  if ok then return value end
  return nil
end

-- password and securityQuestionAns: the file, else the environment, else a
-- prompt without echo; never the command line.
local function fill_secret(params, name, env_name, label, env)
  if params[name] ~= nil then return true end
  local value = env_name and env_name ~= "" and env.getenv(env_name) or nil
  if value == nil or value == "" then value = prompt_secret(env, label) end
  if value == nil or value == "" then
    return nil, errors.invalid(name, ("set $%s, or run on a terminal to be asked"):format(tostring(env_name)))
  end
  params[name] = value
  return true
end

-- The end of a configure that was followed to the end (sent or re-attached).
local function configure_done(out, final, wait_err)
  if not final then return fail(out, wait_err, { command = "configure" }) end
  if out.mode ~= "json" then out:line(tostring(final)) end
  return out:result(EXIT.ok, { command = "configure", state = "ready", summary = tostring(final) })
end

-- Stage changes as they are reported: JSON events, one line each, or (on a
-- terminal) the list of stages redrawn in place. `root` is the resource read
-- before waiting; the list is kept up to date from the reported stages.
local function configure_progress(out, root)
  if out.mode == "json" then
    return function(stage, old)
      out:emit{ event = "stage", name = stage.name, from = old, to = stage.state }
    end
  elseif out.mode == "lines" then
    local started = core.monotonic()
    return function(stage, old)
      out:line(("+%4.0fs  %-32s %s -> %s"):format(core.monotonic() - started, stage.name, tostring(old),
        tostring(stage.state)))
    end
  end
  local stages, index = {}, {}
  for i, stage in ipairs(organization.stages(root)) do
    stages[i] = { name = stage.name, state = stage.state }
    index[organization.key(stage.name)] = stages[i]
  end
  local drawn = 0
  local function draw()
    local lines, done, total = {}, 0, 0
    if drawn > 0 then lines[1] = ("\27[%dA"):format(drawn) end
    for _, stage in ipairs(stages) do
      lines[#lines + 1] = "\27[2K" .. stage_line(stage) .. "\n"
      local state = tostring(stage.state):lower()
      if state ~= "not_applicable" then total = total + 1 end
      if state == "completed" then done = done + 1 end
    end
    lines[#lines + 1] = ("\27[2K  %d of %d stages completed\n"):format(done, total)
    out.stdout:write(table.concat(lines))
    out.stdout:flush()
    drawn = #stages + 1
  end
  draw()
  return function(stage)
    local known = index[organization.key(stage.name)]
    if known then
      known.state = stage.state
    else
      stages[#stages + 1] = { name = stage.name, state = stage.state }
      index[organization.key(stage.name)] = stages[#stages]
    end
    draw()
  end
end

function commands.configure(args, out, client, env)
  local wait_opts = { poll_interval = args.poll_interval, stall_after = args.stall_after,
                      timeout = args.wait_timeout }
  if args.attach then
    if args.dry_run then return finish_dry_run(out, { { method = "POST", url = client:admin_url(""), fields = {},
                                                        files = {} } }, "configure") end
    local root, err = client:configure_status()
    if not root then return fail(out, err, { command = "configure" }) end
    wait_opts.on_stage = configure_progress(out, root)
    local final, wait_err = client:wait_configured(wait_opts)
    return configure_done(out, final, wait_err)
  end
  if not args.params then return usage_error(out, "configure: a parameters file is required (or --attach)") end
  local params, err = load_params(args.params)
  if not params then return fail(out, err, { command = "configure" }) end
  local ok, secret_err = fill_secret(params, "password", args.password_env, "Administrator password", env)
  if ok then ok, secret_err = fill_secret(params, "securityQuestionAns", args.answer_env, "Security answer", env) end
  if not ok then return fail(out, secret_err, { command = "configure" }) end
  if args.dry_run then
    local preview, perr = client:configure(params, { dry_run = true })
    if not preview then return fail(out, perr, { command = "configure" }) end
    local fields = {}
    for i, pair in ipairs(preview.fields) do fields[i] = pair end
    if client.has_token then fields[#fields + 1] = { "token", "<redacted>" } end
    return finish_dry_run(out, { { method = "POST", url = preview.url, content_type = "multipart/form-data",
                                   fields = fields, files = preview.files } }, "configure")
  end
  local root, op = client:configure(params, { wait = false })
  if not root then return fail(out, op, { command = "configure" }) end
  if args.no_wait then
    if out.mode == "json" then
      out:emit{ event = "status", state = organization.state(root), summary = tostring(root), root = root }
    else
      out:line(tostring(op))
    end
    return out:result(EXIT.ok, { command = "configure", state = organization.state(root) })
  end
  if out.mode == "lines" then out:line(tostring(root)) end
  wait_opts.on_stage = configure_progress(out, root)
  local final, wait_err = op:wait(wait_opts)
  return configure_done(out, final, wait_err)
end

-- sync -----------------------------------------------------------------------

local function generation_text(result)
  if result.layerServerGens then
    local parts = {}
    for _, l in ipairs(result.layerServerGens) do parts[#parts + 1] = ("%s:%s"):format(l.id, l.serverGen) end
    return table.concat(parts, " ")
  end
  return tostring(result.replicaServerGen)
end

-- Bytes between two download progress reports when the size is unknown; with
-- a known size there is one report per tenth of it.
local PROGRESS_STEP = 4 * 1024 * 1024

-- Follows one synchronization on the display: job status changes, polls
-- (spinner ticks), the result download (bytes as they arrive, through the
-- library's on_progress) and parsed records.
local function sync_watch(out, client, name)
  local w = { status = "sending", records = nil, bytes = 0, tick = 0, frame = 0, started = core.monotonic() }
  local last_draw = 0
  local function draw(force)
    if out.mode ~= "tty" then return end
    local now = core.monotonic()
    if not force and now - last_draw < 0.1 then return end
    last_draw = now
    if w.downloading then
      w.frame = w.frame + 1 -- moves the marker when the size is unknown
      out:live(("%s %s %s"):format(name, "downloading",
        cli.progress_bar(w.bytes, w.total, w.records, w.frame, nil, true)))
    else
      out:live(("%s %s %s %.1f s"):format(SPINNER[w.tick % #SPINNER + 1], name, w.status, now - w.started))
    end
  end
  -- Every request of this client ticks the spinner; downloads report bytes.
  local Client_post, Client_download = client.post, client.download
  client.post = function(self, ...)
    w.tick = w.tick + 1
    draw(true)
    return Client_post(self, ...)
  end
  client.download = function(self, url, opts, ...)
    w.downloading = true
    draw(true)
    local ret = table.pack(Client_download(self, url, opts, ...))
    if type(ret[1]) == "string" then w.bytes = #ret[1] end
    draw(true)
    if out.mode == "json" then
      out:emit{ event = "download", replica = name, ok = ret[1] ~= nil, done = true,
                bytes = w.bytes > 0 and w.bytes or nil, total = w.total }
    end
    return table.unpack(ret, 1, ret.n)
  end
  -- Bytes of the result file as they arrive (total: nil when unknown). The
  -- terminal bar is redrawn at most ten times a second; elsewhere a report
  -- goes out only when the download enters a new tenth of its size (or a
  -- new PROGRESS_STEP bytes), never for the end, which the download event
  -- above reports once the file is complete.
  local last_report
  w.on_progress = function(received, total)
    w.downloading = true
    w.bytes, w.total = received, total
    if out.mode == "tty" then return draw(false) end
    if total and received >= total then return end
    local report = total and total > 0 and ("%d/%d"):format(10 * received // total, total)
      or tostring(received // PROGRESS_STEP)
    if report == last_report then return end
    last_report = report
    local percent = total and total > 0 and 100 * received // total or nil
    if out.mode == "json" then
      out:emit{ event = "download", replica = name, done = false, bytes = received, total = total,
                percent = percent, records = w.records }
    else
      out:line(("%s: downloading %s%s%s"):format(name, human_bytes(received),
        total and (" of %s (%d%%)"):format(human_bytes(total), percent) or "",
        w.records and (", %d records"):format(w.records) or ""))
    end
  end
  w.on_status = function(status)
    w.status = status.status
    if out.mode == "json" then
      out:emit{ event = "job", replica = name, status = status.status }
    elseif out.mode == "lines" then
      out:line(("%s: job %s"):format(name, tostring(status.status)))
    else
      draw(true)
    end
  end
  w.on_change = function()
    w.records = (w.records or 0) + 1
    draw(false)
  end
  w.restore = function()
    client.post, client.download = Client_post, Client_download
    out:clear_live()
  end
  return w
end

local function save_output(path, result)
  if result.output then return true end -- the library saved the result file itself
  local ok, msg = core.write_file_atomic(path, json.encode{
    replicaID = result.replicaID, responseType = result.responseType, replicaServerGen = result.replicaServerGen,
    layerServerGens = result.layerServerGens, edits = result.edits or json.array(),
  } .. "\n")
  if not ok then return nil, errors.new("io", msg) end
  return true
end

local function sync_one(args, out, client, path, edits_text, output)
  local name = basename(path)
  local replica, err = geoservices.replica(path)
  if not replica then return nil, err, EXIT.usage end
  local params = { syncDirection = args.direction, transportType = args.transport, async = args.async or nil }
  local watch = sync_watch(out, client, name)
  local opts = { params = params, poll_interval = args.poll_interval, timeout = args.wait_timeout,
                 on_status = watch.on_status, on_progress = watch.on_progress, output = output }
  if not output then opts.on_change = watch.on_change end
  local ok, result, sync_err = pcall(client.sync, client, replica, edits_text, opts)
  watch.restore()
  if not ok then error(result, 0) end
  if not result then return nil, sync_err end
  if output then
    local saved, save_err = save_output(output, result)
    if not saved then return nil, save_err end
  end
  return result
end

function commands.sync(args, out, client)
  local states = args.state
  local edits_text
  if args.edits then
    if #states > 1 then return usage_error(out, "sync: --edits goes with exactly one state file") end
    local text, err = read_file(args.edits)
    if not text then return fail(out, err, { command = "sync" }) end
    edits_text = text
  end
  local captured = {}
  if args.dry_run then install_dry_run(client, captured) end
  local summary = { command = "sync", replicas = #states, synchronized = 0, failed = 0, partial = 0 }
  local worst = EXIT.ok
  for _, path in ipairs(states) do
    local output
    if args.output then
      output = #states == 1 and args.output
        or (args.output .. "/" .. basename(path):gsub("%.json$", "") .. ".result.json")
    end
    local result, err, code = sync_one(args, out, client, path, edits_text, output)
    if not result and err == DRY_RUN then -- luacheck: ignore 542 (printed by finish_dry_run)
    elseif not result then
      summary.failed = summary.failed + 1
      out:error(err, { replica = path })
      code = code or exit_for(err)
      if worst == EXIT.ok or worst == EXIT.partial or code == EXIT.failed then worst = code end
    else
      summary.synchronized = summary.synchronized + 1
      local failed = #result.failed_edits
      if failed > 0 or result.partial then
        summary.partial = summary.partial + 1
        if worst == EXIT.ok then worst = EXIT.partial end
      end
      if out.mode == "json" then
        out:emit{ event = "replica", replica = path, replicaID = result.replicaID, uploaded = result.succeeded,
                  failed = failed, downloaded = result.downloaded, records = result.downloaded,
                  generation = result.replicaServerGen, layerServerGens = result.layerServerGens,
                  output = output, partial = result.partial or failed > 0 }
        for _, f in ipairs(result.failed_edits) do
          local ev = { event = "failed_edit", replica = path }
          for k, v in pairs(f) do ev[k] = v end
          out:emit(ev)
        end
      else
        out:line(("%s: %s"):format(basename(path), tostring(result)))
        for _, f in ipairs(result.failed_edits) do
          out:line(("    failed %s of %s %s in layer %s: %s (code %s)"):format(f.op, f.target, tostring(f.globalId),
            tostring(f.layer), tostring(f.description), tostring(f.code)))
        end
        if output then out:line("    downloaded changes saved to " .. output)
        elseif (result.downloaded or 0) > 0 then
          out:line(("    %d downloaded changes counted, not kept (use --output to save them)"):format(
            result.downloaded))
        end
        out:line("    new generation " .. generation_text(result))
      end
    end
  end
  if args.dry_run then return finish_dry_run(out, captured, "sync") end
  if out.mode ~= "json" and #states > 1 then
    out:line(("%d of %d replicas synchronized, %d with failed edits, %d failed"):format(summary.synchronized,
      #states, summary.partial, summary.failed))
  end
  return out:result(worst, summary)
end

-- emulator -------------------------------------------------------------------

-- The example world shipped with the module (make install / the rock put it
-- next to the emulator), else the one of a source tree.
local function default_world()
  local init = package.searchpath("geoservices.emulator", package.path)
  if not init then return nil end
  local dir = dirname(init)
  for _, candidate in ipairs{ dir .. "/data/world.json", dir .. "/../../../examples/data/world.json" } do
    local f = io.open(candidate, "rb")
    if f then f:close(); return candidate end
  end
  return nil
end

function commands.emulator(args, out)
  local emulator = require "geoservices.emulator"
  local data = args.data or default_world()
  if not data then return usage_error(out, "emulator: no world data found; give --data FILE") end
  local emu, err = emulator.new{ port = args.port, host = args.host, data = data, base_path = args.base_path,
                                 configure_seconds = args.configure_seconds,
                                 log = out.verbose > 0 and function(l) io.stderr:write(l, "\n") end or nil }
  if not emu then return fail(out, errors.new("emulator", tostring(err))) end
  if out.mode == "json" then
    out:emit{ event = "listening", url = emu:url(), data = data }
  else
    out:line("geoservices emulator listening on " .. emu:url())
  end
  emu:run()
  emu:close()
  return EXIT.ok
end

-- main -------------------------------------------------------------------------

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
  local out = new_out(parsed, env)
  local command = parsed.command
  if command == "emulator" then return commands.emulator(parsed, out) end
  local client, msg = make_client(parsed, env)
  if not client then return usage_error(out, msg) end
  if parsed.verbose > 0 and out.mode ~= "json" then env.stderr:write(tostring(client), "\n") end
  local captured = {}
  if parsed.dry_run and command ~= "configure" and command ~= "sync" then install_dry_run(client, captured) end
  local code = commands[command](parsed, out, client, env)
  if parsed.dry_run and #captured > 0 and command ~= "sync" then
    return finish_dry_run(out, captured, command)
  end
  client:close()
  return code
end

return cli
