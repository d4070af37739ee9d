--- The emulator's behaviour settings: where INTERFACE.md says "not shown",
-- each default is what the vendor's documentation or its own clients show
-- (the source is cited next to it), and the kinder answer is one setting
-- away, so the specs can exercise both. A setting is changed by
-- `emulator.new{settings = {...}}`, a command-line flag (emulator.main) or
-- POST /_emulator/settings {name = value} (JSON null restores the default).
local settings = {}

local function one_of(...)
  local names, allowed = { ... }, {}
  for _, v in ipairs(names) do allowed[v] = true end
  local expected = "one of " .. table.concat(names, ", ")
  return function(v)
    if allowed[v] then return v end
    return nil, expected
  end
end

local function boolean(v)
  if type(v) == "boolean" then return v end
  if v == "true" then return true end
  if v == "false" then return false end
  return nil, "true or false"
end

local function number_at_least(min)
  return function(v)
    local n = tonumber(v)
    if n and n >= min and n == n and n ~= math.huge then return n end
    return nil, ("a number >= %s"):format(min)
  end
end

local function enum_prefix(v)
  if type(v) == "string" and v:match("^%a*$") then return v end
  return nil, "letters only (esri, svc)"
end

-- phase name -> milliseconds, e.g. {ImportChanges = 5000}
local function phase_durations(v)
  if type(v) ~= "table" then return nil, "an object of status name -> milliseconds" end
  local out = {}
  for name, ms in pairs(v) do
    local n = tonumber(ms)
    if type(name) ~= "string" or not n or n < 0 then
      return nil, "an object of status name -> milliseconds"
    end
    out[name] = n
  end
  return out
end

local function outcome(v)
  if v == "Completed" or v == "Failed" or v == "CompletedWithErrors" then return v end
  return nil, "Completed, Failed or CompletedWithErrors"
end

