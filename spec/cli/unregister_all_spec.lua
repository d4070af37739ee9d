-- unRegisterReplica with replicaID "*" (new in 10.5.1: "all replicas
-- accessible by the logged in user are removed", the vendor's reference
-- page): client:unregister_replica(service, "*") sends it (it was refused as
-- a bad id), and `geoservices replica unregister SERVICE '*'` asks on a
-- terminal, takes --yes without one, and without either sends nothing
-- (exit 2). Against a documented-server double (spec/support/scripted_server.py)
-- that logs what it receives; a pty (spec/support/pty_answer.py) for the
-- terminal.
local geoservices = require "geoservices"
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote

local function absolute(path)
  return (path:gsub("[^;]+", function(entry)
    if entry:sub(1, 1) == "/" then return entry end
    return helper.ROOT .. "/" .. entry
  end))
end

local function form_of(body)
  local out = {}
  for pair in (body or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    local function unescape(s)
      return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
    end
    out[unescape(k)] = unescape(v)
  end
  return out
end

describe("unregistering every replica of a service ('*')", function()
  local serve, stop_all = helper.scripted_servers()
  after_each(stop_all)

  local function server()
    return serve{
      { method = "POST", path = "/server/Parcels/FeatureServer/unRegisterReplica",
        responses = { { json = { success = true } } } },
      { method = "POST", path = "/server/Parcels/FeatureServer/replicas",
        responses = { { json = {
          { replicaName = "crew-1", replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}" },
          { replicaName = "crew-2", replicaID = "{5E1A0C2B-1111-4A5B-9C8D-000000000002}" } } } } },
    }
  end

  local function unregisters(s)
    local list = {}
    for _, r in ipairs(s:requests()) do
      if r.path:find("unRegisterReplica", 1, true) then list[#list + 1] = form_of(r.body) end
    end
    return list
  end

  it("client:unregister_replica(service, '*') sends replicaID=*", function()
    local s = server()
    local client = geoservices.client{ url = s.url, token = "alice-token" }
    local done, err = client:unregister_replica("Parcels", "*")
    client:close()
    assert.is_nil(err)
    assert.equal("every replica of Parcels the user can reach unregistered", tostring(done))
    local sent = unregisters(s)
    assert.equal(1, #sent)
    assert.equal("*", sent[1].replicaID)
    -- other ids are still checked before anything is sent
    local _, bad = geoservices.client{ url = s.url, token = "t" }:unregister_replica("Parcels", "a b")
    assert.equal("invalid", bad.kind)
    assert.truthy(bad.message:find("or * for every replica", 1, true), bad.message)
    assert.equal(1, #unregisters(s))
  end)

  it("against the emulator: the replicas are gone, and a store of one of them is refused by the server", function()
    local world = helper.store_world()
    world.start()
    finally(world.stop)
    local st = world.create("crew-a")
    world.create("crew-b")
    local client = world.client()
    assert.is_true(#assert(client:list_replicas("Parcels")) >= 2)
    assert(client:unregister_replica("Parcels", "*"))
    assert.equal(0, #assert(client:list_replicas("Parcels")))
    local _, err = st:sync(client)
    st:close()
    assert.is_table(err)
    assert.truthy(tostring(err.message):find("does not exist", 1, true) or tostring(err.message):find("unregistered",
      1, true), tostring(err.message))
  end)

  it("the CLI without a terminal refuses '*' without --yes: exit 2, nothing sent", function()
    local s = server()
    local r = helper.run_cli{ "--url", s.url, "--token", "t", "replica", "unregister", "Parcels", "*" }
    assert.equal(2, r.code, r.out .. r.err)
    assert.truthy(r.err:find("give --yes to confirm", 1, true), r.err)
    assert.truthy(r.err:find("nothing was sent", 1, true), r.err)
    assert.equal(0, #s:requests())
  end)

  it("the CLI with --yes unregisters them all, and says so (--json too)", function()
    local s = server()
    local r = helper.run_cli{ "--url", s.url, "--token", "t", "replica", "unregister", "Parcels", "*", "--yes" }
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("every replica of Parcels the user can reach unregistered", 1, true), r.out)
    r = helper.run_cli{ "--json", "--url", s.url, "--token", "t", "replica", "unregister", "Parcels", "*", "--yes" }
    assert.equal(0, r.code, r.out .. r.err)
    local ev = helper.find_events(helper.events(r.out), "replica")[1]
    assert.same({ "*", "Parcels", true }, { ev.replicaID, ev.service, ev.unregistered })
    local sent = unregisters(s)
    assert.equal(2, #sent)
    assert.equal("*", sent[1].replicaID)
  end)

  it("the CLI with --dry-run shows the request and sends nothing, without asking", function()
    local s = server()
    local r = helper.run_cli{ "--dry-run", "--url", s.url, "--token", "t", "replica", "unregister", "Parcels", "*" }
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("replicaID = *", 1, true), r.out)
    assert.equal(0, #s:requests())
  end)

  describe("on a terminal", function()
    local function answered(s, answer)
      local args = { "--url", s.url, "--token", "t", "replica", "unregister", "Parcels", "*" }
      local quoted = {}
      for i, a in ipairs(args) do quoted[i] = q(a) end
      local p = io.popen(("cd %s && env -u GEOSERVICES_TTY -u GEOSERVICES_TOKEN -u GEOSERVICES_URL LUA_PATH=%s "
        .. "LUA_CPATH=%s " .. helper.PYTHON .. " spec/support/pty_answer.py 30 %s %s lua5.4 -e %s /dev/null %s"):format(
          q(helper.ROOT), q(absolute(package.path)), q(absolute(package.cpath)), q("Type yes to go on: "), q(answer),
          q('os.exit(require("geoservices.cli").main(arg))'), table.concat(quoted, " ")))
      local result = json.decode(p:read("a"))
      p:close()
      return result
    end

    it("asks, naming the replicas listed now, and unregisters them on 'yes'", function()
      local s = server()
      local r = answered(s, "yes")
      assert.is_true(r.prompted, r.output)
      assert.equal(0, r.exit, r.output)
      assert.truthy(r.output:find("Unregister every replica of Parcels you can reach (2 listed now: crew-1, crew-2)?",
        1, true), r.output)
      assert.truthy(r.output:find("every replica of Parcels the user can reach unregistered", 1, true), r.output)
      assert.equal(1, #unregisters(s))
    end)

    it("sends no unRegisterReplica on any other answer (exit 1)", function()
      local s = server()
      local r = answered(s, "no")
      assert.is_true(r.prompted, r.output)
      assert.equal(1, r.exit, r.output)
      assert.truthy(r.output:find("not confirmed", 1, true), r.output)
      assert.equal(0, #unregisters(s))
    end)
  end)
end)
