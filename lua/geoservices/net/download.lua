--- GETs a file (a sync result) in Range requests of `conn.download_chunk`
-- bytes, so a reset or a failed chunk is resumed where it stopped instead of
-- starting over; a server that ignores Range simply answers 200 with the
-- whole file. A resumed request answered 200 (not 206) brings the whole
-- file again: the download starts again from byte 0, the C core drops the
-- bytes already received as they arrive (request option resume_from), so
-- nothing is appended twice or fed twice to the record extractor, and the
-- client's observers get a "restart" event that says so. The bytes go to a
-- record sink while they arrive (nothing is kept here: memory stays
-- bounded), to a file, or are returned whole. No token is sent:
-- result addresses are self-contained, and a token never goes in a URL.
-- Failures are retried as reads, through the one retry driver.
local errors = require "geoservices.base.errors"
local response = require "geoservices.net.response"
local retry = require "geoservices.net.retry"
local transport = require "geoservices.net.transport"

local download = {}

-- The whole file came again for a request resumed at `offset`: a message
-- that says what happened (and, when it is shorter than what was received
-- or no longer matches it, why the download cannot go on).
local function restart_error(url, offset, size, why)
  local message = ("the server answered the download resumed from byte %d with the whole file (HTTP 200, "
    .. "not 206 Partial Content)"):format(offset)
  if size then
    message = message .. (": it has %d bytes, shorter than the %d already received; the file changed on the "
      .. "server, synchronize again"):format(size, offset)
  elseif why then
    message = message .. ": it started again from byte 0, but no longer matches the bytes received: " .. why
  else
    message = message .. ": it started again from byte 0 and skipped the bytes already received"
  end
  return errors.new("protocol", message, { code = "range_ignored", url = url, offset = offset })
end

local function http_error(status, url, offset, location)
  local redirect = response.redirect_error(status, location, url, nil, "the result file")
  if redirect then
    redirect.offset = offset
    return redirect
  end
  local kind = (status == 401 or status == 403) and "auth" or "http"
  local message = ("HTTP %d while downloading the result file"):format(status)
  if status == 404 or status == 410 then
    message = message .. ": it is gone (servers delete result files about ten minutes after the job ends); "
      .. "the replica state is unchanged, synchronize again"
  end
  return errors.new(kind, message, { status = status, url = url, offset = offset })
end

