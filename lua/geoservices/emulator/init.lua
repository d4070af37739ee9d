--- The emulator: a local server of the interface's operations (replicas,
-- configure, getServicesById, snapshots, tokens), with real state,
-- authorization and fault injection. One thread, driven from Lua:
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
local json = require "geoservices.base.json"
local answers = require "geoservices.emulator.answers"
local attachments = require "geoservices.emulator.attachments"
local admin = require "geoservices.emulator.admin"
local auth = require "geoservices.emulator.auth"
local control = require "geoservices.emulator.control"
local create = require "geoservices.emulator.create"
local definition = require "geoservices.emulator.definition"
local disk = require "geoservices.emulator.disk"
local faults = require "geoservices.emulator.faults"
local forms = require "geoservices.emulator.forms"
local gateway = require "geoservices.emulator.gateway"
local organization = require "geoservices.emulator.organization"
local jobs = require "geoservices.emulator.jobs"
local metadata = require "geoservices.emulator.metadata"
local query = require "geoservices.emulator.query"
local race = require "geoservices.emulator.race"
local replicas = require "geoservices.emulator.replicas"
local settings = require "geoservices.emulator.settings"
local state_file = require "geoservices.emulator.state_file"
local sync = require "geoservices.emulator.sync"
local uploads = require "geoservices.emulator.uploads"
local world = require "geoservices.emulator.world"

local emulator = {}

local Emulator = {}
Emulator.__index = Emulator

-- Operation routes under {base_path}/{admin_path}, by name.
local ADMIN_ROUTES = {
  ["services/getServicesById"] = { name = "getServicesById", handler = admin.get_services_by_id },
  ["services"] = { name = "services", handler = admin.list_services },
  ["notebooks/snapshots/list"] = { name = "snapshots/list", handler = admin.list_snapshots },
  [""] = { name = "root", handler = organization.root_handler },
  ["configure"] = { name = "configure", handler = organization.configure_handler },
}

-- A folder of the administrator directory's services: {admin}/services/<folder>.
local FOLDER_ROUTE = { name = "services/folder", handler = admin.list_folder }

-- A layer's schema changed: {admin}/services/<service>.FeatureServer/<layer>/<operation>
-- (ArcGIS Server) or {admin}/services/<service>/FeatureServer/<layer>/<operation>
-- (hosted), by the operation's name (emulator.definition).
local DEFINITION_ROUTES = {}
for name in pairs(definition.OPERATIONS) do
  DEFINITION_ROUTES[name] = { name = name, handler = definition.handler }
end

-- Routes of feature services under {base_path}/<service>/FeatureServer/...;
-- the captures are passed to the handler after (emulator, request).
local SERVICE_ROUTES = {
  { pattern = "^/([%w_%-]+)/FeatureServer/synchronizeReplica$", name = "synchronizeReplica",
    handler = sync.synchronize },
  { pattern = "^/([%w_%-]+)/FeatureServer/jobs/([%w]+)$", name = "jobs", handler = sync.job_status },
  { pattern = "^/([%w_%-]+)/FeatureServer/replicafiles/([%w_%-]+%.json)$", name = "results",
    handler = sync.result_file },
  -- replicas' lifecycle and the metadata they are checked against (emulator.create, emulator.metadata)
  { pattern = "^/([%w_%-]+)/FeatureServer/createReplica$", name = "createReplica", handler = create.create_replica },
  { pattern = "^/([%w_%-]+)/FeatureServer/replicas/([^/]+)$", name = "replicaInfo", handler = create.replica_info },
  { pattern = "^/([%w_%-]+)/FeatureServer/replicas$", name = "replicas", handler = create.list_replicas },
  { pattern = "^/([%w_%-]+)/FeatureServer/unRegisterReplica$", name = "unRegisterReplica",
    handler = create.unregister },
  -- (read_only: a resource or a query changes no state: nothing is saved after it)
  { pattern = "^/([%w_%-]+)/FeatureServer$", name = "serviceInfo", handler = metadata.service_resource,
    read_only = true },
  { pattern = "^/([%w_%-]+)/FeatureServer/layers$", name = "layersInfo", handler = metadata.layers_resource,
    read_only = true },
  { pattern = "^/([%w_%-]+)/FeatureServer/(%d+)$", name = "layerInfo", handler = metadata.layer_resource,
    read_only = true },
  { pattern = "^/([%w_%-]+)/FeatureServer/(%d+)/query$", name = "query", handler = query.handler, read_only = true },
  { pattern = "^/([%w_%-]+)/FeatureServer/(%d+)/(%d+)/attachments/(%d+)$", name = "attachment",
    handler = attachments.content_handler },
  { pattern = "^/([%w_%-]+)/FeatureServer/(%d+)/queryAttachments$", name = "queryAttachments",
    handler = attachments.query_handler },
  { pattern = "^/([%w_%-]+)/FeatureServer/uploads/upload$", name = "upload", handler = uploads.upload_handler },
  { pattern = "^/([%w_%-]+)/FeatureServer/uploads/([%w%-]+)$", name = "uploadItem", handler = uploads.item_handler },
  -- a server's and a portal's token services
  { pattern = "^/(tokens)/generateToken$", name = "generateToken", handler = auth.generate_token },
  { pattern = "^/(sharing)/rest/generateToken$", name = "generateToken", handler = auth.generate_token },
}

