--- geoservices.volumes{...}: builds the volumesConfig parameter of configure
--, eight entries, one per component, with the labels the deployment
-- binds persistent volumes by. Default sizes are the documented minimums.
--
--     geoservices.volumes{ storage_class = "managed-premium" }
--     geoservices.volumes{ storage_class = "gp3", sizes = { BLOB = "128Gi" },
--                          components = { QUEUE = { storageClass = "fast" } } }
-- @module geoservices.configure.volumes
local json = require "geoservices.base.json"
local validate = require "geoservices.configure.validate"

local volumes = {}

--- The eight components with their default (minimum) size and the
-- `arcgis/tier` and `arcgis/app` labels the deployment binds volumes by:
-- component -> `{size =, tier =, app =}`.
-- @table DEFAULTS
volumes.DEFAULTS = {
  RELATIONAL_PRIMARY = { size = "16Gi", tier = "storage", app = "postgres" },
  RELATIONAL_SECONDARY = { size = "16Gi", tier = "storage", app = "postgres" },
  BLOB = { size = "32Gi", tier = "storage", app = "ozone" },
  IN_MEM_CACHE = { size = "16Gi", tier = "storage", app = "ignite" },
  QUEUE = { size = "16Gi", tier = "queue", app = "rabbitmq" },
  INDEXER = { size = "16Gi", tier = "storage", app = "elasticsearch" },
  SHARING = { size = "16Gi", tier = "api", app = "sharing" },
  REST_METRICS_API = { size = "30Gi", tier = "storage", app = "prometheus" },
}

local function check_map(opts, name)
  local map = opts[name]
  if map == nil then return {} end
  if type(map) ~= "table" then error(("geoservices.volumes: option '%s' must be a table"):format(name), 3) end
  for component in pairs(map) do
    if not volumes.DEFAULTS[component] then
      error(("geoservices.volumes: option '%s' names unknown component '%s'"):format(name, tostring(component)), 3)
    end
  end
  return map
end

--- Builds the volumesConfig parameter (`geoservices.volumes(opts)`): one
-- entry per component of @{DEFAULTS}, in the spec's order. Use it as
-- `params.volumesConfig = geoservices.volumes{...}.volumesConfig`, or merge
-- the returned table into the parameters.
-- @tparam table opts
-- @tparam string opts.storage_class the storage class of every volume (required unless every
--   component gets one through `components`)
-- @tparam[opt] table opts.sizes component -> size ("64Gi") over the defaults
-- @tparam[opt="DYNAMIC"] string opts.provisioning the provisioningType of every entry
-- @tparam[opt] table opts.labels component -> labels merged over the default labels
-- @tparam[opt] table opts.components component -> fields merged over the built entry (anything can be
--   overridden)
-- @treturn table `{volumesConfig = {eight entries}}`, each `{provisioningType =, component =, size =,
--   storageClass =, labels =}`
-- @raise on misuse: opts not a table, an unknown option or component, a map that is not a table,
--   no storage class for a component
function volumes.build(opts)
  if type(opts) ~= "table" then error("geoservices.volumes: expected an options table", 2) end
  local known = { storage_class = true, sizes = true, provisioning = true, labels = true, components = true }
  for name in pairs(opts) do
    if not known[name] then error(("geoservices.volumes: unknown option '%s'"):format(tostring(name)), 2) end
  end
  local sizes, labels, components = check_map(opts, "sizes"), check_map(opts, "labels"), check_map(opts, "components")
  local entries = json.array()
  for _, component in ipairs(validate.COMPONENTS) do
    local d = volumes.DEFAULTS[component]
    local entry_labels = json.object{ ["arcgis/tier"] = d.tier, ["arcgis/app"] = d.app }
    for k, v in pairs(labels[component] or {}) do entry_labels[k] = v end
    local entry = {
      provisioningType = opts.provisioning or "DYNAMIC",
      component = component,
      size = sizes[component] or d.size,
      storageClass = opts.storage_class,
      labels = entry_labels,
    }
    for k, v in pairs(components[component] or {}) do entry[k] = v end
    if type(entry.storageClass) ~= "string" or entry.storageClass == "" then
      error("geoservices.volumes: option 'storage_class' is required (the name of a storage class)", 2)
    end
    entries[#entries + 1] = entry
  end
  return { volumesConfig = entries }
end

return volumes
