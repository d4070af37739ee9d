--- synchronizeReplica (4.1): the operation, async operations, and
-- client:sync, which runs it from a replica state file and advances the
-- generations only after the whole result has been received and parsed.
local errors = require "geoservices.errors"
local edits_mod = require "geoservices.edits"
local jobs = require "geoservices.jobs"
local json = require "geoservices.json"
local replica_mod = require "geoservices.replica"
local sync_params = require "geoservices.sync_params"
local sync_result = require "geoservices.sync_result"
local transport = require "geoservices.transport"

local sync = {}

local function check_service(service)
  if type(service) ~= "string" then error("synchronize_replica: service name must be a string", 3) end
  if service == "" or service:find("[/?#%s]") then
    return errors.invalid("service", "must be a service name such as Parcels or Folder/Parcels without "
      .. "'?', '#' or spaces")
  end
  -- a folder is allowed (Folder/Service) but not path tricks
  if service:find("%.%.") or service:sub(1, 1) == "/" then
    return errors.invalid("service", "must not contain '..' or start with '/'")
  end
  return nil
end

local function service_path(service)
  return service:gsub("%%", "%%25")
end

--- client:synchronize_replica(service, params, opts) -> result | operation | nil, err
-- params: the interface's parameter names (see sync_params); opts: wait
-- (default true), poll_interval, timeout (overall seconds), on_status,
-- output (save the result file there), strict (failed edits are an error).
function sync.synchronize_replica(self, service, params, opts)
  opts = opts or {}
  local bad = check_service(service)
  if bad then return nil, bad end
  local fields, err = sync_params.encode(params, self.enum_prefix)
  if not fields then return nil, err end
  if params.dataFormat == "sqlite" and not opts.output then
    return nil, errors.invalid("output", "is required with dataFormat = sqlite: a geodatabase is saved, not parsed")
  end
  if opts.output ~= nil and type(opts.output) ~= "string" then
    return nil, errors.invalid("output", "must be a file path")
  end
  local deadline = opts.timeout and (transport.now() + opts.timeout) or nil
  local url = ("%s/%s/FeatureServer/synchronizeReplica"):format(self.url, service_path(service))
  local request_timeout = self.timeout
  if deadline then request_timeout = math.min(request_timeout, opts.timeout) end
  local doc, post_err = self:post(url, fields, { timeout = request_timeout })
  if not doc then return nil, post_err end
  local status_url = sync_result.status_url(doc)
  if status_url then
    local op = jobs.operation(self, {
      status_url = status_url, service = service, replicaID = params.replicaID, strict = opts.strict,
      output = opts.output, on_done = opts.on_done, replica_path = opts.replica_path,
      poll_interval = opts.poll_interval, on_status = opts.on_status, deadline = deadline,
    })
    if opts.wait == false then return op end
    return op:wait{ poll_interval = opts.poll_interval, on_status = opts.on_status,
                    timeout = deadline and math.max(0, deadline - transport.now()) or nil }
  end
  local result, finish_err = sync_result.finish(self, doc, nil, { output = opts.output })
  if not result then return nil, finish_err end
  if opts.on_done then
    local ok, done_err = opts.on_done(result)
    if not ok then return nil, done_err end
  end
  if opts.strict and #result.failed_edits > 0 then return nil, sync_result.strict_error(result) end
  return result
end

-- Replicas with a synchronization in flight in this process: a second one
-- is refused, as the server forbids it too.
local active = {}

local function advance_replica(r, params)
  return function(result)
    if params.closeReplica then result.closed = true end
    return r:advance(result)
  end
end

--- client:sync(replica, edits, opts): synchronizes a replica state (a path
-- or geoservices.replica object) with optional edits (builder, table or
-- JSON). opts: those of synchronize_replica plus `params` (extra or
-- overriding parameters, e.g. transportType, syncDirection, async).
function sync.sync(self, r, edits, opts)
  opts = opts or {}
  if type(r) == "string" then
    local loaded, err = replica_mod.open(r)
    if not loaded then return nil, err end
    r = loaded
  end
  if getmetatable(r) ~= replica_mod.Replica then error("client:sync: expected a replica or a state file path", 2) end
  if r.state.closed then
    return nil, errors.invalid("replica", ("%s was closed by an earlier sync"):format(r.replicaID))
  end
  local params = r:request_params()
  for k, v in pairs(opts.params or {}) do params[k] = v end
  if edits ~= nil and not (edits_mod.is(edits) and edits:is_empty()) then params.edits = edits end
  if active[r.replicaID] then
    return nil, errors.invalid("replica", ("a synchronization of %s is already running"):format(r.replicaID))
  end
  local call_opts = {}
  for k, v in pairs(opts) do call_opts[k] = v end
  call_opts.params = nil
  call_opts.on_done = advance_replica(r, params)
  call_opts.replica_path = r.path
  active[r.replicaID] = true
  local ok, result, err = pcall(sync.synchronize_replica, self, r.service, params, call_opts)
  active[r.replicaID] = nil
  if not ok then error(result, 0) end
  return result, err
end

--- client:resume_sync(json_text) -> operation: re-attaches to an async job
-- described by op:to_json() (for example after a restart).
function sync.resume_sync(self, text)
  local state, msg = json.decode(text)
  if type(state) ~= "table" or type(state.status_url) ~= "string" then
    return nil, errors.invalid("operation", "not a saved sync operation: " .. tostring(msg or "no status_url"))
  end
  local fields = {
    status_url = state.status_url, service = state.service, replicaID = state.replicaID,
    strict = state.strict, output = state.output, replica_path = state.replica_path,
  }
  if state.replica_path then
    local r, err = replica_mod.open(state.replica_path)
    if not r then return nil, err end
    fields.on_done = advance_replica(r, {})
  end
  return jobs.operation(self, fields)
end

return sync