-- A request body, or a multipart file part, larger than this goes to a
-- temporary file instead of memory.
local SPOOL_THRESHOLD = 1024 * 1024

-- The mutable state built from the data: the world plus the feature services.
local function new_state(data)
  local w = world.new(data)
  w.feature_services = replicas.load(data.featureServices)
  return w
end

--- opts: data (path or data table), host ("127.0.0.1"), port (0 = free),
-- base_path ("/server"), admin_path ("admin"), log (function(line) or nil),
-- configure_seconds (seconds each configuration stage takes, 0.5),
-- token_seconds (the longest life of a token from generateToken, 3600),
-- state_file (save the mutable state there after every change and reload
-- it on start: a restarted emulator keeps its replicas, jobs and result
-- files), tls_cert / tls_key (PEM texts: serve HTTPS), max_body (largest
-- request body, bytes; 1 GiB; larger ones get 413), spool_threshold (a
-- request body or multipart file part larger than this, 1 MiB, goes to a
-- temporary file instead of memory), tmpdir (where: $TMPDIR or /tmp),
-- settings (the behaviour settings that differ from the documented
-- defaults: emulator.settings; /_emulator/reset comes back to these).
function emulator.new(opts)
  local data = opts.data
  if type(data) ~= "table" then
    local err
    data, err = world.read(opts.data or "examples/data/world.json")
    if not data then return nil, err end
  end
  local ok, w = pcall(new_state, data)
  if not ok then return nil, w end
  local start_settings, settings_err = settings.new(opts.settings)
  if not start_settings then return nil, settings_err end
  local host = opts.host or "127.0.0.1"
  local srv, listen_err = httpd.listen{ host = host, port = opts.port or 0, tls_cert = opts.tls_cert,
                                        tls_key = opts.tls_key, max_body = opts.max_body,
                                        spool_threshold = opts.spool_threshold or SPOOL_THRESHOLD,
                                        tmpdir = opts.tmpdir }
  if not srv then return nil, listen_err end
  local self = setmetatable({
    data = data,
    world = w,
    settings = settings.copy(start_settings),
    start_settings = start_settings,
    jobs = jobs.new(),
    result_files = {}, -- "<service>/<name>.json" -> {path =, touched = monotonic time of the last use}
    next_sweep = 0,    -- when expired result files are looked for next (monotonic)
    next_result = 1,
    srv = srv,
    host = host,
    base_path = (opts.base_path or "/server"):gsub("/+$", ""),
    admin_path = opts.admin_path or "admin",
    faults = faults.new(),
    attempts = {},  -- route name -> requests received
    total = 0,
    delayed = {},   -- responses waiting for their time: {due =, exchange =, response =}
    held = {},      -- requests the gateway answered and the server runs later (emulator.gateway)
    races = {},     -- another replica's edits synchronized before a route's next request (emulator.race)
    log = opts.log,
    configure_seconds = opts.configure_seconds,
    token_seconds = opts.token_seconds,
    organization = organization.new{ stage_seconds = opts.configure_seconds },
    state_file = opts.state_file,
    spool_threshold = opts.spool_threshold or SPOOL_THRESHOLD,
    scheme = opts.tls_cert and "https" or "http",
  }, Emulator)
  if self.state_file then
    local loaded, load_err = self:load_state()
    -- the whole state written now, before anyone waits: later saves write what changed
    if loaded then loaded, load_err = self:save_state() end
    if not loaded then
      srv:close()
      return nil, load_err
    end
  end
  return self
end

function Emulator:port()
  return self.srv:port()
