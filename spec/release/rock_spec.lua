-- Packaging: two rocks, built with Debian's luarocks (for Lua 5.4) into a
-- temporary tree. The client rock (core.so, the modules, the `geoservices`
-- command) builds without libmicrohttpd; the emulator rock (httpd.so, the
-- emulator, its example world, `geoservices-emulator`) builds alone after it.
-- `make install` and `make install-emulator` do the same under a prefix; then
-- the installed commands and an example run against an emulator started from
-- the installed tree, from a directory outside the sources. The emulator has
-- one command line, whichever way it is started.
local json = require "geoservices.base.json"
local helper = require "spec.helper"

local q = helper.shell_quote

local function sh(cmd)
  local log = helper.tmp_name()
  local ok = os.execute("(" .. cmd .. ") >" .. q(log) .. " 2>&1")
  local text = helper.read_all(log) or ""
  os.remove(log)
  return ok == true, text
end

-- Runs a shell command; returns its exit code and its output (both streams).
local function run(cmd)
  local log = helper.tmp_name()
  local _, _, code = os.execute("(" .. cmd .. ") >" .. q(log) .. " 2>&1")
  local text = helper.read_all(log) or ""
  os.remove(log)
  return code, text
end

-- The long options a --help text lists, sorted.
local function options_of(help)
  local set, list = {}, {}
  for name in help:gmatch("%-%-[%w][%w-]*") do
    if not set[name] then set[name] = true; list[#list + 1] = name end
  end
  table.sort(list)
  return list
end

-- Every option either emulator command line had before they became one.
local EMULATOR_OPTIONS = { "--port", "--host", "--data", "--base-path", "--configure-seconds", "--state-file",
                           "--tls-cert", "--tls-key", "--exit-with", "--json", "--verbose", "--help" }

describe("emulator command line", function()
  local paths = ("LUA_PATH=%s LUA_CPATH=%s"):format(q(package.path), q(package.cpath))

  it("geoservices emulator --help and main.lua --help list the same options", function()
    local code, cli_help = run(("cd %s && %s lua5.4 -e %s /dev/null emulator --help"):format(q(helper.ROOT), paths,
      q('os.exit(require("geoservices.cli").main(arg))')))
    assert.equal(0, code, cli_help)
    local main_help
    code, main_help = run(("cd %s && %s lua5.4 lua/geoservices/emulator/main.lua --help"):format(
      q(helper.ROOT), paths))
    assert.equal(0, code, main_help)
    assert.same(options_of(main_help), options_of(cli_help))
    for _, o in ipairs(EMULATOR_OPTIONS) do
      assert.truthy(main_help:find(o, 1, true), o)
    end
    assert.truthy(cli_help:find("Usage: geoservices emulator", 1, true), cli_help)
  end)

  it("geoservices --json emulator prints the listening event; stopped by PID", function()
    local log, pidfile = helper.tmp_name(), helper.tmp_name()
    assert(os.execute(("cd %s && { env %s lua5.4 -e %s /dev/null --json emulator --port 0 --host 127.0.0.1 "
      .. "--exit-with %d >%s 2>&1 & echo $! >%s; }"):format(q(helper.ROOT), paths,
        q('os.exit(require("geoservices.cli").main(arg))'), helper.own_pid(), q(log), q(pidfile))))
    local pid = helper.wait_for("pid", function() return tonumber(helper.read_all(pidfile)) end, 5)
    finally(function()
      os.execute("kill " .. pid .. " 2>/dev/null")
      os.remove(log)
      os.remove(pidfile)
    end)
    local line = helper.wait_for("listening event", function()
      local text = helper.read_all(log) or ""
      if not helper.process_alive(pid) then error("emulator exited: " .. text) end
      return text:match("[^\n]+\n")
    end, 10)
    local ev = json.decode(line)
    assert.equal("listening", ev.event)
    assert.matches("^http://127%.0%.0%.1:%d+/server$", ev.url)
    os.execute("kill " .. pid)
    helper.wait_for("emulator gone", function() return not helper.process_alive(pid) end, 5)
  end)
end)

local function luarocks_for_54()
  local ok, text = sh("luarocks --lua-version=5.4 config lua_version")
  return ok and text:match("5%.4") ~= nil
end

describe("#rock packaging", function()
  local work, tree, prefix, src

  setup(function()
    if not luarocks_for_54() then return end
    work = helper.tmp_name()
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

  -- Starts `<bin>/geoservices emulator` (or another command, e.g.
  -- "geoservices-emulator") on 127.0.0.1 and a free port; returns its url, a
  -- stop function (by PID) and the PID.
  local function start_installed_emulator(bin, env, command)
    local log, pidfile = helper.tmp_name(), helper.tmp_name()
    assert(os.execute(("cd %s && { env %s %s/%s --port 0 --host 127.0.0.1 --exit-with %d >%s 2>&1 & echo $! >%s; }")
      :format(q(work), env or "", q(bin), command or "geoservices emulator", helper.own_pid(), q(log), q(pidfile))))
    local pid = helper.wait_for("pid", function() return tonumber(helper.read_all(pidfile)) end, 5)
    local url = helper.wait_for("listening line", function()
      local text = helper.read_all(log) or ""
      if not helper.process_alive(pid) then error("installed emulator exited: " .. text) end
      return text:match("listening on (http://127%.0%.0%.1:%d+/server)")
    end, 10)
    return url, function()
      os.execute("kill " .. pid .. " 2>/dev/null")
      helper.wait_for("emulator stopped", function() return not helper.process_alive(pid) end, 5)
      os.remove(log)
      os.remove(pidfile)
    end, pid
  end

  -- Debian's curl headers live in the multiarch include directory, which
  -- LuaRocks 3.8 does not search; lua-cjson and argparse are Debian
  -- packages, not rocks, hence --deps-mode=none.
  local function luarocks_make(rockspec, before, after)
    local _, multiarch = sh("gcc -print-multiarch")
    multiarch = multiarch:match("%S+") or "x86_64-linux-gnu"
    return sh(("cd %s && %s luarocks --lua-version=5.4 make --deps-mode=none --tree %s %s "
      .. "CURL_INCDIR=/usr/include/%s CURL_LIBDIR=/usr/lib/%s %s"):format(q(src), before or "", q(tree), rockspec,
        multiarch, multiarch, after or ""))
  end

  -- The client rock, built once, with every way of finding libmicrohttpd
  -- broken: no pkg-config data, MHD_CFLAGS/MHD_LIBS naming nothing (so linking
  -- an httpd.so fails) and the MICROHTTPD variables pointing to an empty
  -- directory (so an external dependency on it fails LuaRocks' header check).
  local client_rock
  local function make_client_rock()
    if not client_rock then
      local empty = work .. "/empty"
      assert(os.execute("mkdir -p " .. q(empty)))
      local ok, text = luarocks_make("rockspec/geoservices-scm-1.rockspec",
        ("env PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=%s MHD_CFLAGS=-I/nonexistent MHD_LIBS=-lnonexistent_mhd"):format(
          q(empty)),
        ("MICROHTTPD_INCDIR=%s MICROHTTPD_LIBDIR=%s"):format(q(empty), q(empty)))
      client_rock = { ok = ok, log = text }
    end
    return client_rock.ok, client_rock.log
  end

  local emulator_rock
  local function make_emulator_rock()
    if not emulator_rock then
      local ok, text = make_client_rock()
      if ok then ok, text = luarocks_make("rockspec/geoservices-emulator-scm-1.rockspec") end
      emulator_rock = { ok = ok, log = text }
    end
    return emulator_rock.ok, emulator_rock.log
  end

  local function exists(path)
    return os.execute("test -e " .. q(path)) == true
  end

  -- How many lines of a build log are exactly `line`.
  local function lines_equal(log, line)
    local n = 0
    for l in log:gmatch("[^\n]+") do
      if l == line then n = n + 1 end
    end
    return n
  end

  -- How many lines of a build log link `so` (a gcc line with -o `so`).
  local function links_of(log, so)
    local n = 0
    for l in log:gmatch("[^\n]+") do
      if l:find("-o " .. so .. " ", 1, true) then n = n + 1 end
    end
    return n
  end

  it("ldoc builds the API reference of the Lua layer", function()
    if not sh("command -v ldoc") then
      pending("lua-ldoc is not installed (make deps installs it)")
      return
    end
    local dir = helper.tmp_name()
    os.remove(dir)
    finally(function() os.execute("rm -rf " .. q(dir)) end)
    local ok, text = sh(("cd %s && ldoc -c rockspec/config.ld -d %s ."):format(q(helper.ROOT), q(dir)))
    assert(ok, text)
    assert.falsy(text:find("undocumented formal argument", 1, true), text)
    for _, m in ipairs{ "geoservices", "geoservices.net.client", "geoservices.cli", "geoservices.pp",
                        "geoservices.errors", "geoservices.sync.replica" } do
      assert.truthy(helper.read_all(dir .. "/modules/" .. m .. ".html"), m)
    end
    assert.truthy(helper.read_all(dir .. "/modules/geoservices.cli.html"):find("progress_bar", 1, true))
  end)

  it("luarocks lint accepts both rockspecs", function()
    if skip_without_luarocks() then return end
    for _, rockspec in ipairs{ "geoservices-scm-1.rockspec", "geoservices-emulator-scm-1.rockspec" } do
      local ok, text = sh("luarocks lint " .. q(helper.ROOT .. "/rockspec/" .. rockspec))
      assert(ok, rockspec .. ": " .. text)
    end
  end)

  it("the client rock builds without libmicrohttpd: core.so, the modules, no emulator", function()
    if skip_without_luarocks() then return end
    local ok, text = make_client_rock()
    assert(ok, text)
    assert.truthy(text:find("csrc/core.c", 1, true), text) -- the log shows the compiler's command lines
    -- LuaRocks' install step (make install) rebuilds nothing: each C file compiled once and the core
    -- linked once, with LuaRocks' own flags; the core.so installed is the one it built
    assert.equal(1, lines_equal(text, "cc csrc/core.c"), text)
    assert.equal(1, lines_equal(text, "cc csrc/store/apply.c"), text)
    assert.equal(1, links_of(text, "build/geoservices/core.so"), text)
    local _, luarocks_cflags = sh("luarocks --lua-version=5.4 config variables.CFLAGS")
    local link = text:match("[^\n]*%-o build/geoservices/core%.so [^\n]*")
    assert.truthy(link:find(" " .. luarocks_cflags:match("^%s*(.-)%s*$") .. " ", 1, true), link)
    assert.falsy(text:find("httpd", 1, true), text)
    assert.falsy(text:find("microhttpd", 1, true), text)
    for _, f in ipairs{ "/lib/lua/5.4/geoservices/core.so", "/share/lua/5.4/geoservices/init.lua",
                        "/share/lua/5.4/geoservices/cli/init.lua", "/bin/geoservices" } do
      assert.truthy(exists(tree .. f), f)
    end
    local _, found = sh(("find %s -name 'httpd.so' -o -path '*geoservices/emulator*' -o -name 'geoservices-emulator*'")
      :format(q(tree)))
    assert.equal("", found)

    -- require "geoservices" with only the tree on the module paths
    local paths = ("LUA_PATH=%s LUA_CPATH=%s"):format(
      q(tree .. "/share/lua/5.4/?.lua;" .. tree .. "/share/lua/5.4/?/init.lua;;"), q(tree .. "/lib/lua/5.4/?.so;;"))
    local out
    ok, out = sh(("cd %s && env %s lua5.4 -e %s"):format(q(work), paths, q('require "geoservices"; '
      .. 'print(package.searchpath("geoservices", package.path)); '
      .. 'print(package.searchpath("geoservices.core", package.cpath))')))
    assert(ok, out)
    local lua_file, core_file = out:match("^([^\n]+)\n([^\n]+)\n$")
    assert.equal(tree .. "/share/lua/5.4/geoservices/init.lua", lua_file, out)
    assert.equal(tree .. "/lib/lua/5.4/geoservices/core.so", core_file, out)

    -- without the emulator rock, `geoservices emulator` says where it is, exit 2
    local code
    code, out = run(("cd %s && env -u LUA_PATH -u LUA_CPATH %s/bin/geoservices emulator --port 0"):format(
      q(work), q(tree)))
    assert.equal(2, code, out)
    assert.truthy(out:find("luarocks install geoservices-emulator", 1, true), out)
    assert.equal(1, select(2, out:gsub("\n", "\n")), out)
  end)

  it("the emulator rock builds alone after the client rock; its emulator answers and stops by PID", function()
    if skip_without_luarocks() then return end
    local ok, text = make_emulator_rock()
    assert(ok, text)
    assert.falsy(text:find("csrc/core.c", 1, true), text) -- the client's core is not rebuilt
    -- nor its own C files at install: each compiled once, httpd.so linked once
    assert.equal(1, lines_equal(text, "cc csrc/emulator/httpd.c"), text)
    assert.equal(1, links_of(text, "build/geoservices/httpd.so"), text)
    for _, f in ipairs{ "/lib/lua/5.4/geoservices/httpd.so", "/share/lua/5.4/geoservices/emulator/init.lua",
                        "/share/lua/5.4/geoservices/emulator/main.lua",
                        "/share/lua/5.4/geoservices/emulator/data/world.json", "/bin/geoservices-emulator" } do
      assert.truthy(exists(tree .. f), f)
    end
    local url, stop, pid = start_installed_emulator(tree .. "/bin", "-u LUA_PATH -u LUA_CPATH",
      "geoservices-emulator")
    local stopped = false
    finally(function() if not stopped then stop() end end)
    local out
    ok, out = sh(("cd %s && env -u LUA_PATH -u LUA_CPATH %s/bin/geoservices --url %s --token admin-token --json "
      .. "services 4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c"):format(q(work), q(tree), q(url)))
    assert(ok, out)
    assert.equal("Parcels", json.decode(out:match("[^\n]+")).service.serviceName)
    stop()
    stopped = true
    assert.falsy(helper.process_alive(pid))
  end)

  it("both rocks: modules, cores and the commands; an example runs from the tree", function()
    if skip_without_luarocks() then return end
    local ok, text = make_emulator_rock()
    assert(ok, text)
    for _, f in ipairs{ "/lib/lua/5.4/geoservices/core.so", "/lib/lua/5.4/geoservices/httpd.so",
                        "/share/lua/5.4/geoservices/init.lua", "/share/lua/5.4/geoservices/cli/init.lua",
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
      q('print(package.searchpath("geoservices.net.client", package.path))')))
    assert(ok, out)
    assert.truthy(out:find(tree, 1, true), out)
    ok, out = sh(("cd %s && GEOSERVICES_URL=%s %s lua5.4 %s"):format(q(work), q(url), paths,
      q(src .. "/examples/tour.lua")))
    assert(ok, out)
    assert.truthy(out:find("2 services: Parcels.FeatureServer, Basemap.MapServer", 1, true), out)
  end)

  -- The README's install lines for the client rock, as written: the lines of
  -- its sh blocks from `luarocks --lua-version=5.4 make` on, with their
  -- continuation lines.
  local function readme_luarocks_lines()
    local readme = helper.read_all(helper.ROOT .. "/README.md")
    local lines, taking = {}, false
    for block in readme:gmatch("```sh\n(.-)```") do
      for line in block:gmatch("[^\n]+") do
        if line:match("^luarocks %-%-lua%-version=5%.4 make ") then taking = true end
        if taking then
          lines[#lines + 1] = line
          taking = line:match("\\%s*$") ~= nil
        end
      end
    end
    return lines
  end

  -- The README's whole install block but its apt-get line: from the first
  -- line after apt-get to the block's end, as written.
  local function readme_install_block()
    local readme = helper.read_all(helper.ROOT .. "/README.md")
    local block = readme:match("## Install.-```sh\n(.-)```")
    assert.is_string(block, "the README has no install block")
    return (block:gsub("^apt%-get[^\n]*\n", ""))
  end

  -- The README's install block, run once as written in a fresh login (no module path nor luarocks
  -- bin inherited from this run, a home of its own): it holds the luarocks lines, and the two
  -- tests below read what it printed and installed.
  local readme_install
  local function run_readme_install()
    if not readme_install then
      local block = readme_install_block()
      local home = work .. "/home-block"
      assert(os.execute("mkdir -p " .. q(home)))
      local ok, text = sh(("cd %s && env -u LUA_PATH -u LUA_CPATH HOME=%s PATH=/usr/local/bin:/usr/bin:/bin "
        .. "bash -e -c %s"):format(q(src), q(home), q(block)))
      readme_install = { block = block, home = home, ok = ok, text = text }
    end
    return readme_install
  end

  it("the README's luarocks line installs the client as written; completions stay in the rock's tree", function()
    if skip_without_luarocks() then return end
    local lines = readme_luarocks_lines()
    assert.is_true(#lines > 0, "the README has no luarocks --lua-version=5.4 make line")
    local command = table.concat(lines, "\n")
    assert.truthy(command:find("geoservices-scm-1.rockspec", 1, true), command)
    -- a fresh home: `--local` installs into $HOME/.luarocks, nothing outside it; the install block
    -- runs the lines as written
    local install = run_readme_install()
    assert.truthy(install.block:find(command, 1, true), install.block)
    local home, text = install.home, install.text
    assert(install.ok, install.block .. "\n" .. text)
    local local_tree = home .. "/.luarocks"
    local ok, out = sh(("cd %s && env -u LUA_PATH -u LUA_CPATH HOME=%s %s/bin/geoservices --version"):format(
      q(work), q(home), q(local_tree)))
    assert(ok, out)
    assert.truthy(out:match("^geoservices %d"), out)
    -- the shell completions live inside the rock's own directory, and the command prints them
    local rock_dir = local_tree .. "/lib/luarocks/rocks-5.4/geoservices/scm-1"
    for _, f in ipairs{ "/share/bash-completion/completions/geoservices", "/share/zsh/site-functions/_geoservices",
                        "/share/fish/vendor_completions.d/geoservices.fish" } do
      assert.truthy(exists(rock_dir .. f), f)
    end
    assert.falsy(text:find("/usr/local", 1, true), text)
    ok, out = sh(("env -u LUA_PATH -u LUA_CPATH HOME=%s %s/bin/geoservices completion bash"):format(q(home),
      q(local_tree)))
    assert(ok, out)
    assert.truthy(out:find("complete -F _geoservices", 1, true), out)
    if command:find("geoservices-emulator-scm-1.rockspec", 1, true) then
      assert.truthy(exists(local_tree .. "/bin/geoservices-emulator"), "the emulator's command")
      ok, out = sh(("env HOME=%s luarocks --lua-version=5.4 remove --local geoservices-emulator"):format(q(home)))
      assert(ok, out)
    end
    -- luarocks remove takes them away with the rock
    ok, out = sh(("env HOME=%s luarocks --lua-version=5.4 remove --local geoservices"):format(q(home)))
    assert(ok, out)
    local _, left = sh(("find %s -name '*geoservices*'"):format(q(local_tree)))
    assert.equal("", left)
  end)

  it("the README's install block, as written, ends in a working geoservices and require, without warnings",
    function()
      if skip_without_luarocks() then return end
      local install = run_readme_install()
      local text = install.text
      assert(install.ok, install.block .. "\n" .. text)
      assert.falsy(text:find("Missing dependencies", 1, true), text)
      assert.truthy(text:match("\ngeoservices %d[^\n]*\n%d+%.%d+%.%d+%s*$"), text) -- the last two lines: the checks
    end)

  it("make install puts the command under PREFIX/bin; it runs without any module path set", function()
    if skip_without_luarocks() then return end
    local ok, text = sh(("cd %s && make install PREFIX=%s"):format(q(src), q(prefix)))
    assert(ok, text)
    -- the client only; the emulator is `make install-emulator`
    assert.falsy(exists(prefix .. "/share/lua/5.4/geoservices/emulator"))
    assert.falsy(exists(prefix .. "/lib/lua/5.4/geoservices/httpd.so"))
    ok, text = sh(("cd %s && make install-emulator PREFIX=%s"):format(q(src), q(prefix)))
    assert(ok, text)
    local url, stop = start_installed_emulator(prefix .. "/bin", "-u LUA_PATH -u LUA_CPATH")
    finally(stop)
    local out
    ok, out = sh(("cd %s && env -u LUA_PATH -u LUA_CPATH %s/bin/geoservices --url %s --token alice-token "
      .. "snapshots nb-street-trees"):format(q(work), q(prefix), q(url)))
    assert(ok, out)
    assert.truthy(out:find("3 snapshots of item nb-street-trees", 1, true), out)
  end)
end)
