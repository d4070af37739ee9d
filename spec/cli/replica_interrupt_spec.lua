-- Ctrl-C in each phase of `geoservices replica create OUT.gpkg` (issue 38),
-- under a real pseudo-terminal (spec/support/pty_ctrl_c.py types it once
-- the live line names the phase): the command ends at once with 130 and
-- "interrupted", and leaves what the README promises: no store at OUT, no
-- file of the interrupted creation beside it. The store fills while the
-- result downloads (one parse, spec/store/one_parse_spec); the phases after
-- (the GlobalID index...) are SQL statements that the store's progress
-- handler stops (spec/store/interrupt_spec). The GlobalID index of 200k
-- points takes a few tenths of a second: Ctrl-C comes as soon as the phase
-- shows, and the output proves it came inside it (no later phase shown).
-- A Ctrl-C typed after the phase had ended (what the command wrote before it
-- shows: spec/support/pty_ctrl_c.py's `before`, `ctrl_c_at`) proves nothing
-- of the phase: the case runs again (helper.within_window).
local helper = require "spec.helper"
local json = require "geoservices.base.json"

local q = helper.shell_quote
local RECORDS = 200000
local CLI = 'os.exit(require("geoservices.cli").main(arg))'

describe("Ctrl-C during replica create OUT.gpkg (issue 38)", function()
  local dir, pid, url

  setup(function()
    dir = helper.tmp_dir()
    local out, ok = helper.run_shell(("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/bench/generate_replica.lua %d first %s")
      :format(q(package.path), q(package.cpath), RECORDS, q(dir .. "/first.json")))
    assert(ok, out)
    local log = dir .. "/serve.log"
    pid = helper.run_shell(("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/bench/serve_replica.lua %s > %s 2>&1 & echo $!")
      :format(q(package.path), q(package.cpath), q(dir .. "/first.json"), q(log))):match("%d+")
    url = helper.wait_for("the replica server", function()
      local text = helper.read_all(log)
      return text and text:match("serving on (%S+)")
    end, 10)
  end)
  teardown(function()
    if pid then os.execute("kill " .. pid) end
    os.execute("rm -rf " .. q(dir))
  end)

  local PHASES = {
    { name = "downloading", delay = 0.2, next = "building the GlobalID index" },
    { name = "building the GlobalID index", delay = 0, next = "settling the repeated GlobalIDs" },
  }
  for _, phase in ipairs(PHASES) do
    it("ends at once with 130 and leaves nothing when " .. phase.name, function()
      -- a Ctrl-C typed after the command had shown the next phase (pty_ctrl_c.py was
      -- stalled past this one) is run again; a command that moved on after it fails
      helper.within_window("Ctrl-C during " .. phase.name, { 1, 2, 3 }, function(run)
        local out = ("%s/%s-%d.gpkg"):format(dir, phase.name:gsub(" ", "_"), run)
        local p = io.popen(("cd %s && env -u GEOSERVICES_TTY PTY_CTRL_C_DELAY=%s LUA_PATH=%s LUA_CPATH=%s "
          .. helper.PYTHON .. " "
          .. "spec/support/pty_ctrl_c.py %s 60 lua5.4 -e %s /dev/null --url %s replica create Bench --layers 0 %s")
          :format(q(helper.ROOT), phase.delay, q(package.path), q(package.cpath), q(phase.name), q(CLI), q(url),
                  q(out)))
        local r = json.decode(p:read("a"))
        p:close()
        assert(r.matched, "never showed " .. phase.name .. ": " .. r.output)
        if phase.next and r.before:find(phase.next, 1, true) then
          os.remove(out)
          return false
        end
        -- the Ctrl-C came inside the phase: the live line never moved on to the next one
        if phase.next then assert.falsy(r.output:find(phase.next, 1, true), r.output) end
        assert.equal(130, r.exit, r.output)
        assert.truthy(r.output:find("interrupted", 1, true), r.output)
        local left = helper.run_shell("ls -A " .. q(dir))
        assert.falsy(left:find(out:match("[^/]+$"), 1, true), left)
        return true
      end)
    end)
  end

  -- the Lua API takes the same path: its store is being built while the result downloads, in a
  -- temporary file beside the path, which a Ctrl-C (lua.c's "interrupted!", raised through
  -- store.create) removes; the create's journal stays for a rerun (geoservices.store.sync.create)
  it("the Lua API: Ctrl-C while the result downloads into the store leaves no store nor its temporary file", function()
    local out = dir .. "/lua-api.gpkg"
    local script = dir .. "/lua_api.lua"
    helper.write_file(script, [[
local geoservices = require "geoservices"
local shown = false
local st, err = geoservices.store.create(geoservices.client{ url = arg[1] }, arg[2], { service = "Bench",
  layers = { 0 } }, { on_progress = function(received)
    if received > 0 and not shown then
      shown = true
      io.write("downloading\n")
      io.stdout:flush()
    end
  end })
print("returned", st, err)
]])
    local p = io.popen(("cd %s && env LUA_PATH=%s LUA_CPATH=%s "
      .. helper.PYTHON .. " spec/support/pty_ctrl_c.py downloading 60 "
      .. "lua5.4 %s %s %s"):format(q(helper.ROOT), q(package.path), q(package.cpath), q(script), q(url), q(out)))
    local r = json.decode(p:read("a"))
    p:close()
    assert(r.matched, "never showed the download: " .. r.output)
    assert.equal(1, r.exit, r.output) -- lua.c: an error, "interrupted!"
    assert.truthy(r.output:find("interrupted!", 1, true), r.output)
    assert.falsy(r.output:find("returned", 1, true), r.output)
    assert.is_nil(helper.read_all(out))
    local left = helper.run_shell("ls -A " .. q(dir))
    assert.falsy(left:find("lua-api.gpkg.creating", 1, true), left)
  end)

  -- the last phase, with --attachments: the store is complete (committed) before their bytes are
  -- fetched one by one; a Ctrl-C then says so, and the store stays, each attachment either fetched
  -- whole or left for the next sync (spec/store/attachments_spec)
  it("ends at once with 130 when fetching the attachments, and says the store is complete", function()
    local base = dir .. "/att"
    local out, ok = helper.run_shell(("LUA_PATH=%s LUA_CPATH=%s lua5.4 spec/bench/generate_shape.lua attachments 60 %s")
      :format(q(package.path), q(package.cpath), q(base)))
    assert(ok, out)
    -- the Ctrl-C comes 0.5 s into the fetch; when every attachment (but the one in flight)
    -- was served before it was typed, the spec was stalled past the phase: it runs again
    -- with the server answering each attachment later
    helper.within_window("Ctrl-C while fetching the attachments", { 0, 20, 100 }, function(delay_ms)
      local log = ("%s/serve-att-%d.log"):format(dir, delay_ms)
      local att_pid = helper.run_shell(("SERVE_ATTACHMENT_DELAY_MS=%d LUA_PATH=%s LUA_CPATH=%s lua5.4 "
        .. "spec/bench/serve_replica.lua %s %s %s > %s 2>&1 & echo $!"):format(delay_ms, q(package.path),
        q(package.cpath), q(base .. ".json"), q(base .. ".layer.json"), q(base .. ".blob"), q(log))):match("%d+")
      local ok2, res = pcall(function()
        local att_url = helper.wait_for("the replica server", function()
          local text = helper.read_all(log)
          return text and text:match("serving on (%S+)")
        end, 10)
        local gpkg = ("%s/att-%d.gpkg"):format(dir, delay_ms)
        local p = io.popen(("cd %s && env -u GEOSERVICES_TTY PTY_CTRL_C_DELAY=0.5 LUA_PATH=%s LUA_CPATH=%s "
          .. helper.PYTHON .. " "
          .. "spec/support/pty_ctrl_c.py %s 60 lua5.4 -e %s /dev/null --url %s replica create Bench --layers 0 "
          .. "--attachments %s"):format(q(helper.ROOT), q(package.path), q(package.cpath),
          q("fetching the attachments"), q(CLI), q(att_url), q(gpkg)))
        local r = json.decode(p:read("a"))
        p:close()
        assert(r.matched, "never showed the fetch: " .. r.output)
        local served_before = 0
        for t in helper.read_all(log):gmatch("attachment served (%S+)") do
          if tonumber(t) < r.ctrl_c_at then served_before = served_before + 1 end
        end
        if served_before >= 300 - 1 then return false end
        assert.equal(130, r.exit, r.output)
        assert.truthy(r.output:find("interrupted; " .. gpkg:match("[^/]+$")
          .. " is complete; nothing was left running on the server", 1, true), r.output)
        local st = assert(require("geoservices").store.open(gpkg))
        assert.equal(60, st:count(0))
        local rows = assert(st.db:rows("SELECT count(*) AS n, sum(fetched_at IS NOT NULL AND length(data) = size) "
          .. "AS whole, sum(fetched_at IS NULL) AS waiting FROM geoservices_attachments"))
        st:close()
        assert.equal(300, rows[1].n)
        assert.equal(300, rows[1].whole + rows[1].waiting) -- none half-fetched
        -- typed while attachments were still to be served, the Ctrl-C left some of them waiting
        assert.is_true(rows[1].waiting > 0, ("the Ctrl-C (%d attachments served before it) came after the last "
          .. "attachment"):format(served_before))
        return true
      end)
      os.execute("kill " .. att_pid)
      if not ok2 then error(res, 0) end
      return res
    end)
  end)
end)
