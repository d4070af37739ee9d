--- Origins (scheme, host, port), which addresses a client accepts as its
-- own and which a server may send it to. A client's address is an http(s)
-- address with a host and nothing else (file:// only for fixture tests that
-- say so); credentials go only to the client's own origin, never downgraded
-- from https to http; an address a server hands back (a job's status, a
-- result file) must be http(s), and file:// only when the client itself is
-- a file:// fixture. Pure.
local errors = require "geoservices.base.errors"

local origin = {}

local DEFAULT_PORT = { http = "80", https = "443" }

--- The origin of an address, "scheme://host:port" in lower case, or nil
-- when it is not an absolute URL.
function origin.of(url)
  if type(url) ~= "string" then return nil end
  local scheme, rest = url:match("^(%a[%w+.-]*)://(.*)$")
  if not scheme then return nil end
  scheme = scheme:lower()
  if scheme == "file" then return "file://" end
  local authority = rest:match("^([^/?#]*)"):gsub("^.*@", "") -- userinfo is not part of the origin
  local host, port = authority:match("^(%[[^%]]*%]):?(%d*)$")
  if not host then host, port = authority:match("^([^:]*):?(%d*)$") end
  if not host or host == "" then return nil end
  if port == "" then port = DEFAULT_PORT[scheme] or "" end
  return ("%s://%s:%s"):format(scheme, host:lower(), port)
end

--- What is wrong with `url` as a client's (or a generateToken) address:
-- nil when it is an absolute http(s) address with a host (or, with
-- `allow_file`, a file:// one), else the rule it breaks, to follow "option
-- 'url' ". Never the address itself: it may carry a password.
-- @param url the address
-- @bool[opt] allow_file accept file:// (fixture tests)
-- @treturn ?string the rule broken
function origin.address_problem(url, allow_file)
  local http = "must be an http(s):// address"
  if type(url) ~= "string" or url:find("[%s%c]") then return http end
  local scheme = url:match("^(%a[%w+.-]*)://")
  scheme = scheme and scheme:lower()
  if scheme == "file" and allow_file then return nil end
  if (scheme ~= "http" and scheme ~= "https") or not origin.of(url) then return http end
  if url:match("^%a[%w+.-]*://([^/?#]*)"):find("@", 1, true) then
    return "must not carry a user name or password (give them as options)"
  end
  if url:find("[?#]") then return "must not have a query or a fragment" end
  return nil
end

--- Whether a request to `url` may carry the credentials of a client whose
-- base address is `base`: the same scheme, host and port.
function origin.same(url, base)
  local a = origin.of(url)
  return a ~= nil and a == origin.of(base)
end

--- Checks an address the server sent (`what`: "status URL", "result URL"):
-- nil when it may be followed, else an error of kind "protocol".
function origin.check_followable(url, base, what)
  local scheme = type(url) == "string" and url:match("^(%a[%w+.-]*):") or nil
  scheme = scheme and scheme:lower()
  local ok = (scheme == "http" or scheme == "https") and origin.of(url) ~= nil
  if scheme == "file" and origin.of(base) == "file://" then ok = true end
  if ok then return nil end
  local shown = type(url) == "string" and url:sub(1, 80) or tostring(url)
  return errors.new("protocol", ("the server's %s %s was refused: only http(s) addresses are followed"):format(
    what, shown), { code = "refused_url", url = shown })
end

return origin
