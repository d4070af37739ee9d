--- The checks of geoservices.client's options: a wrong type or a bad size
-- raises (misuse) when the client is made, never inside an operation after
-- edits were sent. Internal.
-- @module geoservices.net.client_options
-- @local
local client_options = {}

-- The level of error(): the caller of client.new (which calls these).
local LEVEL = 3

function client_options.check(opts, name, expected, default)
  local value = opts[name]
  if value == nil then return default end
  if type(value) ~= expected then
    error(("geoservices.client: option '%s' must be a %s, got %s"):format(name, expected, type(value)), LEVEL)
  end
  return value
end

-- Sizes and counts: whole numbers of at least 1, checked when the client is
-- made (never inside an operation, after edits were sent).
function client_options.count(opts, name, default)
  local value = client_options.check(opts, name, "number", default)
  if value ~= nil and (math.type(value) ~= "integer" and (value ~= math.floor(value) or value == math.huge)
                       or value < 1) then
    error(("geoservices.client: option '%s' must be a whole number of at least 1, got %s"):format(
      name, tostring(value)), LEVEL)
  end
  return value and math.tointeger(value)
end

client_options.KNOWN = {
  url = true, admin_path = true, token = true, timeout = true, ca_file = true, insecure = true,
  user_agent = true, max_response_bytes = true, max_host_connections = true, enum_prefix = true,
  retry = true, max_json_depth = true, download_chunk = true,
  username = true, password = true, token_url = true, token_endpoint = true, token_expiration = true,
  token_client = true, referer = true, bearer = true, file_urls = true,
}

return client_options