end

function Emulator:url()
  return ("%s://%s:%d%s"):format(self.scheme, self.host, self:port(), self.base_path)
end

-- ---------------------------------------------------------------- persistence

-- Where result files live: next to the state file when there is one (they
-- must survive a restart), else temporary files.
function Emulator:result_path(name)
  if not self.state_file then return os.tmpname() end
  local dir = self.state_file .. ".results"
  os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "'")
  return dir .. "/" .. name
end

--- Saves the mutable state to the state file, if there is one: after every
-- request that can change it and after every step of a job, before the
-- answer goes out; it is on disk when this returns, and a SIGKILL (or a
-- power cut) at any moment leaves the previous or the new state whole,
-- never a torn one. What it writes is what changed (emulator.state_file).
function Emulator:save_state()
  if not self.state_file then return true end
  self.state_writer = self.state_writer or state_file.new(self.state_file)
  local ok, err = self.state_writer:save{
    feature_services = self.world.feature_services,
    jobs = self.jobs,
    result_files = self.result_files,
    next_result = self.next_result,
    settings = self.settings,
    organization = self.organization,
    uploads = uploads.dump(),
    races = self.races,
  }
  if not ok then io.stderr:write("emulator: cannot save state: ", tostring(err), "\n") end
  return ok, err
end

local function shell_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

--- Loads the state file when it exists (a restart); a missing one is a first start.
-- Temporary files of atomic writes cut short by a kill are removed.
function Emulator:load_state()
  os.execute(("rm -f %s.tmp?????? %s/*.tmp?????? 2>/dev/null"):format(shell_quote(self.state_file),
    shell_quote(self.state_file .. ".results")))
  local state, err = state_file.read(self.state_file)
  if not state and not err then return true end
  if not state then return nil, "state file " .. self.state_file .. ": " .. tostring(err) end
  self.world.feature_services = state.feature_services
  self.jobs = jobs.restore(state.jobs)
  -- a restart gives every result file a fresh lifetime: the monotonic clock of the
  -- last use is not comparable across processes (older state files: a path only)
  self.result_files = {}
  for key, entry in pairs(state.result_files or {}) do
    self.result_files[key] = { path = type(entry) == "table" and entry.path or entry, touched = core.monotonic() }
  end
  self.next_result = state.next_result
  -- the saved settings (changed while it ran) over the start-up ones
  self.settings = settings.copy(self.start_settings)
  for k, v in pairs(state.settings or {}) do self.settings[k] = v end
  self.organization = organization.restore(state.organization)
  organization.restore_admin(self)
  uploads.restore(state.uploads)
  self.races = state.races or {}
  return true
end

local json_response = answers.json

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

-- The summary of a file part kept in its own file (path, size): read from it.
local function file_summary(path, size)
  local f = assert(io.open(path, "rb"))
  local head = f:read(32) or ""
  f:seek("set", math.max(0, size - 32))
  local tail = f:read(32) or ""
  f:close()
  return { length = size, head = head, tail = tail, spooled = true }
end

-- Where a request's form comes from: its body (a string), or the file the
-- HTTP layer spooled a large body to.
local function body_source(request)
  if request.body_path then return { path = request.body_path, size = request.body_size } end
  return request.body or ""
end

-- The whole body as a string (control routes: small JSON bodies).
local function body_text(request)
  if request.body then return request.body end
  if not request.body_path then return "" end
  return disk.read(request.body_path) or ""
end

-- Decodes the form of a request: multipart (fields and file parts, a large
-- part in a file of the exchange) or urlencoded (the body of a POST, else
-- the query). Returns fields, files (multipart only) or nil, err.
function Emulator:decode_form(request, exchange)
  local ctype = request.headers["content-type"] or ""
  if request.method == "POST" and ctype:match("^multipart/form%-data") then
    return forms.decode_multipart(body_source(request), ctype, {
      part_threshold = self.spool_threshold,
      tmpfile = function() return exchange:tmpfile() end,
    })
  end
  return forms.decode_urlencoded(request.method == "POST" and body_source(request) or request.query)
end

