--- What to do next after an error, where one action fits: the command
-- prints the error, then one line of advice (`hint` in the --json error
-- event). Some transfer failures are also put in words: libcurl's and
-- OpenSSL's own texts ("wrong version number", "Out of memory") say what
-- broke inside, not what the user did.
local hints = {}

-- What a base URL looks like, for the advice after a 404.
local BASE_URL_EXAMPLE = "https://gis.example.com/server"

local function host_of(url)
  return tostring(url):match("^%a+://([^/?#]+)") or tostring(url)
end

--- The `geoservices ... login` that gets a token for the same server and
-- profile: `--profile P` when one was named, else `--url U` when given;
-- `--username NAME` unless the command or the profile names the user, or
-- `asks` (standard input is a terminal: login asks for the user itself, so
-- the command runs as printed).
-- @tparam table args the parsed arguments
-- @tparam table prof the profile in effect (may be empty)
-- @tparam[opt] boolean asks whether login can ask for the user
-- @treturn string the command
function hints.login_command(args, prof, asks)
  local parts = { "geoservices" }
  if args.profile then parts[#parts + 1] = "--profile " .. args.profile end
  if args.url then parts[#parts + 1] = "--url " .. args.url end
  if args.ca_file then parts[#parts + 1] = "--ca-file " .. args.ca_file end
  if args.username then
    parts[#parts + 1] = "--username " .. args.username
  elseif not prof.username and not asks then
    parts[#parts + 1] = "--username NAME"
  end
  parts[#parts + 1] = "login"
  return table.concat(parts, " ")
end

-- The token given on the command line, which a stored login token does not
-- replace (it comes first).
local function token_option_given(args)
  if args.token and args.token ~= "" then return "--token" end
  if args.token_file then return "--token-file" end
  return nil
end

local function auth_advice(err, ctx)
  local code = err.code or err.status
  local login = hints.login_command(ctx.args, ctx.profile or {}, ctx.terminal)
  if code == 499 or (code == 401 and not ctx.args.token) then
    return { hint = ("the server asks for a token: sign in once with `%s` (the token is kept for the commands "
      .. "that follow), or give --token-file FILE"):format(login) }
  end
  if code == 498 or code == 401 then
    local given = token_option_given(ctx.args)
    return { hint = ("the token was refused (expired, or not valid for this server): get a new one with `%s`%s")
      :format(login, given and (", then run the command again without " .. given) or "") }
  end
  return nil
end

-- A 404 before the server answered anything else, not from the server's
-- own API (a plain page, or "could not find resource or operation"): the
-- base URL is the likely mistake.
local function not_found_advice(err, ctx)
  for url in pairs(ctx.answered or {}) do
    if url ~= err.url then return nil end -- the server answered elsewhere: the base URL works
  end
  local plain = err.kind == "http" and err.status == 404
  local no_operation = err.kind == "server" and err.code == 404
    and tostring(err.message):lower():find("could not find resource or operation", 1, true)
  if not plain and not no_operation then return nil end
  return {
    message = ("nothing at %s (HTTP 404)"):format(tostring(err.url)),
    hint = ("check the base URL: this command used %s; a base URL is the server's address and context path, "
      .. "such as %s (without /rest/services or /admin)"):format(tostring(ctx.base_url), BASE_URL_EXAMPLE),
  }
end

local function tls_advice(err, ctx)
  local text = tostring(err.message)
  local host = host_of(err.url)
  -- a plain HTTP server answers the ClientHello with an HTTP error (OpenSSL:
  -- "wrong version number") or just closes the connection (SSL_ERROR_SYSCALL
  -- inside SSL_connect), depending on how fast it reads
  if err.code == "tls" and (text:find("wrong version number", 1, true)
      or (text:find("SSL_connect", 1, true) and text:find("SSL_ERROR_SYSCALL", 1, true))) then
    local plain = tostring(ctx.base_url):gsub("^https:", "http:")
    return { message = ("the TLS handshake with %s failed: the server there does not speak TLS (or closed the "
               .. "connection during the handshake)"):format(host),
             hint = ("is it a plain http:// address? try --url %s"):format(plain) }
  end
  if err.code == "tls_verify" then
    if text:find("subject name", 1, true) or text:find("host name", 1, true) then
      return { message = ("the server's certificate is for another host name than %s (%s)"):format(host, text),
               hint = "use the host name the certificate names in --url" }
    end
    local why = text:gsub("^SSL certificate problem: ", "")
    return { message = ("the server's certificate is not trusted (%s, at %s)"):format(why, host),
             hint = "give the certificate of the authority that signed it with --ca-file FILE.pem (or ca_file in "
               .. "the profile); --insecure skips the check, for tests only" }
  end
  if err.code == "tls_ca_file" then
    return { message = "the --ca-file is not a list of PEM certificates",
             hint = "give a PEM file (-----BEGIN CERTIFICATE-----) with --ca-file" }
  end
  if err.code == "tls" then
    return { message = ("the TLS handshake with %s failed (%s)"):format(host, text),
             hint = "check the address and port of --url, and --ca-file for a private certificate authority" }
  end
  return nil
end

local function transfer_advice(err, ctx)
  if err.code == "curl_27" then -- CURLE_OUT_OF_MEMORY: what libcurl 7.x reports for a header too large
    return { message = ("the answer of %s has a header larger than libcurl accepts (100 KiB; libcurl says "
      .. "\"%s\")"):format(host_of(err.url), tostring(err.message)),
             hint = ("check that %s is the server's address: a proxy or load balancer in front of it may be "
               .. "answering instead"):format(tostring(ctx.base_url)) }
  end
  if err.code == "couldnt_connect" then
    return { hint = ("nothing answers at %s: is the server running, and is --url (%s) its address?"):format(
      host_of(err.url), tostring(ctx.base_url)) }
  end
  if err.code == "resolve" then
    return { hint = ("the host name %s is not known: check --url"):format(host_of(err.url)) }
  end
  return nil
end

-- ------------------------------------------------------------ follow-up commands

-- A word as the shell reads it back: quoted when it holds anything the
-- shell would split or expand.
local function shell_word(word)
  word = tostring(word)
  if word ~= "" and word:match("^[%w@%%+=:,./_-]+$") then return word end
  return "'" .. word:gsub("'", "'\\''") .. "'"
end
hints.shell_word = shell_word

-- A file that only existed for the interrupted process: standard input, or
-- a process substitution's /dev/fd/63. Pasted later, it would be gone.
local function throwaway(path)
  return path == "-" or path == "/dev/stdin" or path:match("^/dev/fd/") ~= nil
    or path:match("^/proc/[%w]+/fd/") ~= nil
end

--- The start of a command that reaches the same server, profile and token
-- the same way, as words, and what must be given again: never a secret
-- itself (a --token value is left out) nor a file that is gone once the
-- process ends (a password or token read from standard input or /dev/fd/N).
-- @treturn table the words, starting with "geoservices"
-- @treturn ?string what to give again ("give the token again (...)"), or nil
function hints.follow_words(args)
  local words, again = { "geoservices" }, {}
  local function add(flag, value)
    if value == nil or value == false then return end
    words[#words + 1] = flag
    if value ~= true then words[#words + 1] = value end
  end
  add("--profile", args.profile)
  add("--url", args.url)
  if args.admin_path and args.admin_path ~= "admin" then add("--admin-path", args.admin_path) end
  if args.token_env and args.token_env ~= "GEOSERVICES_TOKEN" then add("--token-env", args.token_env) end
  if args.token and args.token ~= "" then
    again[#again + 1] = "give the token again (--token-file FILE, or $GEOSERVICES_TOKEN)"
  elseif args.token_file and throwaway(args.token_file) then
    again[#again + 1] = "give the token again (--token-file FILE, or $GEOSERVICES_TOKEN)"
  else
    add("--token-file", args.token_file)
  end
  add("--username", args.username)
  if args.password_file and throwaway(args.password_file) then
    again[#again + 1] = ("give the password of %s again (asked on a terminal, or --password-file FILE, or "
      .. "$GEOSERVICES_PASSWORD)"):format(args.username or "the user")
  else
    add("--password-file", args.password_file)
  end
  add("--token-endpoint", args.token_endpoint)
  add("--bearer", args.bearer)
  add("--ca-file", args.ca_file)
  add("--insecure", args.insecure)
  return words, #again > 0 and table.concat(again, "; ") or nil
end

--- A command line to paste: the words of @{follow_words} and then `...`,
-- each quoted for the shell where needed.
-- @treturn string the command
function hints.follow_command(args, ...)
  local words = hints.follow_words(args)
  for _, w in ipairs{ ... } do words[#words + 1] = w end
  for i, w in ipairs(words) do words[i] = shell_word(w) end
  return table.concat(words, " ")
end

--- The follow-up command of a command's output `out` (main sets
-- `out.follow_command`; without it, the bare words).
function hints.follow(out, ...)
  if out.follow_command then return out.follow_command(...) end
  local words = { "geoservices" }
  for _, w in ipairs{ ... } do words[#words + 1] = shell_word(w) end
  return table.concat(words, " ")
end

--- The advice for an error: nil, or `{message =, hint =}` (either may be
-- nil): `message` replaces the error's own text in the printed line,
-- `hint` is the next step.
-- @param err the error (a geoservices.errors table, or any value)
-- @tparam table ctx `args` (the parsed arguments), `profile`, `base_url` (the URL in effect), `terminal`
--   (standard input is a terminal),
--   `answered` (a set of the addresses that answered with a status below 400)
-- @treturn ?table the advice
function hints.advise(err, ctx)
  if type(err) ~= "table" or not ctx then return nil end
  if err.kind == "auth" then return auth_advice(err, ctx) end
  if err.kind == "http" or err.kind == "server" then return not_found_advice(err, ctx) end
  if err.kind == "network" then return tls_advice(err, ctx) or transfer_advice(err, ctx) end
  return nil
end

return hints
