-- A feature service's and a layer's resources as real servers send them,
-- normalized; and the checks createReplica makes against them before
-- anything is sent.
local service = require "geoservices.sync.service"

-- The service resource of a hosted feature service (abridged from a real one).
local function parcels(caps)
  return {
    currentVersion = 11.1, serviceDescription = "", hasVersionedData = false, supportsDisconnectedEditing = true,
    syncEnabled = true,
    syncCapabilities = caps or { supportsRegisteringExistingData = true, supportsSyncDirectionControl = true,
                                 supportsPerLayerSync = true, supportsPerReplicaSync = true,
                                 supportsSyncModelNone = true, supportsRollbackOnFailure = false,
                                 supportsAsync = true, supportsAttachmentsSyncDirection = true },
    capabilities = "Create,Delete,Query,Sync,Update,Uploads,Editing",
    spatialReference = { wkid = 102100, latestWkid = 3857 },
    layers = { { id = 0, name = "Parcels", parentLayerId = -1, geometryType = "esriGeometryPolygon" },
               { id = 1, name = "Hydrants", geometryType = "esriGeometryPoint" } },
    tables = { { id = 2, name = "Inspections" } },
  }
end

describe("service metadata", function()
  describe("the service resource", function()
    it("keeps every member, makes the capabilities booleans and prints one line", function()
      local info = service.build_service_info("Parcels", parcels())
      assert.equal(11.1, info.currentVersion)
      assert.is_true(info.syncEnabled)
      assert.is_false(info.syncCapabilities.supportsRollbackOnFailure)
      assert.is_nil(info.syncCapabilities.supportsBiDirectionalSyncForServer) -- not said: unknown
      assert.same({ "Create", "Delete", "Query", "Sync", "Update", "Uploads", "Editing" }, info.capability_list)
      assert.equal("Inspections", info:layer(2).name)
      assert.is_nil(info:layer(7))
      assert.equal("service Parcels: 3 layers (0 Parcels, 1 Hydrants, 2 Inspections (table)), sync enabled: "
        .. "perReplica, perLayer, async, direction control", tostring(info))
    end)

    it("reads capabilities sent as text, and sync from the capabilities when syncEnabled is missing", function()
      local doc = parcels{ supportsPerReplicaSync = "false", supportsAsync = "true" }
      doc.syncEnabled = nil
      local info = service.build_service_info("P", doc)
      assert.is_true(info.syncEnabled)
      assert.is_false(info.syncCapabilities.supportsPerReplicaSync)
      assert.is_true(info.syncCapabilities.supportsAsync)
      doc.capabilities = "Query"
      doc.syncEnabled = true -- contradicted by the capabilities: no Sync, no replicas
      assert.is_false(service.build_service_info("P", doc).syncEnabled)
    end)
  end)

  describe("the layer resource", function()
    it("takes the spatial reference from the extent, the id fields from their types", function()
      local info = service.build_layer_info("Parcels", {
        id = "0", name = "Parcels", type = "Feature Layer", geometryType = "esriGeometryPolygon",
        extent = { xmin = 0, ymin = 0, xmax = 1, ymax = 1, spatialReference = { wkid = 102100, latestWkid = 3857 } },
        fields = { { name = "FID", type = "esriFieldTypeOID" }, { name = "GUID_", type = "esriFieldTypeGlobalID" },
                   { name = "NAME", type = "esriFieldTypeString", length = 50 } },
      })
      assert.equal(0, info.id)
      assert.equal(3857, info.spatialReference.latestWkid)
      assert.equal("FID", info.objectIdField)
      assert.equal("GUID_", info.globalIdField)
      assert.equal(50, info:field("name").length)
      assert.is_false(info.is_table)
      assert.equal("layer 0 Parcels of Parcels: esriGeometryPolygon, wkid 3857, 3 fields (FID, GUID_)", tostring(info))
    end)

    it("keeps the names the server gives, and knows a table", function()
      local info = service.build_layer_info("S", {
        id = 3, name = "Inspections", type = "Table", objectIdField = "OBJECTID", globalIdField = "GlobalID",
        sourceSpatialReference = { wkid = 4326 }, fields = {},
      })
      assert.is_true(info.is_table)
      assert.equal("OBJECTID", info.objectIdField)
      assert.equal(4326, info.spatialReference.wkid) -- the source's, the last resort
    end)
  end)

  describe("createReplica's checks", function()
    local function check(caps, plan, doc_changes)
      local doc = parcels(caps)
      for k, v in pairs(doc_changes or {}) do doc[k] = v end
      return service.check_create(service.build_service_info("Parcels", doc), plan)
    end

    it("refuses what the service says it cannot do, naming the parameter and the capability", function()
      local err = check({ supportsPerReplicaSync = false, supportsPerLayerSync = true },
                        { layers = { 0 }, model = "perReplica" })
      assert.equal("invalid", err.kind)
      assert.equal("syncModel", err.parameter)
      assert.equal("supportsPerReplicaSync", err.capability)
      assert.equal("syncModel: perReplica is not supported by this service; use perLayer (the service Parcels says "
        .. "supportsPerReplicaSync = false)", err.message)
      err = check({ supportsPerLayerSync = false }, { layers = { 0 }, model = "perLayer" })
      assert.equal("syncModel", err.parameter)
      err = check({ supportsSyncDirectionControl = false }, { layers = { 0 }, model = "perReplica",
                                                              direction = "download" })
      assert.equal("syncDirection", err.parameter)
      err = check({ supportsAsync = false }, { layers = { 0 }, model = "perReplica", async = true })
      assert.equal("async", err.parameter)
      err = check(nil, { layers = { 0, 5 }, model = "perReplica" })
      assert.equal("layers", err.parameter)
      assert.equal("layers: layer 5 is not a layer or table of the service Parcels", err.message)
      err = check(nil, { layers = { 0 }, model = "perReplica" }, { capabilities = "Query", syncEnabled = false })
      assert.equal("service", err.parameter)
      assert.equal("Sync", err.capability)
    end)

    it("holds nothing against a capability the server does not state", function()
      assert.is_nil(check({}, { layers = { 0, 2 }, model = "perLayer", direction = "upload", async = true }))
      assert.is_nil(check(nil, { layers = { 0 }, model = "perReplica", direction = "bidirectional" }))
      assert.is_nil(check({ supportsSyncDirectionControl = false }, { layers = { 0 }, model = "perReplica",
                                                                     direction = "bidirectional" }))
    end)

    it("defaults to perReplica, or perLayer where that is all the service does", function()
      assert.equal("perReplica", service.default_model(nil))
      assert.equal("perReplica", service.default_model(service.build_service_info("P", parcels())))
      assert.equal("perLayer", service.default_model(service.build_service_info("P",
        parcels{ supportsPerReplicaSync = false })))
    end)
  end)

  it("refuses service names that are path tricks", function()
    assert.equal("service", service.check_name("../admin").parameter)
    assert.equal("service", service.check_name("Parcels?x=1").parameter)
    assert.equal("service", service.check_name("a b").parameter)
    assert.equal("service", service.check_name("").parameter)
    assert.is_nil(service.check_name("Hosted/Parcels"))
    assert.has_error(function() service.check_name(5, "service_info") end,
      "service_info: service name must be a string")
  end)
end)