--- The documented defaults and what each accepts.
settings.DEFAULTS = {
  -- Enumerated values are answered with the vendor's prefix (esriTransportTypeUrl,
  -- esriReplicaResponseTypeEdits...), as every response example of the vendor's
  -- REST reference shows (https://developers.arcgis.com/rest/services-reference/enterprise/
  -- response-type-for-sync-operations.htm); INTERFACE.md's "svc" is its neutral stand-in.
  -- Requests are read with any prefix, or none ("url").
  enum_prefix = "esri",
  -- No transportType: URL transport, for synchronizeReplica and createReplica. The
  -- ArcGIS API for Python's SyncManager.synchronize: "The default value is
  -- esriTransportTypeUrl" (https://developers.arcgis.com/python/api-reference/
  -- arcgis.features.managers.html#syncmanager); the REST reference's createReplica and
  -- synchronizeReplica: with async true, results are always returned as with
  -- esriTransportTypeUrl (https://developers.arcgis.com/rest/services-reference/enterprise/
  -- create-replica.htm, .../synchronize-replica.htm). "embedded" is the kinder option.
  default_transport = "url",
  -- Per-edit results (addResults, updateResults, deleteResults) are only ever in
  -- embedded answers (INTERFACE.md 2.1: "Present when the response type is an edits type
  -- and the transport is embedded"): never in URL result files, never with NoEdits.
  -- "all" lists every edit; "failures" only the skipped ones ("All edits that were
  -- skipped are returned in the results", https://developers.arcgis.com/rest/
  -- services-reference/enterprise/rollbackonfailure-and-sync-models.htm); "none" none.
  edit_results = "all",
  -- rollbackOnFailure absent: true (the whole request or nothing). The vendor's sources
  -- show both values (the REST page above describes both; the Runtime SDK's
  -- OfflineMapSyncParameters.RollbackOnFailure "The default is false",
  -- https://developers.arcgis.com/net/api-reference/api/net/Esri.ArcGISRuntime/
  -- Esri.ArcGISRuntime.Tasks.Offline.OfflineMapSyncParameters.RollbackOnFailure.html),
  -- so both are settings the specs run.
  -- true + a failed edit: nothing applied, an error answer naming the failed edits;
  -- false: failed edits skipped and reported, the rest applied (the page above).
  rollback_default = true,
  -- Reported as syncCapabilities.supportsRollbackOnFailure. false: the parameter is
  -- ignored and the sync model fixes the behaviour (the page above: perLayer only ->
  -- false behaviour, perReplica only -> true behaviour; with both models supported the
  -- replica's own model decides, our reading of it).
  supports_rollback_on_failure = true,
  -- What a request rolled back for a failed edit answers: true, an error whose details
  -- name each failed edit with its GlobalID and the server's words; false, only the
  -- documented code 1003 "Operation rolled back." (https://developers.arcgis.com/rest/
  -- services-reference/enterprise/feature-service-error-codes.htm), naming no edit: the
  -- client must find the refused edits itself (by halves). The vendor's pages show no
  -- such answer whole, so both are settings the specs run.
  rollback_names_edits = true,
  -- A string longer than its String field's length: true refuses that edit, code 1016
  -- "Setting of value for <field> failed." (the error codes page above), as a geodatabase
  -- column of that length does; false (the default for now: specs written before it send
  -- longer values, spec/sync/attempt_spec's APNs for one) stores it whole.
  field_lengths = false,
  -- The rest of a service's sync capability set, each over what the world file says
  -- for every service (nil: the world file's, else metadata.DEFAULT_SYNC_CAPABILITIES);
  -- the service resource advertises them and the emulator does what it advertises:
  -- createReplica refuses a sync model the service lacks ("if supportsPerLayerSync is
  -- true and supportsPerReplicaSync is false, you can choose only a perLayer sync
  -- model", the rollbackOnFailure page above) and synchronizeReplica refuses a replica
  -- of such a model; without supportsAsync, async=true is refused by both operations;
  -- without supportsSyncDirectionControl, a direction other than the replica's is
  -- refused. The vendor's example service resource and the public WildfireSync service
  -- (https://sampleserver6.arcgisonline.com/arcgis/rest/services/Sync/WildfireSync/
  -- FeatureServer) say supportsRollbackOnFailure false and perLayer only.
  supports_per_replica_sync = nil,
  supports_per_layer_sync = nil,
  supports_async = nil,
  supports_sync_direction_control = nil,
  -- A gateway in front of the server (a web adaptor or load balancer whose timeout is
  -- shorter than the work): "504" answers 504 Gateway Timeout at once, "drop" closes
  -- the connection without an answer; either way the server goes on and applies the
  -- request gateway_delay_ms later (an async kick-off: the job is submitted then). A
  -- gateway's timeout does not stop the server behind it ("the request continues to
  -- run on the server", https://enterprise.arcgis.com/en/web-adaptor/latest/install/
  -- iis/configure-arcgis-web-adaptor-timeout.htm, our reading). gateway_every: every
  -- Nth synchronizeReplica request meets it (1: each). "off" by default.
  gateway = "off",
  gateway_delay_ms = 2000,
  gateway_every = 1,
  -- A result file not read for this long is deleted; its URL answers 404 ("files that
  -- have not been accessed by any process for more than 10 minutes are removed",
  -- https://developers.arcgis.com/rest/services-reference/enterprise/
  -- error-handling-with-sync-operations.htm).
  result_lifetime_s = 600,
  -- Time each async job status lasts before the next (section 3's values, in the
  -- order jobs.lua moves them): a real import takes seconds, not milliseconds;
  -- tests shorten it (--job-step-ms). job_phase_ms overrides one status's time.
  job_step_ms = 1000,
  job_phase_ms = {},
  job_outcome = nil,      -- "Failed" or "CompletedWithErrors" instead of "Completed"
  ranges = true,          -- result files answer Range requests (206); false = always the whole file
  -- Where a createReplica result's layer entry writes its "id": JSON gives object
  -- members no order (RFC 8259 section 4) and the vendor documents none (its
  -- createReplica examples happen to show "id" first). "last" (features, attachments,
  -- then id: what a key-sorting encoder writes) is the harder case for a client that
  -- must know the layer before storing its features; "first" is the other.
  layer_id_position = "last",
  -- What a replica's next download carries after an administrator changed a layer's
  -- fields (addToDefinition, deleteFromDefinition: emulator.definition). The vendor's
  -- pages on those operations and on sync say nothing of it; false (the default): a
  -- schema change is no data change, the next download carries only the features
  -- edited since (with every field the layer now has), and a client reads an added
  -- field's values itself; true: the change counts as an update of every feature of
  -- the layer in a new generation, and the next download carries them all.
  schema_change_touches_features = false,
}

local CHECKS = {
  enum_prefix = enum_prefix,
  default_transport = one_of("url", "embedded"),
  edit_results = one_of("all", "failures", "none"),
  rollback_default = boolean,
  supports_rollback_on_failure = boolean,
  rollback_names_edits = boolean,
  field_lengths = boolean,
  supports_per_replica_sync = boolean,
  supports_per_layer_sync = boolean,
  supports_async = boolean,
  supports_sync_direction_control = boolean,
  gateway = one_of("off", "504", "drop"),
  gateway_delay_ms = number_at_least(0),
  gateway_every = function(v)
    local n = math.tointeger(tonumber(v))
    if n and n >= 1 then return n end
    return nil, "an integer >= 1"
  end,
  result_lifetime_s = number_at_least(0),
  job_step_ms = number_at_least(0),
  job_phase_ms = phase_durations,
  job_outcome = outcome,
  ranges = boolean,
  layer_id_position = one_of("first", "last"),
  schema_change_touches_features = boolean,
}

local function copy(v)
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = copy(x) end
  return t
end

--- Checks one setting: returns its value (converted: "true" -> true, "5" -> 5)
-- or nil, message. A nil value means "back to the default".
function settings.check(name, value)
  local check = CHECKS[name]
  if not check then return nil, "unknown setting " .. tostring(name) end
  if value == nil then return copy(settings.DEFAULTS[name]) end
  local v, expected = check(value)
  if v == nil then return nil, ("setting %s: expected %s, got %s"):format(name, expected, tostring(value)) end
  return v
end

--- The defaults with `overrides` (checked) applied: a new table, or nil, message.
function settings.new(overrides)
  local s = copy(settings.DEFAULTS)
  for name, value in pairs(overrides or {}) do
    local v, err = settings.check(name, value)
    if err then return nil, err end
    s[name] = v
  end
  return s
end

--- A copy of a settings table (the start-up ones, restored by /_emulator/reset).
settings.copy = copy

--- The transport of a request's transportType: "url" or "embedded", read
-- with any prefix or none (esriTransportTypeUrl, svcTransportTypeURL, url);
-- absent -> `default`. Returns nil for anything else.
function settings.transport_of(value, default)
  if value == nil or value == "" then return default end
  local v = tostring(value):lower()
  if v == "url" or v:match("transporttypeurl$") then return "url" end
  if v == "embedded" or v:match("transporttypeembedded$") then return "embedded" end
  return nil
end

--- The answered name of a transport ("esri", "url" -> "esriTransportTypeUrl").
function settings.transport_name(prefix, transport)
  return prefix .. (transport == "url" and "TransportTypeUrl" or "TransportTypeEmbedded")
end

return settings