--- Downloads `url`.
-- @tparam table conn the connection (see geoservices.net.transport.spec): driver, retry policy,
--   download_chunk (false: one plain GET), max_response_bytes, notify
-- @string url the file's address
-- @tparam table opts
-- @tparam number opts.deadline absolute deadline
-- @tparam[opt] table opts.sink a record sink (`records`, a core.records extractor, and
--   `deliver(kind, layer, value, key)`, or `take(records)` -> true | nil, err that takes the complete
--   records from the extractor itself): the body is fed to it as it arrives; a resumed chunk starts
--   at the first byte the extractor has not seen; an error of take stops the download and is returned
-- @tparam[opt] function opts.on_progress `on_progress(received, total)`: bytes of the whole file so far,
--   and its size (nil until the server announces it)
-- @tparam[opt] function opts.on_retry `on_retry(err, delay, attempts)` before each retry
-- @tparam[opt] table opts.headers request headers sent with every chunk (the token's, to the own origin)
-- @treturn[1] string|boolean the file's bytes, or true with `opts.sink`
-- @return[2] nil
-- @treturn[2] table err: kind "network", "timeout", "cancelled", "http", "auth" (404/410 say the file
--   is gone), "protocol" (a wrong Content-Range, an incomplete chunk, a file larger than
--   max_response_bytes, broken JSON while streaming)
function download.fetch(conn, url, opts)
  local sink = opts.sink
  local deadline = opts.deadline
  local chunk = conn.download_chunk
  local parts, offset = {}, 0
  local file_size -- from Content-Range, for on_progress
  local state = { ambiguous = false }

  local function progress_of()
    if not opts.on_progress then return nil end
    return function(received, total)
      -- whole-file figures across Range chunks: the size is known from the
      -- first chunk's Content-Range (until then a Range answer's length is
      -- the chunk's, not the file's: unknown, unless shorter than the chunk
      -- asked for, when the file ends with it)
      opts.on_progress(offset + received, file_size or (total and (not chunk or total < chunk) and offset + total)
        or nil)
    end
  end

  local function attempt()
    local spec = transport.spec(conn, url, "GET", deadline)
    if sink then
      spec.records = sink.records
      offset = sink.records:fed()
    end
    if opts.file and not sink then -- a resumed chunk starts after the bytes already saved
      local f = io.open(opts.file, "rb")
      if f then
        offset = f:seek("end")
        f:close()
      end
    end
    spec.save_to = opts.file
    if not sink and not opts.file then spec.max_response_bytes = conn.max_held_bytes end
    spec.headers = {}
    for i, h in ipairs(opts.headers or {}) do spec.headers[i] = h end -- the token's header, own origin only
    if chunk then spec.headers[#spec.headers + 1] = ("Range: bytes=%d-%d"):format(offset, offset + chunk - 1) end
    -- a 200 to a resumed request is the whole file: what is here already is dropped
    if offset > 0 then spec.resume_from = offset end
    -- a sink that takes the records itself (a store filling as they arrive) or one they are delivered to
    local resp, msg, code = transport.send(conn, spec, sink and (sink.take and sink or sink.deliver), progress_of())
    if not resp then
      if code == "records_refused" then return "fatal", msg end -- the taker's own error (a bad record, a full disk)
      if code == "save_failed" then -- the local disk's failure: the path and its cause, not sent again
        -- the file a caller asked for, not the temporary one it is written as (sys.make_temp: PATH.partXXXXXX)
        local path = tostring(opts.file):gsub("%.part%w%w%w%w%w%w$", "")
        local text = tostring(msg):gsub("^cannot save the response",
          function() return "cannot save the response to " .. path end, 1)
        return "fatal", errors.new("io", text, { code = code, url = url, path = path })
      end
      local err = transport.failure(msg, code, url)
      return code == "refused" and "fatal" or "failed", err
    end
    local restarted = resp.status == 200 and offset > 0
    if restarted and (resp.skipped or 0) < offset then
      return "fatal", restart_error(url, offset, resp.skipped or 0)
    end
    if sink and resp.json_error and resp.status < 300 then
      if restarted then return "fatal", restart_error(url, offset, nil, resp.json_error) end
      return "fatal", errors.new("protocol", "result file: " .. resp.json_error,
        { url = url, offset = resp.json_offset })
    end
    if restarted and conn.observed() then
      conn.notify{ type = "restart", url = url, offset = offset, error = restart_error(url, offset) }
    end
    local retry_after = retry.parse_retry_after(resp.headers["retry-after"])
    local status, body = resp.status, resp.body
    -- the bytes this answer brought: a sink's and a saved file's are counted
    -- by the C core (the body itself is not kept then)
    local received = (sink or opts.file) and resp.bytes or #body
    if status == 200 then
      -- the whole file: the server does not do ranges (or changed its mind
      -- after the first chunks: the bytes already taken were dropped)
      if sink or opts.file then return "done", true end
      parts[#parts + 1] = body
      return "done", table.concat(parts)
    elseif status == 206 then
      local first, last, size = (resp.headers["content-range"] or ""):match("^bytes (%d+)%-(%d+)/(%d+)")
      first, last, size = tonumber(first), tonumber(last), tonumber(size)
      file_size = size
      if first ~= offset or not last or last < first then
        return "fatal", errors.new("protocol", ("the server answered range %s to a request from byte %d"):format(
          tostring(resp.headers["content-range"]), offset), { url = url })
      elseif received ~= last - first + 1 then
        return "failed", errors.new("protocol", ("result file is not complete: the chunk at byte %d has %d of %d "
          .. "bytes"):format(offset, received, last - first + 1),
          { code = "short_body", url = url, offset = offset + received }), retry_after
      end
      if conn.max_response_bytes and size > conn.max_response_bytes then
        return "fatal", errors.new("protocol", ("result file of %d bytes is larger than the limit of %d bytes"):format(
          size, conn.max_response_bytes), { code = "too_large", url = url })
      end
      if not sink and not opts.file then parts[#parts + 1] = body end
      offset = last + 1
      if opts.on_progress then opts.on_progress(offset, size) end -- the chunk is in: exact figures
      if offset >= size then return "done", (sink or opts.file) and true or table.concat(parts) end
      return "progress"
    elseif status == 416 and offset == 0 then
      return "done", (sink or opts.file) and true or "" -- an empty file has no byte 0
    end
    return "failed", http_error(status, url, offset, resp.headers.location), retry_after
  end

  return retry.run{
    policy = conn.policy, deadline = deadline, sleep = conn.sleep, on_retry = opts.on_retry, attempt = attempt,
    classify = function(err)
      return (retry.should_retry("read", err, state) or err.code == "short_body") and "retry" or "stop"
    end,
  }
end

return download
