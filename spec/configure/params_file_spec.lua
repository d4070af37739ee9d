-- The configure parameters file is documented (issue 39 item 6): the
-- example docs/configure.md names, examples/org.json, passes every rule as
-- it is (a dry run sends nothing and exits 0), the command that page shows
-- runs as written, and every member the page's table names is one the
-- interface knows, every required one among them.
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local validate = require "geoservices.configure.validate"

describe("the configure parameters file", function()
  local emu
  setup(function() emu = helper.start_emulator() end)
  teardown(function() emu:stop() end)

  it("has a complete example that a dry run accepts, as the page shows it", function()
    local page = helper.read_all(helper.ROOT .. "/docs/configure.md")
    local line = page:match("\n(ORG_ADMIN_PASSWORD=[^\n]+)\n")
    assert.is_string(line, "the page's command")
    local env, args = {}, {}
    for w in line:gmatch("%S+") do
      local k, v = w:match("^([%u_]+)=(.*)$")
      if k and #args == 0 then env[k] = v else args[#args + 1] = w end
    end
    assert.equal("geoservices", table.remove(args, 1))
    table.insert(args, 1, emu.url)
    table.insert(args, 1, "--url")
    table.insert(args, 3, "--token")
    table.insert(args, 4, "admin-token")
    local r = helper.run_cli(args, env)
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("configure", 1, true), r.out)
    assert.falsy((r.out .. r.err):find("Change-me-2024", 1, true))
    assert.equal(0, emu:count("configure"))
  end)

  it("names in its table every required member, and only members the interface knows", function()
    local page = helper.read_all(helper.ROOT .. "/docs/configure.md")
    local named = {}
    for row in page:gmatch("\n(|[^\n]*)") do
      for m in row:gmatch("`([%w]+)`") do named[m] = true end
    end
    for _, m in ipairs(validate.REQUIRED) do
      if m ~= "password" and m ~= "securityQuestionAns" then -- the secrets: from the environment
        assert.is_true(named[m] == true, m)
      end
    end
    local example = json.decode(helper.read_all(helper.ROOT .. "/examples/org.json"))
    for k in pairs(example) do assert.is_true(named[k] == true, "examples/org.json's " .. k .. " is documented") end
  end)
end)
