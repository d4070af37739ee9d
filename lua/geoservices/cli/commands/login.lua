--- `geoservices login`: generates a token with the server's generateToken
-- and stores it for the profile (geoservices.cli.profile.save_token: the
-- file 0600, its directory 0700), so later commands of the profile need no
-- token option until it expires. The password comes from --password-file
-- (- for standard input), $GEOSERVICES_PASSWORD or a prompt without echo;
-- never from the command line.
local files = require "geoservices.cli.files"
local geoservices = require "geoservices"
local output = require "geoservices.cli.output"
local profile = require "geoservices.cli.profile"
local secrets = require "geoservices.cli.secrets"

local EXIT = output.EXIT

local function prompt_line(env, label)
  if not env.stdin_tty then return nil end
  env.stderr:write(label, ": ")
  env.stderr:flush()
  local value = io.read("l")
  if value == "" then return nil end
  return value
end

return function(args, out, env, prof, prof_name, url)
  if not url then
    return output.usage_error(out, "login: no server: give --url, set GEOSERVICES_URL or use a --profile")
  end
  url = url:gsub("/+$", "")
  local username = args.username or prof.username or prompt_line(env, "Username")
  if not username then return output.usage_error(out, "login: give --username (or set username in the profile)") end
  local unreadable = files.check_readable(args.ca_file or prof.ca_file, "--ca-file")
  if unreadable then return output.fail(out, unreadable, { command = "login" }) end
  local password, password_err = secrets.password_source(args, prof, env, username)
  if not password then return output.fail(out, password_err, { command = "login" }) end
  local ok, provider = pcall(geoservices.token, {
    url = url, username = username, password = password,
    endpoint = args.token_endpoint or prof.token_endpoint, token_url = prof.token_url,
    expiration = args.expiration, client = "requestip", -- used later without a Referer, from this machine
    ca_file = args.ca_file or prof.ca_file, insecure = (args.insecure or prof.insecure == "true") or nil,
    timeout = args.timeout or tonumber(prof.timeout),
  })
  if not ok then return output.usage_error(out, (tostring(provider):gsub("^[^:]*:%d+: ", ""))) end
  if args.dry_run then
    local dry_run = require "geoservices.cli.dry_run"
    return dry_run.finish(out, { provider:describe() }, "login")
  end
  local token, err = provider:get()
  if not token then return output.fail(out, err, { command = "login" }) end
  local path, save_err = profile.save_token(prof_name, {
    url = url, username = username, token = token, expires = provider.expires, token_url = provider.url,
  }, env.getenv)
  if not path then return output.fail(out, geoservices.errors.new("io", save_err), { command = "login" }) end
  local expires = provider.expires and os.date("!%Y-%m-%d %H:%M UTC", provider.expires // 1000) or "unknown"
  if out.mode == "json" then
    out:emit{ event = "login", url = url, username = username, profile = prof_name, path = path,
              expires = provider.expires }
  else
    out:line(out:paint(("logged in to %s as %s (profile %s); the token is stored in %s, readable only by you, "
      .. "until %s"):format(url, username, prof_name, path, expires), "green"))
  end
  return out:result(EXIT.ok, { command = "login", profile = prof_name })
end
