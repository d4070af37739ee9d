--- A gateway in front of the emulated server (setting `gateway`, see
-- emulator.settings): a web adaptor or load balancer whose timeout is
-- shorter than the server's work. The synchronizeReplica requests it meets
-- (every `gateway_every`th) are answered at once, 504 Gateway Timeout
-- ("504") or a connection closed without an answer ("drop"), while the
-- server goes on: the request is run `gateway_delay_ms` later, as if it had
-- arrived then (an async kick-off submits its job then; a sync applies its
-- edits then). Its answer goes nowhere. A request held is in the server's
-- memory only: an emulator killed before its time never applies it, as a
-- server that dies with a request in flight.
-- @module geoservices.emulator.gateway
-- @local
local core = require "geoservices.core"

local gateway = {}

local ROUTES = { synchronizeReplica = true }

local GATEWAY_TIMEOUT = [[<html><head><title>504 Gateway Time-out</title></head>
<body><h1>504 Gateway Time-out</h1><p>The upstream server did not answer in time.</p></body></html>]]

--- Whether the gateway holds this request: nil when it passes; else the
-- response the client gets now (the request is kept in `emu.held` until
-- its time: gateway.run_due).
function gateway.intercept(emu, route, request, captures)
  local s = emu.settings
  if not ROUTES[route.name] or s.gateway == nil or s.gateway == "off" then return nil end
  emu.gateway_seen = (emu.gateway_seen or 0) + 1
  if emu.gateway_seen % (s.gateway_every or 1) ~= 0 then return nil end
  emu.held[#emu.held + 1] = {
    due = core.monotonic() + (s.gateway_delay_ms or 0) / 1000, route = route, captures = captures,
    request = { method = request.method, path = request.path, query = request.query, headers = request.headers,
                form = request.form, arrived = request.arrived },
  }
  if s.gateway == "drop" then
    return { status = 200, headers = {}, body = "", fault = "reset" } -- closed before any answer byte
  end
  return { status = 504, headers = { ["Content-Type"] = "text/html; charset=utf-8" }, body = GATEWAY_TIMEOUT }
end

--- Runs the held requests whose time has come (their answers are
-- dropped); returns true when any ran (the state is to be saved) and the
-- milliseconds until the next one (nil: none held).
function gateway.run_due(emu)
  if #emu.held == 0 then return false, nil end
  local now, kept, ran, wait = core.monotonic(), {}, false, nil
  for _, h in ipairs(emu.held) do
    if h.due <= now then
      local ok, err = pcall(h.route.handler, emu, h.request, table.unpack(h.captures))
      if not ok then io.stderr:write("emulator: a request held by the gateway failed: ", tostring(err), "\n") end
      ran = true
    else
      kept[#kept + 1] = h
      local ms = math.ceil((h.due - now) * 1000)
      if not wait or ms < wait then wait = ms end
    end
  end
  emu.held = kept
  return ran, wait
end

--- How many requests the gateway holds (for /_emulator/state).
function gateway.count(emu)
  return #emu.held
end

return gateway
