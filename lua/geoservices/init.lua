--- lua-geoservices: a client for a GIS server's REST interface: replicas
-- (create, synchronize, list, unregister; kept in a state file or a
-- GeoPackage store), configure, getServicesById and notebook snapshots.
-- This façade is the only module users require.
--
--     local geoservices = require "geoservices"
--     local client = geoservices.client{ url = "https://host/server", token = "..." }
--     local services, err = client:get_services_by_id{ "id1", "id2" }
--
-- Runtime failures return `nil, err` (geoservices.errors: `err.kind`,
-- `err.message`, `tostring(err)` one line); misuse (wrong argument types,
-- unknown options) raises.
-- @module geoservices
local core = require "geoservices.core"
local client = require "geoservices.net.client"
local configure = require "geoservices.configure"
local create = require "geoservices.sync.create"
local edits = require "geoservices.sync.edits"
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"
local loop = require "geoservices.base.loop"
local pp = require "geoservices.base.pp"
local redact = require "geoservices.base.redact"
local replica = require "geoservices.sync.replica"
local replicas = require "geoservices.sync.replicas"
local services = require "geoservices.services"
local service_meta = require "geoservices.sync.service"
local sync = require "geoservices.sync"
local token = require "geoservices.net.token"
local volumes = require "geoservices.configure.volumes"

