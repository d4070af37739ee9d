-- The API reference (`make docs`): ldoc builds it from the Lua sources with
-- no warning, every function of the public API below is in it with its
-- parameters or returns and the errors it raises, every documented table
-- has its fields, and the internals stay out.
local helper = require "spec.helper"

local q = helper.shell_quote

-- The public API: module -> functions and methods (as ldoc names them).
local FUNCTIONS = {
  ["geoservices"] = { "client", "replica", "edits", "new_global_id", "date", "volumes", "run", "spawn", "sleep",
                      "gather", "wrap", "scheduler", "with_timeout", "token" },
  ["geoservices.token"] = { "new", "is", "TokenProvider:get", "TokenProvider:due", "TokenProvider:describe",
                            "TokenProvider:reset" },
  ["geoservices.net.client"] = { "new", "Client:admin_url", "Client:request_spec", "Client:post", "Client:download",
                             "Client:close" },
  ["geoservices.services"] = { "get_services_by_id", "list_snapshots" },
  ["geoservices.sync"] = { "synchronize_replica", "sync", "resume_sync" },
  ["geoservices.sync.job"] = { "Operation:poll", "Operation:wait", "Operation:done", "Operation:to_json" },
  ["geoservices.sync.create"] = { "create_replica", "resume_create_replica", "Result:replica_state" },
  ["geoservices.sync.service"] = { "service_info", "layer_info", "ServiceInfo:layer", "LayerInfo:field" },
  ["geoservices.sync.replicas"] = { "replica_info", "unregister_replica", "list_replicas" },
  ["geoservices.configure"] = { "configure", "status", "wait_configured", "redact", "Operation:poll",
                                "Operation:wait" },
  ["geoservices.configure.organization"] = { "key", "is_failure", "stages", "state", "failures", "current_stage",
                                   "progress_mark", "summary", "wrap" },
  ["geoservices.configure.volumes"] = { "build" },
  ["geoservices.sync.edits"] = { "new", "new_global_id", "is", "date", "Edits:add", "Edits:update", "Edits:delete",
                            "Edits:add_attachment", "Edits:update_attachment", "Edits:delete_attachment",
                            "Edits:counts", "Edits:is_empty", "Edits:to_table", "Edits:encode" },
  ["geoservices.sync.replica"] = { "open", "Replica:save", "Replica:request_params", "Replica:advance" },
  ["geoservices.errors"] = { "new", "is", "invalid", "from_transfer", "is_auth_code" },
  ["geoservices.json"] = { "array", "object", "is_array", "decode", "encode" },
  ["geoservices.loop"] = { "run", "spawn", "sleep", "gather", "wrap", "with_timeout", "with_deadline", "deadline",
                           "cancelled", "deadline_scope", "yield", "scheduler", "Task:cancel", "Task:join",
                           "Task:status", "Scheduler:spawn", "Scheduler:timeout", "Scheduler:fds",
                           "Scheduler:action", "Scheduler:action_timeout", "Scheduler:step", "Scheduler:loop",
                           "Scheduler:done", "Scheduler:close" },
  ["geoservices.net.retry"] = { "policy", "not_sent", "ambiguous", "should_retry", "parse_retry_after", "delay",
                            "is_busy", "next_delay", "annotate" },
  ["geoservices.pp"] = { "format", "print" },
  ["geoservices.cli"] = { "parser", "progress_bar", "main" },
}

-- Tables documented field by field: module -> table names.
local TABLES = {
  ["geoservices"] = { "geoservices" },
  ["geoservices.sync.result"] = { "Result" },
  ["geoservices.sync.create"] = { "Result" },
  ["geoservices.errors"] = { "Error" },
  ["geoservices.net.retry"] = { "DEFAULTS" },
  ["geoservices.pp"] = { "DEFAULTS" },
  ["geoservices.configure.volumes"] = { "DEFAULTS" },
  ["geoservices.cli"] = { "EXIT" },
  ["geoservices.token"] = { "ENDPOINTS" },
}

