-- The fields of the benchmark's records (spec/bench/generate.lua and
-- generate_replica.lua write F11..F20 on some records only), as a layer
-- resource lists them.
local fields = {}

function fields.replica()
  local f = {
    { name = "OBJECTID", type = "esriFieldTypeOID" },
    { name = "GlobalID", type = "esriFieldTypeGlobalID", length = 38 },
    { name = "OWNER", type = "esriFieldTypeString", length = 64 },
    { name = "STREET", type = "esriFieldTypeString", length = 64 },
    { name = "ACRES", type = "esriFieldTypeDouble" },
    { name = "ASSESSED", type = "esriFieldTypeInteger" },
    { name = "UPDATED", type = "esriFieldTypeDate" },
    { name = "VERIFIED", type = "esriFieldTypeSmallInteger" },
    { name = "NOTES", type = "esriFieldTypeString", length = 255 },
    { name = "ZONE", type = "esriFieldTypeString", length = 8 },
    { name = "DESCRIPTION", type = "esriFieldTypeString", length = 255 },
    { name = "SURVEYOR", type = "esriFieldTypeString", length = 64 },
  }
  for i = 11, 20 do f[#f + 1] = { name = "F" .. i, type = "esriFieldTypeInteger" } end
  return f
end

return fields