--- Values of the module.
-- @table geoservices
-- @field VERSION the library's version (a string)
-- @field null the JSON null (`cjson.null`), as decoded values carry it and as it is sent
-- @field json the geoservices.json module (exact JSON encoding and decoding)
-- @field errors the geoservices.errors module
-- @field SECURITY_QUESTIONS the 14 security questions of configure, securityQuestionIdx = position
-- @field pp the pretty-printer: `geoservices.pp(value)` (see geoservices.pp)
-- @field loop the geoservices.loop module (tasks, deadlines, a host loop's scheduler); its common
--   functions are also fields of their own below (run, spawn, sleep...)
-- @field redact the geoservices.redact module: `geoservices.redact.register(value)` makes a secret of
--   the caller's scrubbed from every error, log, dry run and printout
local geoservices = {
  VERSION = core.VERSION,
  null = json.null,
  json = json,
  errors = errors,
  SECURITY_QUESTIONS = configure.SECURITY_QUESTIONS,
  volumes = volumes.build,
  pp = pp, -- geoservices.pp(value): pretty-prints any result (see geoservices.pp)
  -- The shared base lives in lua/geoservices/base/ (required as geoservices.base.*); the
  -- modules a user reaches are these fields, under the names the reference gives them.
  loop = loop,
  redact = redact,
}

-- The client users get: the connection (geoservices.net.client) plus one
-- method per operation, each handing the call to its operation module. The
-- operations are written against the connection's methods only.
local Client = setmetatable({}, { __index = client.Client })
Client.__index = Client
Client.__name = client.Client.__name
Client.__tostring = client.Client.__tostring
Client.__close = client.Client.__close

function Client:synchronize_replica(service, params, opts)
  return sync.synchronize_replica(self, service, params, opts)
end
function Client:sync(r, changes, opts) return sync.sync(self, r, changes, opts) end
function Client:resume_sync(text)
  -- a saved createReplica job goes back to createReplica's own tail
  local saved = type(text) == "string" and json.decode(text)
  if type(saved) == "table" and saved.operation == "createReplica" then
    return create.resume_create_replica(self, text)
  end
  return sync.resume_sync(self, text)
end
function Client:create_replica(service, params, opts) return create.create_replica(self, service, params, opts) end
function Client:resume_create_replica(text) return create.resume_create_replica(self, text) end
function Client:service_info(service, opts) return service_meta.service_info(self, service, opts) end
function Client:layer_info(service, id, opts) return service_meta.layer_info(self, service, id, opts) end
function Client:replica_info(service, id, opts) return replicas.replica_info(self, service, id, opts) end
function Client:list_replicas(service, opts) return replicas.list_replicas(self, service, opts) end
function Client:unregister_replica(service, id, opts) return replicas.unregister_replica(self, service, id, opts) end
function Client:get_services_by_id(ids, opts) return services.get_services_by_id(self, ids, opts) end
function Client:list_services(opts) return services.list_services(self, opts) end
function Client:list_snapshots(item_id, opts) return services.list_snapshots(self, item_id, opts) end
function Client:configure(params, opts) return configure.configure(self, params, opts) end
function Client:configure_status(opts) return configure.status(self, opts) end
function Client:wait_configured(opts) return configure.wait_configured(self, opts) end

--- Builds the volumesConfig parameter of configure (see geoservices.configure.volumes.build).
-- @function volumes
-- @tparam table opts storage_class (required), sizes, provisioning, labels, components
-- @treturn table `{volumesConfig = {eight entries}}`
-- @raise on misuse: an unknown option or component, no storage class

--- A new edits builder (see geoservices.edits).
-- @function edits
-- @treturn geoservices.sync.edits.Edits an empty builder: `:add`, `:update`, `:delete`, `:add_attachment`...
-- @raise never
geoservices.edits = edits.new
--- The replica store (geoservices.store): `geoservices.store.create(client, path, params, opts)`,
-- `geoservices.store.open(path)`; a store's `:sync(client)`.
-- @field store
geoservices.store = require "geoservices.store"
--- A new GlobalID: a random (version 4) UUID in braces, uppercase.
-- @function new_global_id
-- @treturn string the GlobalID
-- @raise when the kernel's random source cannot be read
geoservices.new_global_id = edits.new_global_id
--- Epoch milliseconds (UTC) of os.time() seconds or a date table.
-- @function date
-- @tparam number|table value seconds since the epoch, or a date table (year, month, day; hour, min, sec)
-- @treturn integer milliseconds since the epoch, UTC
-- @raise when value is neither, or year, month or day is not an integer
geoservices.date = edits.date

--- Opens (or, with `init`, creates) a replica state file.
-- @string path the state file (JSON)
-- @tparam[opt] table init the fields of a new state (service, replicaID, model, replicaServerGen or layers,
--   syncDirection), used only when the file does not exist
-- @return the replica (geoservices.sync.replica.Replica), or nil, err (kind "io" or "invalid")
-- @raise when path is not a string
function geoservices.replica(path, init)
  return replica.open(path, init)
end

--- Creates a client; see the geoservices.net.client module for the options.
-- @tparam table opts url (required), admin_path, token (string, function or geoservices.token provider),
--   or username and password (tokens from generateToken), bearer, timeout, ca_file, insecure, enum_prefix, ...
-- @return the client: its methods are the operations (get_services_by_id, list_snapshots,
--   synchronize_replica / sync / resume_sync, create_replica / resume_create_replica, service_info /
--   layer_info, replica_info / unregister_replica, configure / configure_status / wait_configured)
-- @raise on misuse: an unknown option, a wrong type, a missing or non-http(s) url
function geoservices.client(opts)
  return client.new(opts, Client)
end

--- A generateToken provider (see geoservices.token.new): tokens for a
-- username and password, kept until shortly before they expire; give it to
-- clients as their `token`.
-- @function token
-- @tparam table opts url (or token_url), endpoint ("server" or "portal"), username, password (string or
--   function), client, referer, expiration (minutes)
-- @treturn geoservices.token.TokenProvider the provider; `provider:get()` without a client uses a
--   connection of its own (geoservices.net.client, made from the options timeout, ca_file, insecure,
--   user_agent)
-- @raise on misuse: an unknown option, no username or password
function geoservices.token(opts)
  return token.new(opts, client.new)
end

-- Concurrency (geoservices.loop): tasks on one thread, a host loop driving the core.

--- Runs fn(...) as a task and drives the core until it and every task it
-- spawned have finished (geoservices.loop.run).
-- @function run
-- @func fn the main function
-- @param ... its arguments
-- @return fn's results (or nil, err of kind "cancelled")
-- @raise what fn raises, after the other tasks were cancelled
geoservices.run = loop.run            -- run(fn, ...): fn as a task, until it and its tasks end

--- Starts a concurrent task inside a task (geoservices.loop.spawn).
-- @function spawn
-- @func fn the task's function
-- @param ... its arguments
-- @treturn geoservices.loop.Task the handle: `:join()`, `:cancel()`, `:status()`
-- @raise outside a task
geoservices.spawn = loop.spawn        -- spawn(fn, ...) -> task (:join(), :cancel()), inside a task

--- Waits: yields inside a task, blocks outside (geoservices.loop.sleep).
-- @function sleep
-- @number seconds how long
-- @treturn[1] boolean true
-- @return[2] nil
-- @treturn[2] table err: kind "timeout" (the deadline cut it short) or "cancelled"
-- @raise when seconds is not a number
geoservices.sleep = loop.sleep        -- sleep(seconds): yields inside a task, blocks outside

--- Runs functions concurrently (geoservices.loop.gather).
-- @function gather
-- @tparam {func,...} fns the functions
-- @treturn table values[i], the first result of fns[i] (`n` = #fns)
-- @treturn table errs[i], its error
-- @raise when fns is not a table
geoservices.gather = loop.gather      -- gather{fn, ...} -> values, errs (in order)

--- coroutine.wrap whose operations still yield to the scheduler (geoservices.loop.wrap).
-- @function wrap
-- @func fn the generator's body
-- @treturn function the generator
-- @raise the generator raises what its body raises
geoservices.wrap = loop.wrap          -- coroutine.wrap whose operations still yield to the scheduler

--- A scheduler for a host loop: `:spawn`, `:fds`, `:timeout`, `:action`, `:step` (geoservices.loop.scheduler).
-- @function scheduler
-- @treturn geoservices.loop.Scheduler the scheduler
-- @raise never
geoservices.scheduler = loop.scheduler -- for a host loop: :spawn, :fds, :timeout, :action, :step

--- Runs fn(...) with one deadline for every operation inside (geoservices.loop.with_timeout).
-- @function with_timeout
-- @number seconds the time allowed
-- @func fn the function
-- @param ... its arguments
-- @return what fn returns
-- @raise when seconds is not a number; what fn raises
geoservices.with_timeout = loop.with_timeout -- with_timeout(seconds, fn, ...): one deadline for all inside

return geoservices