-- Modules that must not be in the reference, and internals of public ones.
local LEFT_OUT = { "geoservices.emulator", "geoservices.form", "geoservices.results", "geoservices.sync.params",
                   "geoservices.sync.create_params", "geoservices.cli.watch",
                   "geoservices.net.transport", "geoservices.configure.validate" }
local INTERNAL = { ["geoservices.sync.result"] = { "sink", "finish", "Sink:absorb" },
                   ["geoservices.loop"] = { "await" },
                   ["geoservices.sync.job"] = { "operation", "applied_edits_error" },
                   ["geoservices.sync.create"] = { "new_sink", "build", "set_generations" },
                   ["geoservices.sync.service"] = { "check_create", "build_service_info", "url" } }

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The <dd> of an item of a module page: from its anchor to the end of its entry.
local function entry(page, name)
  local anchor = ('<a name = "%s"></a>'):format(name)
  local at = page:find(anchor, 1, true)
  if not at then return nil end
  local stop = page:find("</dd>", at, true)
  return page:sub(at, stop)
end

describe("API reference", function()
  local dir, output

  setup(function()
    if os.execute("command -v ldoc >/dev/null 2>&1") ~= true then return end
    dir = helper.tmp_name()
    os.remove(dir)
    local log = helper.tmp_name()
    local ok = os.execute(("cd %s && ldoc -c rockspec/config.ld -d %s . >%s 2>&1"):format(q(helper.ROOT), q(dir),
      q(log)))
    output = helper.read_all(log) or ""
    os.remove(log)
    assert(ok == true, output)
  end)

  teardown(function()
    if dir then os.execute("rm -rf " .. q(dir)) end
  end)

  local function page(module)
    local text = helper.read_all(dir .. "/modules/" .. module .. ".html")
    assert.is_string(text, "no page for " .. module)
    return text
  end

  local function skip()
    if dir then return false end
    pending("lua-ldoc is not installed (make deps installs it)")
    return true
  end

  it("builds without a warning", function()
    if skip() then return end
    for line in output:gmatch("[^\n]+") do
      local known = line:match("^reading configuration from ") or line:match("^changing to directory")
        or line:match("^output written to ")
      assert.truthy(known, "ldoc said: " .. line)
    end
  end)

  it("documents every public function with its parameters or returns and what it raises", function()
    if skip() then return end
    for module, names in pairs(FUNCTIONS) do
      local text = page(module)
      for _, name in ipairs(names) do
        local dd = entry(text, name)
        local what = module .. " " .. name
        assert.is_string(dd, what .. " is not in the reference")
        assert.truthy(dd:find("<h3>Parameters:</h3>", 1, true) or dd:find("<h3>Returns:</h3>", 1, true),
          what .. " has neither parameters nor returns")
        assert.truthy(dd:find("<h3>Raises:</h3>", 1, true), what .. " does not say what it raises")
      end
    end
  end)

  it("documents the result, error and policy tables field by field", function()
    if skip() then return end
    for module, names in pairs(TABLES) do
      local text = page(module)
      for _, name in ipairs(names) do
        local dd = entry(text, name)
        assert.is_string(dd, module .. " " .. name .. " is not in the reference")
        assert.truthy(dd:find("<h3>Fields:</h3>", 1, true), module .. " " .. name .. " has no fields")
      end
    end
    local result = entry(page("geoservices.sync.result"), "Result")
    for _, field in ipairs{ "replicaServerGen", "layerServerGens", "failed_edits", "counts", "downloaded",
                            "partial" } do
      assert.truthy(result:find('"parameter">' .. field .. "<", 1, true), "Result." .. field)
    end
    local err = entry(page("geoservices.errors"), "Error")
    for _, kind in ipairs{ "invalid", "network", "timeout", "cancelled", "http", "server", "auth", "protocol",
                           "job", "edits", "io", "task" } do
      assert.truthy(err:find('"' .. kind .. '"', 1, true), "error kind " .. kind)
    end
  end)

  it("the Client page lists every operation of the client, with its parameters and returns", function()
    if skip() then return end
    local text = page("geoservices.net.client")
    local facade = helper.read_all(helper.ROOT .. "/lua/geoservices/init.lua")
    local count = 0
    for name in facade:gmatch("\nfunction Client:([%w_]+)%(") do
      count = count + 1
      local dd = entry(text, "Client:" .. name)
      assert.is_string(dd, "Client:" .. name .. " is not on the Client page")
      assert.truthy(dd:find("<h3>Parameters:</h3>", 1, true) or dd:find("<h3>Returns:</h3>", 1, true),
        "Client:" .. name)
    end
    assert.is_true(count >= 15, "the façade's methods were not found")
  end)

  it("documents one store.create: (client, path, params, opts), as the README calls it", function()
    if skip() then return end
    local dd = entry(page("geoservices.store"), "create")
    assert.is_string(dd, "store.create is not in the reference")
    local params = {}
    for name in dd:gmatch('<span class="parameter">([%w_]+)</span>') do params[#params + 1] = name end
    assert.same({ "client", "path", "params", "opts" }, params)
    local readme = helper.read_all(helper.ROOT .. "/README.md")
    for call in readme:gmatch("store%.create(%b())") do
      assert.truthy(call:match("^%(client,"), "the README calls store.create" .. call)
    end
    local header = helper.read_all(helper.ROOT .. "/lua/geoservices/store/init.lua"):match("^(.-)\n%-%- @module")
    for call in header:gmatch("store%.create(%b())") do
      assert.truthy(call:match("^%(client,"), "the store page's example calls store.create" .. call)
    end
  end)

  it("has an internals page: the layout, the design notes and the benchmarks the README left", function()
    if skip() then return end
    local text = helper.read_all(dir .. "/topics/internals.md.html")
    assert.is_string(text, "no internals page")
    for _, part in ipairs{ "Layout", "Design notes", "Benchmarks", "ogr2ogr", "cjson" } do
      assert.truthy(text:find(part, 1, true), part)
    end
  end)

  it("leaves the emulator and the internal modules and functions out", function()
    if skip() then return end
    for _, module in ipairs(LEFT_OUT) do
      assert.is_false(exists(dir .. "/modules/" .. module .. ".html"), module)
    end
    local index = helper.read_all(dir .. "/index.html")
    assert.falsy(index:find("geoservices.emulator", 1, true))
    for module, names in pairs(INTERNAL) do
      local text = page(module)
      for _, name in ipairs(names) do assert.is_nil(entry(text, name), module .. " " .. name) end
    end
  end)
end)

-- The README (issue 29): newcomer-first and under 15 KB, and every code
-- block in it is run here as written against the emulator (its address
-- 127.0.0.1:8080 becomes the emulator's; a real server's address, the
-- emulator's): sh blocks in bash, the lua blocks one after the other in one
-- Lua state, the ini block as the profile file a command then uses. The
-- install block is spec/rock_spec.lua's (its luarocks lines run there as
-- written); here its apt-get line must name Debian packages that exist.
describe("README", function()
  local readme = helper.read_all(helper.ROOT .. "/README.md")
  local CLI = 'os.exit(require("geoservices.cli").main(arg))'
  local EMULATOR = 'os.exit(require("geoservices.emulator.main").main(arg))'

  -- The fenced blocks: { {lang =, text =}, ... } in order.
  local function blocks()
    local list = {}
    for lang, text in readme:gmatch("\n```(%w*)\n(.-)\n```") do list[#list + 1] = { lang = lang, text = text } end
    return list
  end

  -- A module path whose relative entries are made absolute.
  local function absolute(path)
    return (path:gsub("[^;]+", function(e) return e:sub(1, 1) == "/" and e or (helper.ROOT .. "/" .. e) end))
  end

  -- A free port: the one a short-lived emulator was given.
  local function free_port()
    local emu = helper.start_emulator()
    local port = emu.port
    emu:stop()
    return port
  end

  local function bash(dir, script, env)
    local prelude = ("set -e; cd %s; export LUA_PATH=%s LUA_CPATH=%s HOME=%s XDG_CONFIG_HOME=%s/config; "
      .. "unset GEOSERVICES_URL GEOSERVICES_TOKEN GEOSERVICES_PROFILE GEOSERVICES_TTY; %s"
      .. "geoservices() { lua5.4 -e %s /dev/null \"$@\"; }; "):format(q(dir), q(absolute(package.path)),
        q(absolute(package.cpath)), q(dir), q(dir), env or "", q(CLI))
    local log = helper.tmp_name()
    local _, _, code = os.execute(("bash -c %s >%s 2>&1 </dev/null"):format(q(prelude .. "\n" .. script), q(log)))
    local text = helper.read_all(log)
    os.remove(log)
    return code, text
  end

  it("is under 15 KB", function()
    assert.is_true(#readme < 15 * 1024, ("%d bytes"):format(#readme))
  end)

  it("has only blocks this spec runs: sh, lua, ini", function()
    for _, b in ipairs(blocks()) do
      assert.truthy(b.lang == "sh" or b.lang == "lua" or b.lang == "ini", "a ```" .. b.lang .. " block:\n" .. b.text)
    end
  end)

  it("the install block's apt-get line names Debian packages", function()
    local found
    for _, b in ipairs(blocks()) do
      local line = b.text:match("apt%-get install [^\n]+")
      if line then found = line end
    end
    assert.is_string(found, "no apt-get install line")
    local names, quoted = {}, {}
    for name in found:gsub("apt%-get install", ""):gmatch("%S+") do
      if name:sub(1, 1) ~= "-" then
        names[#names + 1] = name
        quoted[#quoted + 1] = q(name)
      end
    end
    -- one apt-cache for them all (each call reads the whole package cache: 2 s here), then each
    -- name must have its own record: its "Package:" line
    local p = assert(io.popen("apt-cache show " .. table.concat(quoted, " ") .. " 2>/dev/null"))
    local records = "\n" .. p:read("a")
    p:close()
    for _, name in ipairs(names) do
      assert.truthy(records:find("\nPackage: " .. name .. "\n", 1, true), name)
    end
  end)

  it("every sh block runs as written against the emulator", function()
    local ran = 0
    for _, b in ipairs(blocks()) do
      -- the install block, and the make targets (CI runs `make test`; `make demo` is checked by the demo)
      if b.lang == "sh" and not b.text:find("apt-get install", 1, true) and not b.text:match("^make ") then
        ran = ran + 1
        local dir = helper.tmp_dir()
        finally(function() os.execute("rm -rf " .. q(dir)) end)
        os.execute(("ln -s %s %s"):format(q(helper.ROOT .. "/examples"), q(dir .. "/examples")))
        local port = free_port()
        local script = {}
        for line in b.text:gmatch("[^\n]+") do
          line = line:gsub("127%.0%.0%.1:8080", "127.0.0.1:" .. port):gsub("%-%-port 8080", "--port " .. port)
          if line:match("^geoservices emulator ") then
            -- the emulator: in the background, waited for until it listens, stopped at the end
            local command = line:gsub("%s+#.*$", ""):gsub("%s*&%s*$", "")
            line = ("%s >emulator.log 2>&1 & emulator=$!; trap 'kill $emulator 2>/dev/null' EXIT; "
              .. "for i in $(seq 100); do grep -q listening emulator.log && break; sleep 0.1; done; "
              .. "grep -q listening emulator.log"):format(command:gsub("^geoservices emulator",
                "lua5.4 -e " .. q(EMULATOR) .. " /dev/null"))
          end
          script[#script + 1] = line
        end
        local code, text = bash(dir, table.concat(script, "\n"))
        assert.equal(0, code, b.text .. "\n---\n" .. text)
        if b.text:find("ogrinfo -al -so", 1, true) then
          -- what its comment promises: each layer's SRS and feature count
          assert.truthy(text:find("Feature Count: 3", 1, true), text)
          assert.truthy(text:find("Layer SRS WKT", 1, true), text)
        end
        if b.text:find("ogrinfo -q -sql", 1, true) then
          -- the edit GDAL made is queued, then uploaded
          assert.truthy(text:find("update  Parcels  {0B7B2D2A-", 1, true), text)
          assert.truthy(text:find("1 sent, 0 merged, 0 conflicts", 1, true), text)
          -- the other crew's edit of the same field: held back, listed with its values, resolved, sent
          assert.truthy(text:find("0 sent, 0 merged, 1 conflict (1 held back)", 1, true), text)
          assert.truthy(text:find("exit 3", 1, true), text)
          assert.truthy(text:find('OWNER  base "Jane Smith", here "Ann", server "Jane"  (both changed)', 1, true), text)
          assert.truthy(text:find("1 conflict resolved with the local version; 1 edit queued", 1, true), text)
          assert.truthy(text:find("1 sent, 0 merged, 0 conflicts, 0 rejected by the server", 1, true), text)
        end
      end
    end
    assert.is_true(ran >= 2, "sh blocks run: " .. ran)
    os.remove("/tmp/emu.json")
  end)

  it("the lua blocks run one after the other, as written, against the emulator", function()
    local emu = helper.start_emulator()
    local dir = helper.tmp_dir()
    finally(function()
      emu:stop()
      os.execute("rm -rf " .. q(dir))
    end)
    local chunks = {}
    for _, b in ipairs(blocks()) do
      if b.lang == "lua" then chunks[#chunks + 1] = b.text:gsub("http://127%.0%.0%.1:8080/server", emu.url) end
    end
    assert.is_true(#chunks >= 3, "lua blocks: " .. #chunks)
    helper.write_file(dir .. "/readme.lua", table.concat(chunks, "\n"))
    local code, text = bash(dir, "lua5.4 readme.lua")
    assert.equal(0, code, text)
    assert.truthy(text:find("1 service: Parcels.FeatureServer", 1, true), text)
    assert.truthy(text:find("3 replicas of Parcels: crew-1, crew-2, office", 1, true), text)
    assert.truthy(text:find("4\t1 pending local edit in layer 0: 1 add", 1, true), text) -- the update folds in
  end)

  it("the ini block is a profile the command uses as the text around it says", function()
    local emu = helper.start_emulator()
    local dir = helper.tmp_dir()
    finally(function()
      emu:stop()
      os.execute("rm -rf " .. q(dir))
    end)
    local ini
    for _, b in ipairs(blocks()) do
      if b.lang == "ini" then ini = b.text end
    end
    assert.is_string(ini, "no ini block")
    local name = assert(ini:match("^%[([%w_-]+)%]"), ini)
    -- a real server's address becomes the emulator's; its files are made in HOME
    ini = ini:gsub("https://[%w.]+/server", emu.url)
    for path in ini:gmatch("= (~/[^\n]+)") do
      local file = dir .. path:sub(2)
      os.execute("mkdir -p " .. q(file:match("^(.*)/")))
      helper.write_file(file, path:match("password") and "alice-pass1\n" or "")
    end
    local user = ini:match("username = (%S+)")
    ini = ini:gsub("username = %S+", "username = alice")
    os.execute("mkdir -p " .. q(dir .. "/config/geoservices"))
    helper.write_file(dir .. "/config/geoservices/config", ini)
    assert.truthy(readme:find("geoservices --profile " .. name .. " login", 1, true), "the README's login line")
    local code, text = bash(dir, ("geoservices --profile %s login && geoservices --profile %s --json snapshots "
      .. "nb-street-trees"):format(name, name))
    assert.equal(0, code, ("(user %s played by alice)\n%s"):format(tostring(user), text))
    assert.truthy(text:find('"event":"snapshot"', 1, true), text)
  end)
end)
