-- `geoservices replica create --attachments OUT.gpkg` takes the path of the
-- Lua API's geoservices.store.create (issue 38): the attachments are asked
-- by URL and their bytes fetched one by one into the store's blobs (never
-- base64 text in the result, held while it streams), a step named on the
-- progress; before, the command's store took them embedded in the result.
local helper = require "spec.helper"

local q = helper.shell_quote

describe("geoservices replica create --attachments OUT.gpkg (issue 38)", function()
  local emu, dir
  setup(function()
    emu = helper.start_emulator()
    dir = helper.tmp_dir()
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  it("fetches each attachment's bytes by URL into the store, as the Lua API does", function()
    local path = dir .. "/valves.gpkg"
    local r = helper.run_cli{ "--url", emu.url, "--token", "alice-token", "replica", "create", "Utilities",
                              "--layers", "2", "--attachments", "--poll-interval", "0.02", path }
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(r.err:find("valves.gpkg: fetching the attachments", 1, true), r.err)
    assert.truthy(r.out:find("2 attachments fetched", 1, true), r.out)
    local out, ok = helper.run_shell(("sqlite3 %s %s"):format(q(path), q("SELECT count(*), "
      .. "sum(url IS NOT NULL AND fetched_at IS NOT NULL AND length(data) = size AND size > 0) "
      .. "FROM geoservices_attachments")))
    assert(ok, out)
    assert.equal("2|2\n", out)
  end)
end)