-- What the emulator received, summarised (used to check encodings end to end).
function Emulator:echo(request, exchange)
  local ctype = request.headers["content-type"] or ""
  local fields, files = self:decode_form(request, exchange)
  if not fields then return { error = { code = 400, message = files } } end
  local out = { method = request.method, content_type = ctype,
                body_length = request.body_size or #(request.body or ""),
                headers = json.object(request.headers), fields = json.object(), files = json.object() }
  for name, value in pairs(fields) do out.fields[name] = summary(value) end
  for name, file in pairs(type(files) == "table" and files or {}) do
    local s = file.path and file_summary(file.path, file.size) or summary(file.data)
    s.filename, s.type = file.filename, file.type
    out.files[name] = s
  end
  return out
end

--- Writes a result file (atomically, like the state file that names it)
-- and returns the URL it is served at.
function Emulator:store_result(service_name, text)
  local name = ("r%05d_%08x.json"):format(self.next_result, math.random(0, 0x7fffffff))
  local path = self:result_path(name)
  assert(core.write_file_atomic(path, text))
  self.next_result = self.next_result + 1
  self.result_files[service_name .. "/" .. name] = { path = path, touched = core.monotonic() }
  return ("%s/%s/FeatureServer/replicafiles/%s"):format(self:url(), service_name, name)
end

local function expired(self, entry, now)
  return now - entry.touched > self.settings.result_lifetime_s
end

--- The path of a result file ("<service>/<name>"), or nil when there is
-- none: a file unused for longer than the setting result_lifetime_s is
-- deleted first, as the vendor's server removes files of its output
-- directory not accessed for 10 minutes (emulator.settings). A read counts
-- as a use.
function Emulator:result_file(key)
  local entry, now = self.result_files[key], core.monotonic()
  if not entry then return nil end
  if expired(self, entry, now) then
    os.remove(entry.path)
    self.result_files[key] = nil
    self:save_state()
    return nil
  end
  entry.touched = now
  return entry.path
end

--- Deletes the expired result files (at most once a second); true when any went.
function Emulator:expire_results()
  local now = core.monotonic()
  if now < self.next_sweep then return false end
  self.next_sweep = now + 1
  local gone = false
  for key, entry in pairs(self.result_files) do
    if expired(self, entry, now) then
      os.remove(entry.path)
      self.result_files[key] = nil
      gone = true
    end
  end
  return gone
end

function Emulator:count_results()
  local n = 0
  for _ in pairs(self.result_files) do n = n + 1 end
  return n
end

function Emulator:remove_results()
  for _, entry in pairs(self.result_files) do os.remove(entry.path) end
  self.result_files = {}
end

function Emulator.not_found()
  return { status = 404, headers = { ["Content-Type"] = "application/json" },
           body = json.encode{ error = { code = 404, message = "Not found.", details = json.array() } } }
end

--- Back to the state of the data file and the start-up settings, as if freshly started.
function Emulator:reset()
  self.faults:clear()
  self.attempts, self.total = {}, 0
  self.world = new_state(self.data)
  self.settings = settings.copy(self.start_settings)
  self.jobs = jobs.new()
  self.organization = organization.new{ stage_seconds = self.configure_seconds }
  self:remove_results()
  self.held, self.gateway_seen, self.races = {}, 0, {}
  uploads.remove_all()
end

