--- The emulator: a local server of the interface's four operations, with
-- real state, authorization and fault injection. One thread, driven from Lua:
-- the HTTP layer (geoservices.httpd, libmicrohttpd in external-select mode)
-- hands over complete requests and lets us answer them later, so an injected
-- delay never blocks other connections.
--
--     local emulator = require "geoservices.emulator"
--     local emu = assert(emulator.new{ data = "examples/data/world.json", port = 0 })
--     print(emu:url())  --> http://127.0.0.1:PORT/server
--     emu:run()
local core = require "geoservices.core"
local httpd = require "geoservices.httpd"
local json = require "geoservices.json"
local admin = require "geoservices.emulator.admin"
local faults = require "geoservices.emulator.faults"
local forms = require "geoservices.emulator.forms"
local world = require "geoservices.emulator.world"

local emulator = {}

local Emulator = {}
Emulator.__index = Emulator

-- Operation routes under {base_path}/{admin_path}, by name.
local ADMIN_ROUTES = {
  ["services/getServicesById"] = { name = "getServicesById", handler = admin.get_services_by_id },
  ["notebooks/snapshots/list"] = { name = "snapshots/list", handler = admin.list_snapshots },
}

--- opts: data (path or data table), host ("127.0.0.1"), port (0 = free),
-- base_path ("/server"), admin_path ("admin"), log (function(line) or nil).
function emulator.new(opts)
  local w, err
  if type(opts.data) == "table" then
    w = world.new(opts.data)
  else
    w, err = world.load(opts.data or "examples/data/world.json")
    if not w then return nil, err end
  end
  local host = opts.host or "127.0.0.1"
  local srv, listen_err = httpd.listen{ host = host, port = opts.port or 0 }
  if not srv then return nil, listen_err end
  local self = setmetatable({
    world = w,
    srv = srv,
    host = host,
    base_path = (opts.base_path or "/server"):gsub("/+$", ""),
    admin_path = opts.admin_path or "admin",
    faults = faults.new(),
    attempts = {},  -- route name -> requests received
    total = 0,
    delayed = {},   -- responses waiting for their time: {due =, exchange =, response =}
    log = opts.log,
  }, Emulator)
  return self
end

function Emulator:port()
  return self.srv:port()
end

function Emulator:url()
  return ("http://%s:%d%s"):format(self.host, self:port(), self.base_path)
end

local function json_response(status, value)
  return {
    status = status,
    headers = { ["Content-Type"] = "application/json; charset=utf-8" },
    body = json.encode(value),
  }
end

local function html_response(status, title)
  return {
    status = status,
    headers = { ["Content-Type"] = "text/html; charset=utf-8" },
    body = ("<html><head><title>%s</title></head><body><h1>%s</h1></body></html>"):format(title, title),
  }
end

