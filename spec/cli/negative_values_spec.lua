-- A value that starts with a minus after an option that takes one: a
-- western box (`--geometry -117.2,34.0,-117.1,34.1`) is the option's value,
-- as `--geometry=...` always was; argparse alone took it for an unknown
-- option '-1' (issue 34). Real processes, --dry-run: nothing is sent.
local helper = require "spec.helper"

local function dry_create(...)
  return helper.run_cli({ "--url", "http://127.0.0.1:9/server", "--token", "t", "--dry-run", "replica", "create",
                          "Parcels", "--layers", "0", ... })
end

describe("geoservices replica create --geometry", function()
  local dir
  before_each(function() dir = helper.tmp_dir() end)
  after_each(function() os.execute("rm -rf " .. helper.shell_quote(dir)) end)

  it("takes a western box given with a space, as with '='", function()
    local r = dry_create("--geometry", "-117.2,34.0,-117.1,34.1", "--in-sr", "4326", dir .. "/east.gpkg")
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("geometry = -117.2,34.0,-117.1,34.1", 1, true), r.out)
    assert.truthy(r.out:find("geometryType = esriGeometryEnvelope", 1, true), r.out)
    assert.truthy(r.out:find("inSR = 4326", 1, true), r.out)
    local same = dry_create("--geometry=-117.2,34.0,-117.1,34.1", "--in-sr", "4326", dir .. "/east.gpkg")
    assert.equal(r.out, same.out)
  end)

  it("takes a box whose first number is a bare fraction (-.5)", function()
    local r = dry_create("--geometry", "-.5,34,-.25,34.1", dir .. "/x.gpkg")
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.out:find("geometry = -.5,34,-.25,34.1", 1, true), r.out)
  end)

  it("leaves a minus after a flag an unknown option (exit 2, nothing sent)", function()
    local r = dry_create("--attachments", "-1", dir .. "/x.gpkg")
    assert.equal(2, r.code, r.out .. r.err)
    assert.truthy(r.err:find("unknown option '-1'", 1, true), r.err)
  end)
end)
