--- The journal of a store's createReplica in flight, beside its target
-- path (`<path>.create.json`), so that a rerun of the same create after a
-- kill resumes it or unregisters what it made, and never makes a second
-- replica. Written (whole, then renamed into place) at each step:
--
-- * `sending`: before the request leaves, with the replica's name and
--   either `generated` (the name is the store's own, made unique by a random
--   suffix: every replica of that name is this create's) or the ids of the
--   replicas of that name the server already had (`known`): a rerun
--   unregisters the ones of that name made since (the answer never came);
-- * `job`: the job's address (`op`, `op:to_json()`): a rerun re-attaches
--   to the job and builds the store from its result;
-- * `created`: the result is in (`replicaID`, and `replica_info` for the
--   store): a rerun builds the store from the downloaded file when it is
--   still there, else unregisters the replica and starts again.
--
-- The journal goes once the store is in place, or once nothing is left on
-- the server. Internal: geoservices.store.sync.create.
-- @module geoservices.store.sync.create_journal
-- @local
local errors = require "geoservices.base.errors"
local json = require "geoservices.base.json"

local journal = {}

--- The journal's path for a store's path.
function journal.path(path) return path .. ".create.json" end

--- The file the createReplica result is downloaded to (fixed: a rerun finds it).
function journal.download(path) return path .. ".download.json" end

--- The journal of `path`, or false when there is none.
-- @return the table, false, or nil, err (kind "io", code "damaged": it cannot be read)
function journal.read(path)
  local f = io.open(journal.path(path), "rb")
  if not f then return false end
  local text = f:read("a")
  f:close()
  local j = json.decode(text)
  if type(j) ~= "table" or type(j.state) ~= "string" or type(j.service) ~= "string" then
    return nil, errors.new("io", ("%s records a createReplica in flight but cannot be read: check the server's "
      .. "replicas (geoservices replicas SERVICE), unregister what this create made, then remove the file")
      :format(journal.path(path)), { code = "damaged", path = journal.path(path) })
  end
  return j
end

--- Writes the journal (a new file renamed over the old one).
-- @return true, or nil, err (kind "io")
function journal.write(path, j)
  local final = journal.path(path)
  local tmp = final .. ".new"
  local f, msg = io.open(tmp, "wb")
  if not f then return nil, errors.new("io", "cannot write the create's journal: " .. msg, { path = final }) end
  local ok, wmsg = f:write(json.encode(j))
  ok = ok and f:close()
  if ok then ok, wmsg = os.rename(tmp, final) end
  if not ok then
    os.remove(tmp)
    return nil, errors.new("io", "cannot write the create's journal: " .. tostring(wmsg), { path = final })
  end
  return true
end

-- Eight random hex digits (the kernel's random bytes; math.random, seeded
-- at random by Lua 5.4, where there are none).
local function random_hex()
  local f = io.open("/dev/urandom", "rb")
  local bytes = f and f:read(4)
  if f then f:close() end
  if bytes and #bytes == 4 then return (bytes:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end
  return ("%08x"):format(math.random(0, 0x7fffffff))
end

--- The replica name of a store created without one: its file's name and
-- a random suffix (`crew-1-3f9a0c1e` for `.../crew-1.gpkg`).
function journal.unique_name(path)
  local base = path:match("([^/\\]+)$"):gsub("%.[^.]*$", "")
  base = base:gsub("[^%w_%-]", "_")
  if base == "" then base = "store" end
  return base .. "-" .. random_hex()
end

--- Removes the journal and the downloaded result.
function journal.remove(path)
  os.remove(journal.path(path))
  os.remove(journal.download(path))
end

-- The ids of the service's replicas named `name` (nil when the server does not list them).
local function named(client, service, name, opts)
  local list, err = client:list_replicas(service, { timeout = opts.timeout })
  if not list then return nil, err end
  local ids = json.array()
  for _, r in ipairs(list) do
    if r.replicaName == name then ids[#ids + 1] = r.replicaID end
  end
  return ids
end
journal.named = named

local function unregister(client, service, id, opts)
  local gone, err = client:unregister_replica(service, id, { timeout = opts.timeout })
  if gone or err.kind == "server" then return true end -- done, or no longer there
  return nil, err
end

--- Settles what an interrupted create left (`j`, the journal of `path`)
-- before this one goes on: a job re-attached and waited for, a result file
-- still there, or what it made on the server unregistered. A resumed job's
-- result fills `fill` (the store being built, geoservices.store.building) as
-- it downloads.
-- @return `{result =, replica_info =}` to build the store from the download; true to go on with a
--   new createReplica; or nil, err (the journal stays)
function journal.settle(client, path, j, request, opts, fill)
  local service = j.service
  if j.state == "job" and type(j.op) == "string" then
    local op, err = client:resume_create_replica(j.op)
    if not op then return nil, err end
    op.output = journal.download(path)
    local result
    result, err = op:wait{ poll_interval = opts.poll_interval, on_status = opts.on_status,
                           on_progress = opts.on_progress, timeout = opts.timeout, fill = fill }
    if result then return { result = result } end
    if err.kind ~= "job" then
      err.message = ("resuming the createReplica recorded in %s: %s"):format(journal.path(path), err.message)
      return nil, err
    end
    -- the job failed or is gone: whatever it made goes below
  elseif j.state == "created" and type(j.replica_info) == "table" then
    local f = io.open(journal.download(path), "rb")
    if f then
      f:close()
      return { replica_info = j.replica_info }
    end
  end
  if type(j.replicaID) == "string" then
    local ok, err = unregister(client, service, j.replicaID, opts)
    if not ok then return nil, err end
  else
    -- no id: the replicas of its name the server did not have before it
    -- (all of them for a generated name)
    local now, lerr = named(client, service, j.replicaName or request.replicaName, opts)
    if not now then
      return nil, errors.new(lerr.kind, ("%s records a createReplica whose answer never came, and the server's "
        .. "replicas cannot be listed to find what it made (%s); nothing was sent: rerun when the server answers, "
        .. "or check them (geoservices replicas %s), unregister the one named %s this create made, then remove "
        .. "the file"):format(journal.path(path), lerr.message, service, tostring(j.replicaName)),
        { parameter = "path", cause = lerr })
    end
    if not j.generated and type(j.known) ~= "table" then
      return nil, errors.new("invalid", ("%s records a createReplica whose answer never came, and the server's "
        .. "replicas cannot be told apart: check them (geoservices replicas %s), unregister the one this create "
        .. "made, then remove the file"):format(journal.path(path), service), { parameter = "path" })
    end
    local before = {}
    for _, id in ipairs(j.generated and {} or j.known) do before[id] = true end
    for _, id in ipairs(now) do
      if not before[id] then
        local ok, err = unregister(client, service, id, opts)
        if not ok then return nil, err end
      end
    end
  end
  journal.remove(path)
  return true
end

return journal
