-- getServicesById's result: which ids asked for the server did not return
-- (list.missing), with a stand-in client; nothing is sent.
local services = require "geoservices.services"

-- A client whose post answers `services` (and records what it was asked).
local function client_answering(list)
  local c = { asked = {} }
  function c.admin_url(_, path) return "http://h/server/admin/" .. path end
  function c.post(_, url, fields, opts)
    c.asked[#c.asked + 1] = { url = url, fields = fields, opts = opts }
    return { services = list }
  end
  return c
end

local function missing_of(asked, returned_ids)
  local list = {}
  for i, id in ipairs(returned_ids) do list[i] = type(id) == "table" and id or { id = id, serviceName = "S" .. i } end
  local got = assert(services.get_services_by_id(client_answering(list), asked))
  return got.missing, got
end

describe("services.get_services_by_id", function()
  it("names nothing missing when every id came back, in any order and any case", function()
    assert.same({}, (missing_of({ "a1", "b2" }, { "a1", "b2" })))
    assert.same({}, (missing_of({ "a1", "b2" }, { "b2", "a1" })))
    assert.same({}, (missing_of({ "A1", "b2" }, { "a1", "B2" })))
    assert.same({}, (missing_of({ "a1" }, { "a1", "extra" })))
  end)

  it("names the ids not returned, in the order asked", function()
    assert.same({ "b2" }, (missing_of({ "a1", "b2" }, { "a1" })))
    assert.same({ "a1", "c3" }, (missing_of({ "a1", "b2", "c3" }, { "B2" })))
    assert.same({ "a1" }, (missing_of({ "a1" }, {})))
    assert.same({ "b2" }, (missing_of({ "a1", "b2" }, { "a1", "a1" })))
  end)

  it("skips entries that are not objects or have no id", function()
    assert.same({ "a1" }, (missing_of({ "a1" }, { "not an object" })))
    assert.same({ "a1" }, (missing_of({ "a1" }, { { serviceName = "no id" } })))
    assert.same({}, (missing_of({ "7" }, { { id = 7 } })))
  end)

  it("sends the ids joined by commas, trimmed, as a read", function()
    local c = client_answering({ { id = "a1" }, { id = "b2" } })
    assert(services.get_services_by_id(c, { " a1", "b2 " }))
    assert(services.get_services_by_id(c, "a1, b2", { timeout = 5 }))
    assert(services.get_services_by_id(c, { "a1" }))
    assert.equal("a1,b2", c.asked[1].fields.serviceIDs)
    assert.equal("a1,b2", c.asked[2].fields.serviceIDs)
    assert.equal("a1", c.asked[3].fields.serviceIDs)
    assert.equal("read", c.asked[1].opts.retry)
    assert.same({ retry = "read", timeout = 5 }, c.asked[2].opts)
    assert.equal("http://h/server/admin/services/getServicesById", c.asked[1].url)
  end)

  it("trims from any position on, never touching the caller's list, and reads a proxy list", function()
    local c = client_answering({ { id = "a1" }, { id = "b2" }, { id = "c3" } })
    local ids = { "a1", " b2", "c3 " }
    local got = assert(services.get_services_by_id(c, ids))
    assert.equal("a1,b2,c3", c.asked[1].fields.serviceIDs)
    assert.same({}, got.missing)
    assert.same({ "a1", " b2", "c3 " }, ids)
    local proxy = setmetatable({}, { __index = { "c3", "a1" } })
    got = assert(services.get_services_by_id(c, proxy))
    assert.equal("c3,a1", c.asked[2].fields.serviceIDs)
    assert.same({}, got.missing)
    got = assert(services.get_services_by_id(c, { "a1", "x9", nil, "b2" })) -- the ids up to the first hole
    assert.equal("a1,x9", c.asked[3].fields.serviceIDs)
    assert.same({ "x9" }, got.missing)
  end)

  it("prints the list and each service as one line", function()
    local _, list = missing_of({ "a1", "b2" }, { "a1" })
    assert.equal("1 of 2 services: S1.nil; not returned: b2", tostring(list))
    assert.matches("^service S1%.nil %[a1%]", tostring(list[1]))
  end)
end)
