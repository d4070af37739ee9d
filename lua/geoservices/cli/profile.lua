--- Named profiles of the command and the tokens `geoservices login` stores.
--
-- Profiles live in `$XDG_CONFIG_HOME/geoservices/config` (by default
-- `~/.config/geoservices/config`), one section per profile:
--
--     [default]
--     url = https://gis.example.com/server
--     admin_path = admin
--     ca_file = /etc/ssl/certs/corp-ca.pem
--     username = siteadmin
--     password_file = ~/.config/geoservices/siteadmin.password
--
--     [staging]
--     url = https://staging.example.com/server
--     token_file = ~/.config/geoservices/staging.token
--
-- `--profile NAME` (or `$GEOSERVICES_PROFILE`) picks one; without either the
-- `[default]` section is used when there is one. Where the server is comes
-- from the first of (as the aws and gh commands order them):
--
-- 1. the command line (`--url`);
-- 2. a profile named on the command line (`--profile NAME`);
-- 3. the environment (`$GEOSERVICES_URL`);
-- 4. a profile named by the environment (`$GEOSERVICES_PROFILE`);
-- 5. the `[default]` profile.
--
-- A profile's credentials (username, password_file, token_file, token_env,
-- the token `login` stored) and its ca_file go only to the server the
-- profile names: for any other address the profile is set aside, and the
-- command says so on standard error (profile.effective). `geoservices login` stores a
-- token in `$XDG_CONFIG_HOME/geoservices/tokens/<profile>.json` (mode 0600,
-- the directory 0700), used until it expires by later commands of that
-- profile and address.
local core = require "geoservices.core"
local json = require "geoservices.base.json"

local profile = {}

--- Keys a profile may set (anything else is refused, naming the line).
-- @table KEYS
profile.KEYS = {
  url = "the server's base URL (https://host/server)", admin_path = "the administrative context path",
  ca_file = "PEM file of the certificate authorities to trust", insecure = "true: skip TLS verification",
  timeout = "seconds per request", token_file = "file holding a token", token_env = "variable holding a token",
  username = "user for generateToken", password_file = "file holding that user's password",
  token_endpoint = "server or portal", token_url = "the whole generateToken address",
  bearer = "true: send the token in an Authorization: Bearer header",
}

local function trim(s)
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

--- The directory of the configuration: `$XDG_CONFIG_HOME/geoservices`, else
-- `$HOME/.config/geoservices`.
-- @tparam function getenv the environment
-- @treturn ?string the directory (nil without HOME or XDG_CONFIG_HOME)
function profile.dir(getenv)
  local base = getenv("XDG_CONFIG_HOME")
  if not base or base == "" then
    local home = getenv("HOME")
    if not home or home == "" then return nil end
    base = home .. "/.config"
  end
  return base .. "/geoservices"
end

--- A path with a leading `~/` expanded.
function profile.expand(path, getenv)
  if type(path) ~= "string" then return path end
  local home = getenv("HOME")
  if home and path:sub(1, 2) == "~/" then return home .. path:sub(2) end
  return path
end

