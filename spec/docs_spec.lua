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
