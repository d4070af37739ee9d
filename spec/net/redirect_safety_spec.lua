-- Issue 35: a redirect never carries the token or the edits anywhere,
-- through libcurl itself (no decoded table stands in for the transfer). A
-- service that answers an edit-carrying synchronizeReplica POST, or a read,
-- with 301, 302, 303, 307 or 308 pointing to another origin (another port
-- of 127.0.0.1) or to another path of its own origin: nothing reaches the
-- other origin, the POST is not sent again anywhere (its edits reach the
-- server once at most), and the client says where the redirect pointed.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local TOKEN = "redirect-secret-token-7f3a"
local REPLICA = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"

describe("a redirect through libcurl", function()
  local serve, stop_all = helper.scripted_servers()
  teardown(stop_all)

  local STATUSES = { 301, 302, 303, 307, 308 }
  local service, other -- one of each for every case: /<case>/... tells the cases apart
  setup(function()
    other = serve{ { path = "/*", responses = { { json = { ok = true } } } } }
    local routes = { { path = "/moved/*", responses = { { json = { ok = true } } } } }
    for _, status in ipairs(STATUSES) do
      for _, where in ipairs{ "other", "same" } do
        local case = ("%d-%s"):format(status, where)
        local target = (where == "other" and other.root or "{ROOT}/moved") .. "/" .. case
          .. "/server/Parcels/FeatureServer/synchronizeReplica"
        routes[#routes + 1] = { path = "/" .. case .. "/*", responses = {
          { status = status, headers = { Location = target }, body = "moved" } } }
      end
    end
    service = serve(routes)
  end)

  local function edits()
    local e = geoservices.edits()
    e:add(0, { attributes = { APN = "redirected" } })
    return e
  end

  local function requests_to(s, prefix)
    local list = {}
    for _, r in ipairs(s:requests()) do
      if r.path:sub(1, #prefix) == prefix then list[#list + 1] = r end
    end
    return list
  end

  for _, status in ipairs(STATUSES) do
    for _, where in ipairs{ "other", "same" } do
      local case = ("%d-%s"):format(status, where)
      it(("HTTP %d to %s: the edits' POST and its token go nowhere else"):format(status,
        where == "other" and "another origin" or "the same origin"), function()
        local c = geoservices.client{ url = service.root .. "/" .. case .. "/server", token = TOKEN }
        local r, err = c:synchronize_replica("Parcels", { replicaID = REPLICA, replicaServerGen = 1,
                                                          edits = edits() })
        assert.is_nil(r)
        -- what the user is told never holds the token
        assert.is_nil(tostring(err):find(TOKEN, 1, true))
        -- the service saw one POST; nothing went to the other origin nor to the moved path
        local posts = requests_to(service, "/" .. case .. "/")
        assert.equal(1, #posts)
        assert.equal("POST", posts[1].method)
        assert.equal(0, #requests_to(other, "/" .. case .. "/"), "a request reached the other origin")
        assert.equal(0, #requests_to(service, "/moved/" .. case .. "/"), "the redirect was followed")
        -- the one POST carried the edits (and the token: to the service's own origin)
        assert.matches("redirected", posts[1].body, 1, true)
        c:close()
      end)
    end
  end

  it("a read redirected to another origin is not followed either (the token stays home)", function()
    local c = geoservices.client{ url = service.root .. "/302-other/server", token = TOKEN }
    local before = #other:requests()
    local r = c:replica_info("Parcels", REPLICA)
    assert.is_nil(r)
    assert.is_true(#requests_to(service, "/302-other/") >= 1)
    assert.equal(before, #other:requests())
    c:close()
  end)

  it("client:sync with a state file: the redirected edits go nowhere else, the generation stays", function()
    local dir = helper.tmp_dir()
    local state = dir .. "/state.json"
    helper.write_file(state, json.encode{ service = "Parcels", replicaID = REPLICA, model = "perReplica",
                                          replicaServerGen = 1 })
    local c = geoservices.client{ url = service.root .. "/307-other/server", token = TOKEN }
    local sent_before = #requests_to(service, "/307-other/server/Parcels/FeatureServer/synchronizeReplica")
    local other_before = #other:requests()
    local r = c:sync(state, edits(), { timeout = 10 })
    assert.is_nil(r)
    assert.equal(other_before, #other:requests())
    assert.equal(sent_before + 1, #requests_to(service, "/307-other/server/Parcels/FeatureServer/synchronizeReplica"))
    assert.equal(1, json.decode(helper.read_all(state)).replicaServerGen)
    c:close()
    os.execute("rm -rf " .. helper.shell_quote(dir))
  end)
end)
