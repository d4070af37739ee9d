--- `geoservices configure PARAMS`: creates the organization and follows
-- its stages (or `--attach` to one already running). The password and the
-- security answer come from the file, the environment or a prompt without
-- echo; never from the command line.
local core = require "geoservices.core"
local errors = require "geoservices.base.errors"
local files = require "geoservices.cli.files"
local geoservices = require "geoservices"
local hints = require "geoservices.cli.hints"
local json = require "geoservices.base.json"
local organization = require "geoservices.configure.organization"
local output = require "geoservices.cli.output"

local EXIT = output.EXIT

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
    local text, err = files.read(path)
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
    params.licenseFile = files.dirname(path) .. "/" .. params.licenseFile
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
  -- a configuration that failed or was given up on no longer needs following
  -- (a deadline or a lost server: it may still run, and --attach follows it)
  if final or (wait_err and wait_err.kind == "job") then out:server_work(nil) end
  if not final then return output.fail(out, wait_err, { command = "configure" }) end
  if out.mode ~= "json" then out:line(out:paint(tostring(final), "green")) end
  return out:result(EXIT.ok, { command = "configure", state = organization.state(final), summary = tostring(final) })
end

-- From here on, an interrupted command leaves the configuration running on
-- the server: Ctrl-C says so, and how to follow it.
-- `admin`: the administrator configure creates, when the command has no
-- token of its own: once configured the root resource needs one, so
-- following the configuration means signing in as that administrator.
local function following(out, admin)
  local follow = admin and hints.follow(out, "--username", admin, "configure", "--attach")
    or hints.follow(out, "configure", "--attach")
  out:server_work{ what = "the configuration of the organization", follow = follow,
                   resupply = admin and ("give the password of %s (the administrator it creates) when asked, or "
                     .. "set GEOSERVICES_PASSWORD"):format(admin) or nil }
end

-- The server's own words about the configuration, when they change.
local function message_progress(out)
  return function(message)
    if out.mode == "json" then
      out:emit{ event = "message", message = message }
    elseif out.mode == "lines" then
      out:progress("server: " .. message)
    end
  end
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
      out:progress(("+%4.0fs  %-32s %s -> %s"):format(core.monotonic() - started, stage.name, tostring(old or "(new)"),
        tostring(stage.state)))
    end
  end
  local stages, index = {}, {}
  for i, stage in ipairs(organization.stages(root)) do
    stages[i] = { name = stage.name, state = stage.state }
    index[organization.key(stage.name)] = stages[i]
  end
  local drawn, message = 0, nil
  -- the list shows the stages seen so far: a real server lists a stage only
  -- once it has started, so the count says "so far" until the list is whole
  local function draw()
    local lines, done, total = {}, 0, 0
    if drawn > 0 then lines[1] = ("\27[%dA"):format(drawn) end
    for _, stage in ipairs(stages) do
      lines[#lines + 1] = "\27[2K" .. output.stage_line(stage, out) .. "\n"
      local state = tostring(stage.state):lower()
      if state ~= "not_applicable" then total = total + 1 end
      if state == "completed" then done = done + 1 end
    end
    local whole = organization.complete_list{ status = { stages = stages } }
    lines[#lines + 1] = ("\27[2K  %d of %d stages%s completed%s\n"):format(done, total,
      whole and "" or " seen so far", message and (" - " .. message) or "")
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
  end, function(text)
    message = text
    draw()
  end
end

return function(args, out, client, env)
  local wait_opts = { poll_interval = args.poll_interval, stall_after = args.stall_after,
                      timeout = args.wait_timeout }
  if args.attach then
    local root, err = client:configure_status()
    if not root then return output.fail(out, err, { command = "configure" }) end
    following(out)
    local on_message
    wait_opts.on_stage, on_message = configure_progress(out, root)
    wait_opts.on_message = on_message or message_progress(out)
    local final, wait_err = client:wait_configured(wait_opts)
    return configure_done(out, final, wait_err)
  end
  if not args.params then return output.usage_error(out, "configure: a parameters file is required (or --attach)") end
  local params, err = load_params(args.params)
  if not params then return output.fail(out, err, { command = "configure" }) end
  local ok, secret_err = fill_secret(params, "password", args.password_env, "Administrator password", env)
  if ok then ok, secret_err = fill_secret(params, "securityQuestionAns", args.answer_env, "Security answer", env) end
  if not ok then return output.fail(out, secret_err, { command = "configure" }) end
  -- sent: whatever happens next (an answer lost, Ctrl-C), the server may be configuring
  following(out, not client.has_token and type(params.username) == "string" and params.username or nil)
  local root, op = client:configure(params, { wait = false })
  if not root then
    if not (type(op) == "table" and op.ambiguous) then out:server_work(nil) end
    return output.fail(out, op, { command = "configure" })
  end
  if args.no_wait then
    if out.mode == "json" then
      out:emit{ event = "status", state = organization.state(root), summary = tostring(root), root = root }
    else
      out:line(tostring(op))
    end
    return out:result(EXIT.ok, { command = "configure", state = organization.state(root) })
  end
  if out.mode == "lines" then out:line(tostring(root)) end
  local on_message
  wait_opts.on_stage, on_message = configure_progress(out, root)
  wait_opts.on_message = on_message or message_progress(out)
  local final, wait_err = op:wait(wait_opts)
  return configure_done(out, final, wait_err)
end

