--- Where the command's secrets come from: the token (--token, --token-file,
-- --token-env, a profile, the token `login` stored) and the password of
-- --username (--password-file, $GEOSERVICES_PASSWORD, a prompt without
-- echo). A secret that cannot be had is an input error found before
-- anything is sent (exit 2): a file that cannot be read, nothing on
-- standard input, no password anywhere and no terminal to ask on.
local errors = require "geoservices.base.errors"
local files = require "geoservices.cli.files"
local geoservices = require "geoservices"
local profile = require "geoservices.cli.profile"

local secrets = {}

--- Asks for a secret on the terminal without echo; nil without a terminal.
function secrets.prompt(env, label)
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

--- The password of `username`: a password file (- for standard input) or
-- $GEOSERVICES_PASSWORD, read now, so a file that cannot be read is refused
-- before anything is sent; else a prompt without echo when the token is
-- first needed (only on a terminal: without one, no password is an input
-- error now). The password stays in the returned closure only.
-- @treturn[1] function the password source
-- @return[2] nil
-- @treturn[2] table err, kind "invalid"
function secrets.password_source(args, prof, env, username)
  local path = args.password_file or prof.password_file
  local value
  if path then
    local err
    value, err = files.read_secret(path, "password")
    if not value then return nil, err end
  else
    value = env.getenv("GEOSERVICES_PASSWORD")
    if value == "" then value = nil end
    if not value and not env.stdin_tty then
      return nil, errors.new("invalid", ("no password for %s: give --password-file FILE (- reads standard input), "
        .. "set GEOSERVICES_PASSWORD, or run on a terminal to be asked"):format(username))
    end
  end
  return function()
    value = value or secrets.prompt(env, ("Password of %s"):format(username))
    return value
  end
end

-- A generateToken provider for `username`, or nil and an input error.
local function provider(args, prof, env, url, username)
  local password, err = secrets.password_source(args, prof, env, username)
  if not password then return nil, err end
  local ok, made = pcall(geoservices.token, {
    url = url, username = username, password = password,
    endpoint = args.token_endpoint or prof.token_endpoint, token_url = prof.token_url,
  })
  if not ok then return nil, errors.new("invalid", (tostring(made):gsub("^[^:]*:%d+: ", ""))) end
  return made
end

--- How the command gets its token, first that applies: --token,
-- --token-file, --username (generateToken), the --token-env variable, the
-- profile's token_file, token_env or username, the token `login` stored.
-- Returns the client option (a string or a geoservices.token provider) or
-- nil, or nil and an error (kind "invalid": nothing was sent).
function secrets.token_option(args, prof, prof_name, url, env)
  if args.token and args.token ~= "" then return args.token end
  if args.token_file then return files.read_secret(args.token_file, "token") end
  if args.username then return provider(args, prof, env, url, args.username) end
  local from_env = args.token_env and args.token_env ~= "" and env.getenv(args.token_env) or nil
  if from_env and from_env ~= "" then return from_env end
  if prof.token_file then return files.read_secret(prof.token_file, "token") end
  if prof.token_env then
    local value = env.getenv(prof.token_env)
    if value and value ~= "" then return value end
  end
  if prof.username then return provider(args, prof, env, url, prof.username) end
  return (profile.load_token(prof_name, url, env.getenv))
end

return secrets
