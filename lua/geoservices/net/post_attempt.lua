--- One attempt of Client:post (geoservices.net.client): the token for it,
-- the request built from the call's values, sent once, its answer decoded
-- (whole, or streamed into a record sink). These are plain functions of the
-- call's values, not closures made per call: a call that succeeds at once
-- (most) allocates none of them. Internal.
-- @module geoservices.net.post_attempt
-- @local
local form = require "geoservices.base.form"
local redact = require "geoservices.base.redact"
local response = require "geoservices.net.response"
local retry = require "geoservices.net.retry"
local transport = require "geoservices.net.transport"

local post_attempt = {}

-- The token of one request of Client:post: `source` is the call's opts.token
-- (a function, false for none, "optional", or nil for the client's), sent
-- only to the client's own origin. Returns the token or nil, or nil, err;
-- with "optional", a failure to get the client's token gives nil, nil, err.
function post_attempt.token(self, source, own_origin, refresh)
  if source == false or not own_origin then return nil end
  if type(source) == "function" then return source(refresh) end
  local t, e = self._token(refresh)
  if e and source == "optional" then return nil, nil, e end
  return t, e
end

-- The "request" event of a POST, built only when someone observes.
local function describe_post(self, fields, opts, sent_token)
  local d = form.describe(fields, opts.files, opts.multipart, sent_token and not self.bearer)
  if sent_token and self.bearer then d.headers = { "Authorization: Bearer " .. redact.MARK } end
  return d
end

-- One attempt of Client:post. Returns what an attempt of retry.run returns
-- ("done", decoded | "failed", err, retry_after | "fatal", err), then whether
-- a token went with the request and, with opts.token "optional", why none
-- could (or nil).
function post_attempt.run(self, url, fields, opts, deadline, source, own_origin, info)
  local token, token_err, why_none = post_attempt.token(self, source, own_origin, false)
  if token_err then return "fatal", token_err, nil, false, why_none end
  local sent_token = token ~= nil
  local conn = self.conn
  local bearer = conn.bearer
  local spec = transport.spec(conn, url, "POST", deadline)
  spec.fresh_connect = opts.fresh_connect -- never re-sent by libcurl on a reused connection
  -- a generated token bound to a referer is valid only with that Referer
  local referer = type(source) ~= "function" and conn.referer or nil
  if token and (bearer or referer) then
    spec.headers = spec.headers or {}
    if bearer then spec.headers[#spec.headers + 1] = "Authorization: Bearer " .. token end
    if referer then spec.headers[#spec.headers + 1] = "Referer: " .. referer end
  end
  if opts.multipart then
    local parts = {}
    for i, pair in ipairs(form.to_form(fields, not bearer and token or nil)) do
      parts[i] = { name = pair[1], value = form.text(pair[2]) }
    end
    for _, part in ipairs(opts.files or {}) do parts[#parts + 1] = part end
    spec.multipart = parts
  else
    spec.form = form.to_flat(fields, not bearer and token or nil)
  end
  info.attempts = info.attempts + 1
  -- a fresh record sink per attempt; the top-level fields are kept here
  -- to tell an error body from a result
  local sink = opts.records and opts.records()
  local top, deliver
  if sink then
    spec.records = sink.records
    top = {}
    local to_sink = sink.deliver
    deliver = function(kind, layer, value, key)
      if kind == "field" then top[key] = value end
      return to_sink(kind, layer, value, key)
    end
  else
    -- held whole, and decoded by the C core straight from its buffer
    spec.max_response_bytes = conn.max_held_bytes
    spec.json, spec.max_json_depth = true, conn.max_json_depth
  end
  local resp, msg, code = transport.send(conn, spec, deliver, nil, describe_post, self, fields, opts, sent_token)
  if not resp then
    local err = transport.failure(msg, code, url)
    return code == "refused" and "fatal" or "failed", err, nil, sent_token, why_none
  end
  local decoded, err
  if sink then
    decoded, err = response.streamed(resp, url, sink.records, deliver, top, conn.max_json_depth)
  else
    decoded, err = response.decode(resp, url, conn.max_json_depth, opts.array)
  end
  if decoded then
    info.date = resp.headers.date -- the server's clock: a token's lifetime is counted from it
    return "done", decoded, nil, sent_token, why_none
  end
  -- never followed: the error says where it pointed, and what to set
  err = response.redirect_error(resp.status, resp.headers.location, url, self.url) or err
  return "failed", err, retry.parse_retry_after(resp.headers["retry-after"]), sent_token, why_none
end


return post_attempt