local function summary(value)
  return { length = #value, head = value:sub(1, 32), tail = value:sub(-32) }
end

-- What the emulator received, summarised (used to check encodings end to end).
local function echo(request)
  local ctype = request.headers["content-type"] or ""
  local fields, files, err
  if ctype:match("^multipart/form%-data") then
    fields, files = forms.decode_multipart(request.body, ctype)
    err = files
  else
    fields, err = forms.decode_urlencoded(request.body)
  end
  if not fields then return { error = { code = 400, message = err } } end
  local out = { method = request.method, content_type = ctype, body_length = #request.body,
                headers = json.object(request.headers), fields = json.object(), files = json.object() }
  for name, value in pairs(fields) do out.fields[name] = summary(value) end
  for name, file in pairs(type(files) == "table" and files or {}) do
    local s = summary(file.data)
    s.filename, s.type = file.filename, file.type
    out.files[name] = s
  end
  return out
end

-- Control routes for tests and users: not part of the interface.
function Emulator:control(path, request)
  if path == "/_emulator/health" then
    return json_response(200, { ok = true })
  elseif path == "/_emulator/requests" then
    return json_response(200, { total = self.total, counts = json.object(self.attempts) })
  elseif path == "/_emulator/reset" then
    self.faults:clear()
    self.attempts, self.total = {}, 0
    return json_response(200, { ok = true })
  elseif path == "/_emulator/echo" then
    return json_response(200, echo(request))
  elseif path == "/_emulator/faults" and request.method == "POST" then
    local fault, msg = json.decode(request.body)
    if not fault then return json_response(400, { error = { code = 400, message = "invalid JSON: " .. msg } }) end
    local ok, err = self.faults:add(fault)
    if not ok then return json_response(400, { error = { code = 400, message = err } }) end
    return json_response(200, { ok = true })
  end
  return html_response(404, "Not Found")
end

-- Finds the operation of a path: {base}/{admin}/<route> or the admin root
-- itself ({base}/{admin}, key ""); nil when none.
function Emulator:route(path)
  local admin_root = self.base_path .. "/" .. self.admin_path
  if path == admin_root or path == admin_root .. "/" then return ADMIN_ROUTES[""] end
  if path:sub(1, #admin_root + 1) == admin_root .. "/" then
    return ADMIN_ROUTES[path:sub(#admin_root + 2)]
  end
  return nil
end

-- Turns a handler's result into the response, honouring the f parameter.
local function operation_response(result, form)
  local f = form.f or "html"
  if f ~= "json" and f ~= "pjson" then
    return html_response(200, "Operation page (use f=json)")
  end
  return json_response(200, result)
end

local function apply_fault(fault, response)
  if fault.kind == "status" then
    local r = html_response(fault.status or 500, fault.title or "Internal Server Error")
    if fault.body then r.body = fault.body end
    for k, v in pairs(fault.headers or {}) do r.headers[k] = v end
    return r
  elseif fault.kind == "error" then
    return json_response(200, { error = {
      code = fault.code or 500, message = fault.message or "Internal error.", details = json.array(),
    } })
  elseif fault.kind == "invalid_json" then
    return { status = 200, headers = { ["Content-Type"] = "application/json" }, body = "{\"services\": [ not json" }
  elseif fault.kind == "truncate" then
    -- a complete HTTP response whose JSON body stops half-way
    response.body = response.body:sub(1, #response.body // 2)
    return response
  elseif fault.kind == "reset" or fault.kind == "reset_mid_body" then
    response.fault = fault.kind
    return response
  end
  return response -- "delay" changes only the timing
end

function Emulator:handle(exchange)
  local request = exchange:request()
  if self.log then self.log(("%s %s"):format(request.method, request.path)) end
  if request.path:sub(1, 11) == "/_emulator/" then
    exchange:respond(self:control(request.path, request))
    return
  end
  local route = self:route(request.path)
  if not route then
    exchange:respond(html_response(404, "Not Found"))
    return
  end
  self.total = self.total + 1
  local attempt = (self.attempts[route.name] or 0) + 1
  self.attempts[route.name] = attempt
  local fault = self.faults:match(route.name, attempt)
  local response
  if request.method ~= "POST" and request.method ~= "GET" then
    response = html_response(405, "Method Not Allowed")
  else
    local form, form_err = forms.decode_urlencoded(request.method == "POST" and request.body or request.query)
    if not form then
      response = json_response(200, { error = { code = 400, message = form_err, details = json.array() } })
    else
      request.form = form
      response = operation_response(route.handler(self, request), form)
    end
  end
  if fault then response = apply_fault(fault, response) end
  if fault and fault.kind == "delay" then
    self.delayed[#self.delayed + 1] = { due = core.monotonic() + (fault.delay_ms or 1000) / 1000,
                                        exchange = exchange, response = response }
  else
    exchange:respond(response)
  end
end

-- Sends the delayed responses whose time has come; returns ms until the next.
function Emulator:flush_delayed()
  local now, wait = core.monotonic(), nil
  local kept = {}
  for _, d in ipairs(self.delayed) do
    if d.due <= now then
      d.exchange:respond(d.response)
    else
      kept[#kept + 1] = d
      local ms = math.ceil((d.due - now) * 1000)
      if not wait or ms < wait then wait = ms end
    end
  end
  self.delayed = kept
  return wait
end

--- Serves for at most `timeout_ms` (0 = only what is ready).
function Emulator:step(timeout_ms)
  local wait = self:flush_delayed()
  if wait and wait < timeout_ms then timeout_ms = wait end
  for _, exchange in ipairs(self.srv:step(timeout_ms)) do
    self:handle(exchange)
  end
  self:flush_delayed()
end

--- Serves until `until_fn()` returns true (forever without one).
function Emulator:run(until_fn)
  while not (until_fn and until_fn()) do self:step(50) end
end

function Emulator:close()
  self.srv:close()
end

return emulator
