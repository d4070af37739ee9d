-- Packaging: the rockspec builds and installs the modules, both C cores and
-- the `geoservices` command into a temporary LuaRocks tree with Debian's
-- luarocks (for Lua 5.4), and `make install` does the same under a prefix;
-- then the installed command and an example run against an emulator started
-- from the installed tree, from a directory outside the sources.
local json = require "geoservices.json"
local helper = require "spec.helper"

local q = helper.shell_quote

local function sh(cmd)
  local log = os.tmpname()
  local ok = os.execute("(" .. cmd .. ") >" .. q(log) .. " 2>&1")
  local text = helper.read_all(log) or ""
  os.remove(log)
  return ok == true, text
end

local function luarocks_for_54()
  local ok, text = sh("luarocks --lua-version=5.4 config lua_version")
  return ok and text:match("5%.4") ~= nil
end

describe("#rock packaging", function()
  local work, tree, prefix, src

  setup(function()
    if not luarocks_for_54() then return end
    work = os.tmpname()
    os.remove(work)
    src, tree, prefix = work .. "/src", work .. "/tree", work .. "/prefix"
    assert(os.execute("mkdir -p " .. q(src)))
    -- a copy of the sources, so the build does not touch this tree's build/
    local list = "git -C " .. q(helper.ROOT) .. " ls-files -co --exclude-standard"
    local ok, text = sh(list .. " | grep -v '^build/' | (cd " .. q(helper.ROOT) .. " && tar -cf - -T -) | tar -xf - -C "
      .. q(src))
    assert(ok, text)
  end)

  teardown(function()
    if work then os.execute("rm -rf " .. q(work)) end
  end)

  local function skip_without_luarocks()
    if not work then
      pending("luarocks cannot build for Lua 5.4 on this machine")
      return true
    end
  end

  -- Starts `<bin>/geoservices emulator` and returns its url and a stop function.
  local function start_installed_emulator(bin, env)
    local log, pidfile = os.tmpname(), os.tmpname()
    assert(os.execute(("cd %s && %s %s/geoservices emulator --port 0 >%s 2>&1 & echo $! >%s"):format(
      q(work), env or "", q(bin), q(log), q(pidfile))))
    local pid = helper.wait_for("pid", function() return tonumber(helper.read_all(pidfile)) end, 5)
    local url = helper.wait_for("listening line", function()
      local text = helper.read_all(log) or ""
      if not helper.process_alive(pid) then error("installed emulator exited: " .. text) end
      return text:match("listening on (http://127%.0%.0%.1:%d+/server)")
    end, 10)
    return url, function()
      os.execute("kill " .. pid .. " 2>/dev/null")
      os.remove(log)
      os.remove(pidfile)
    end
  end

  it("ldoc builds the API reference of the Lua layer", function()
    if not sh("command -v ldoc") then
      pending("lua-ldoc is not installed (make deps installs it)")
      return
    end
    local dir = os.tmpname()
    os.remove(dir)
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    local ok, text = sh(("cd %s && ldoc -c rockspec/config.ld -d %s ."):format(q(helper.ROOT), q(dir)))
    assert(ok, text)
    assert.falsy(text:find("undocumented formal argument", 1, true), text)
    for _, m in ipairs{ "geoservices", "geoservices.client", "geoservices.cli", "geoservices.pp",
                        "geoservices.errors", "geoservices.sync.replica" } do
      assert.truthy(helper.read_all(dir .. "/modules/" .. m .. ".html"), m)
    end
    assert.truthy(helper.read_all(dir .. "/modules/geoservices.cli.html"):find("progress_bar", 1, true))
  end)

  it("luarocks lint accepts the rockspec", function()
    if skip_without_luarocks() then return end
    local ok, text = sh("luarocks lint " .. q(helper.ROOT .. "/rockspec/geoservices-scm-1.rockspec"))
    assert(ok, text)
  end)

  it("luarocks make installs modules, cores and the command; an example runs from the tree", function()
    if skip_without_luarocks() then return end
    -- Debian's curl headers live in the multiarch include directory, which
    -- LuaRocks 3.8 does not search; lua-cjson and argparse are Debian
    -- packages, not rocks, hence --deps-mode=none.
    local _, multiarch = sh("gcc -print-multiarch")
    multiarch = multiarch:match("%S+") or "x86_64-linux-gnu"
    local ok, text = sh(("cd %s && luarocks --lua-version=5.4 make --deps-mode=none --tree %s "
      .. "rockspec/geoservices-scm-1.rockspec CURL_INCDIR=/usr/include/%s CURL_LIBDIR=/usr/lib/%s"):format(
        q(src), q(tree), multiarch, multiarch))
    assert(ok, text)
    for _, f in ipairs{ "/lib/lua/5.4/geoservices/core.so", "/lib/lua/5.4/geoservices/httpd.so",
                        "/share/lua/5.4/geoservices/init.lua", "/share/lua/5.4/geoservices/cli.lua",
                        "/share/lua/5.4/geoservices/emulator/init.lua", "/bin/geoservices" } do
      assert.truthy(helper.read_all(tree .. f), f)
    end

    local url, stop = start_installed_emulator(tree .. "/bin")
    finally(stop)
    local out
    ok, out = sh(("cd %s && %s/bin/geoservices --url %s --token admin-token --json services "
      .. "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"):format(q(work), q(tree), q(url)))
    assert(ok, out)
    local first = json.decode(out:match("[^\n]+"))
    assert.equal("Parcels", first.service.serviceName)

    -- an example, with only the installed tree on the module paths, run
    -- outside the sources
    local paths = ("LUA_PATH=%s LUA_CPATH=%s"):format(
      q(tree .. "/share/lua/5.4/?.lua;" .. tree .. "/share/lua/5.4/?/init.lua;;"), q(tree .. "/lib/lua/5.4/?.so;;"))
    ok, out = sh(("cd %s && %s lua5.4 -e %s"):format(q(work), paths,
      q('print(package.searchpath("geoservices.client", package.path))')))
    assert(ok, out)
    assert.truthy(out:find(tree, 1, true), out)
    ok, out = sh(("cd %s && GEOSERVICES_URL=%s %s lua5.4 %s"):format(q(work), q(url), paths,
      q(src .. "/examples/tour.lua")))
    assert(ok, out)
    assert.truthy(out:find("2 services: Parcels.FeatureServer, Basemap.MapServer", 1, true), out)
  end)

  it("make install puts the command under PREFIX/bin; it runs without any module path set", function()
    if skip_without_luarocks() then return end
    local ok, text = sh(("cd %s && make install PREFIX=%s"):format(q(src), q(prefix)))
    assert(ok, text)
    local url, stop = start_installed_emulator(prefix .. "/bin", "env -u LUA_PATH -u LUA_CPATH")
    finally(stop)
    local out
    ok, out = sh(("cd %s && env -u LUA_PATH -u LUA_CPATH %s/bin/geoservices --url %s --token alice-token "
      .. "snapshots nb-street-trees"):format(q(work), q(prefix), q(url)))
    assert(ok, out)
    assert.truthy(out:find("3 snapshots of item nb-street-trees", 1, true), out)
  end)
end)