--- Parses the text of a configuration file: `{name = {key = value}}`, or
-- nil and a message naming the line.
function profile.parse(text, where)
  local sections, current = {}, nil
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    line = trim(line)
    if line ~= "" and not line:match("^[#;]") then
      local name = line:match("^%[%s*([^%]]-)%s*%]$")
      if name then
        current = sections[name] or {}
        sections[name] = current
      else
        local key, value = line:match("^([%w_%-]+)%s*=%s*(.-)$")
        if not key then return nil, ("%s:%d: expected 'key = value' or '[profile]'"):format(where, n) end
        key = key:gsub("%-", "_")
        if not current then return nil, ("%s:%d: '%s' comes before any [profile]"):format(where, n, key) end
        if not profile.KEYS[key] then
          local known = {}
          for k in pairs(profile.KEYS) do known[#known + 1] = k end
          table.sort(known)
          return nil, ("%s:%d: unknown key '%s' (known: %s)"):format(where, n, key, table.concat(known, ", "))
        end
        current[key] = value:gsub('^"(.*)"$', "%1")
      end
    end
  end
  return sections
end

--- The profile to use: `--profile NAME`, else `$GEOSERVICES_PROFILE`, else
-- `[default]` when the file has one. Returns the profile's settings (an
-- empty table when none applies) and its name, or nil and a message (the
-- named profile does not exist, the file is malformed).
function profile.select(name, getenv)
  local explicit = name ~= nil
  name = name or getenv("GEOSERVICES_PROFILE")
  if name == "" then name = nil end
  explicit = explicit or name ~= nil
  local dir = profile.dir(getenv)
  local path = dir and (dir .. "/config")
  local f = path and io.open(path, "rb")
  if not f then
    if explicit then
      return nil, ("profile '%s' not found: %s does not exist"):format(name, tostring(path or "$XDG_CONFIG_HOME"))
    end
    return {}, "default"
  end
  local text = f:read("a")
  f:close()
  local sections, msg = profile.parse(text, path)
  if not sections then return nil, msg end
  name = name or "default"
  local chosen = sections[name]
  if not chosen then
    if explicit then return nil, ("profile '%s' not found in %s"):format(name, path) end
    return {}, name
  end
  for k, v in pairs(chosen) do chosen[k] = (k:match("_file$") and profile.expand(v, getenv)) or v end
  return chosen, name
end

local function same_url(a, b)
  return type(a) == "string" and type(b) == "string" and a:gsub("/+$", "") == b:gsub("/+$", "")
end

--- The server a command talks to and the profile that applies to it, by
-- the precedence of the module's notes. `flag_profile`: the profile was
-- named by `--profile` (not by the environment nor by default). Returns
-- the URL (nil when none is given anywhere), the profile's settings to use
-- (an empty table when the profile is for another server) and, when a
-- profile was set aside, a line saying so.
function profile.effective(args, getenv, prof, prof_name, flag_profile)
  local function given(v) return v ~= nil and v ~= "" and v or nil end
  local url = given(args.url)
    or (flag_profile and given(prof.url))
    or given(getenv("GEOSERVICES_URL"))
    or given(prof.url)
  if url == nil or prof.url == nil or same_url(url, prof.url) then return url, prof end
  return url, {}, ("profile '%s' is for %s, not %s: its credentials and settings are not used"):format(
    prof_name, prof.url, url)
end

--- Where `geoservices login` keeps the token of a profile.
function profile.token_path(name, getenv)
  local dir = profile.dir(getenv)
  return dir and (dir .. "/tokens/" .. name:gsub("[^%w_.%-]", "_") .. ".json")
end

local function shell_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

--- Stores a token for a profile: `{url =, username =, token =, expires =}`
-- written atomically, the file 0600 and its directory 0700. Returns the
-- path, or nil and a message.
function profile.save_token(name, record, getenv)
  local path = profile.token_path(name, getenv)
  if not path then return nil, "no configuration directory: set HOME or XDG_CONFIG_HOME" end
  local dir = path:match("^(.*)/[^/]*$")
  if not os.execute("umask 077 && mkdir -p " .. shell_quote(dir)) then return nil, "cannot create " .. dir end
  os.execute("chmod 700 " .. shell_quote(dir) .. " " .. shell_quote(profile.dir(getenv)) .. " 2>/dev/null")
  -- 0600 from the start: the temporary file is made so and renamed over it
  local ok, msg = core.write_file_atomic(path, json.encode(record) .. "\n", tonumber("600", 8))
  if not ok then return nil, msg end
  os.execute("chmod 600 " .. shell_quote(path))
  return path
end

--- The stored token of a profile, when it is for `url` and has not expired.
function profile.load_token(name, url, getenv)
  local path = profile.token_path(name, getenv)
  local f = path and io.open(path, "rb")
  if not f then return nil end
  local record = json.decode(f:read("a"))
  f:close()
  if type(record) ~= "table" or type(record.token) ~= "string" or record.url ~= url then return nil end
  local expires = math.tointeger(tonumber(record.expires))
  if expires and expires // 1000 <= os.time() + 30 then return nil end
  return record.token, record
end

return profile