-- Finds the operation of a path: {base}/{admin}/<route>, the admin root
-- itself ({base}/{admin}, key ""), or a feature service route. Returns the
-- route and its captures, or nil.
function Emulator:route(path)
  local admin_root = self.base_path .. "/" .. self.admin_path
  if path == admin_root or path == admin_root .. "/" then return ADMIN_ROUTES[""], {} end
  if path:sub(1, #admin_root + 1) == admin_root .. "/" then
    local rest = path:sub(#admin_root + 2)
    local svc, layer, op = rest:match("^services/([%w_%-]+)%.FeatureServer/(%d+)/(%w+)$")
    if not svc then svc, layer, op = rest:match("^services/([%w_%-]+)/FeatureServer/(%d+)/(%w+)$") end
    if svc and DEFINITION_ROUTES[op] then return DEFINITION_ROUTES[op], { svc, layer, op } end
    local folder = rest:match("^services/([%w_%-]+)$")
    if folder and not ADMIN_ROUTES[rest] then return FOLDER_ROUTE, { folder } end
    return ADMIN_ROUTES[rest], {}
  end
  if path:sub(1, #self.base_path + 1) == self.base_path .. "/" then
    local rest = path:sub(#self.base_path + 1)
    for _, route in ipairs(SERVICE_ROUTES) do
      local captures = { rest:match(route.pattern) }
      if #captures > 0 then return route, captures end
    end
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
  if response.file and fault.kind ~= "delay" then -- faults that cut a body need it in memory
    response.body = assert(disk.read(response.file))
    response.file = nil
  end
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

-- A bug in a handler answers 500 and keeps the emulator serving. With a
-- state file, the state goes back to the last one saved: a request that
-- raised half-way may have changed it, and what is saved later must never
-- carry half a request.
function Emulator:handle(exchange)
  local ok, err = pcall(self.serve, self, exchange)
  if not ok then
    io.stderr:write("emulator: internal error: ", tostring(err), "\n")
    if self.state_file then
      local reloaded, load_err = pcall(self.load_state, self)
      if not reloaded then io.stderr:write("emulator: cannot reload the state: ", tostring(load_err), "\n") end
    end
    pcall(exchange.respond, exchange, html_response(500, "Internal Server Error"))
  end
end

--- Runs the work of async jobs whose time has come (sync.advance) and saves
-- the state when a job changed it. Called on every step and before every
-- request, so a job imports and exports on its own, polled or not.
function Emulator:advance_jobs()
  local changed = false
  for _, job in ipairs(self.jobs:pending()) do
    local ok, moved = pcall(sync.advance, self, job)
    if not ok then
      io.stderr:write("emulator: job ", tostring(job.id), ": ", tostring(moved), "\n")
      job.outcome, job.imported, job.exported, job.plan, job.import = "Failed", true, true, nil, nil
      moved = true
    end
    changed = changed or moved
  end
  if changed then self:save_state() end
end

function Emulator:serve(exchange)
  local request = exchange:request()
  if self.log then
    self.log(("%s %s%s"):format(request.method, request.path, request.query and request.query ~= "" and
      ("?" .. request.query) or ""))
  end
  self:advance_jobs()
  if request.path:sub(1, 11) == "/_emulator/" then
    if request.path ~= "/_emulator/echo" then request.body = body_text(request) end
    exchange:respond(control.handle(self, request.path, request, exchange) or html_response(404, "Not Found"))
    self:save_state()
    return
  end
  local route, captures = self:route(request.path)
  if not route then
    exchange:respond(html_response(404, "Not Found"))
    return
  end
  self.total = self.total + 1
  -- when it reached the server (the monotonic clock: one timeline across restarts on this machine);
  -- the change log keeps it with each edit the request applies (emulator.import), so that a
  -- request a gateway or a job runs late is told apart from one sent after another crew's edit
  request.arrived = request.arrived or core.monotonic()
  local attempt = (self.attempts[route.name] or 0) + 1
  self.attempts[route.name] = attempt
  local fault = self.faults:match(route.name, attempt)
  local response
  if request.method ~= "POST" and request.method ~= "GET" then
    response = html_response(405, "Method Not Allowed")
  else
    -- configure's body is multipart: its fields are the form, its file
    -- parts request.files (a part larger than spool_threshold has path and
    -- size instead of data: a file that lives until the request ends)
    local form, form_err = self:decode_form(request, exchange)
    if form and form_err then request.files = form_err end
    if not form then
      response = json_response(200, { error = { code = 400, message = form_err, details = json.array() } })
    elseif fault and not faults.runs_operation(fault) then
      response = { status = 200, headers = {}, body = "" } -- refused: the operation does not run
    else
      request.form = form
      if race.run_before(self, route.name, sync.synchronize) then self:save_state() end
      response = gateway.intercept(self, route, request, captures)
    end
    if not response then
      local result, raw = route.handler(self, request, table.unpack(captures))
      response = raw or operation_response(result, form)
      if not route.read_only then self:save_state() end
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
  self:advance_jobs()
  if self:expire_results() then self:save_state() end
  local ran, held_wait = gateway.run_due(self)
  if ran then self:save_state() end
  local wait = self:flush_delayed()
  if held_wait and (not wait or held_wait < wait) then wait = held_wait end
  if wait and wait < timeout_ms then timeout_ms = wait end
  for _, exchange in ipairs(self.srv:step(timeout_ms)) do
    self:handle(exchange)
  end
  forms.release() -- answered: a large request's memory goes back now
  self:flush_delayed()
end

--- Serves until `until_fn()` returns true (forever without one).
function Emulator:run(until_fn)
  while not (until_fn and until_fn()) do self:step(50) end
end

function Emulator:close()
  if not self.state_file then self:remove_results() end -- with a state file they outlive this process
  if not self.state_file then uploads.remove_all() end -- uploaded items (emulator.uploads)
  self.srv:close()
end

return emulator
