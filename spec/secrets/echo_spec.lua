-- Secrets against a server that echoes the request in its errors (issue 30).
--
-- A scripted server (spec/support/scripted_server.py, "echo") answers every
-- request with an error carrying the request's body and headers, in both
-- error dialects (`{"error": {...}}`, `{"status": "error", ...}`) and with
-- two JSON encoders (plain, and one writing \/ and \u00XX). Each secret the
-- library holds goes through it on each path of the README's guarantees
-- (admin: getServicesById and snapshots; sync, of a state file and of a
-- store; configure; generateToken), from Lua and from the command line; then
-- every output (errors, their strings, tostring and pp; the command's
-- standard output and error, with and without --json; dry runs) and every
-- file written (state files, the store's sync log and the whole .gpkg
-- through sqlite3) is searched for every form of every secret
-- (spec/support/secret_forms.lua).
local geoservices = require "geoservices"
local json = require "geoservices.base.json"
local redact = require "geoservices.base.redact"
local helper = require "spec.helper"
local secret_forms = require "spec.support.secret_forms"

local q = helper.shell_quote

local TOKEN = "AbC+dEf/GhI=="            -- a client's own token
local PASSWORD = "Tr0ub4dor&3 !x"        -- the password a token is generated with
local ADMIN_PASSWORD = "Adm1n&P4ss w/rd+" -- configure's administrator password
local ANSWER = "Bl+ue/Sky & 42="         -- configure's security answer
local MARKED = "C4ller'Own/Key 9%"        -- a parameter the caller marks secret
local SECRETS = { TOKEN, PASSWORD, ADMIN_PASSWORD, ANSWER, MARKED }
local REPLICA = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local LICENSE = helper.ROOT .. "/examples/data/sample.prvc"

local DIALECTS = {
  error = { error = { code = 400, message = "Unable to complete operation: {REQUEST}", details = { "{HEADERS}" } } },
  status = { status = "error", messages = { "Unable to complete operation: {REQUEST}", "{HEADERS}" }, code = 400 },
}

-- Every string reachable from a value (keys, values, tostring and
-- geoservices.pp of tables), so nested error fields are searched too.
local function texts(value, out, seen)
  out, seen = out or {}, seen or {}
  local t = type(value)
  if t == "string" then
    out[#out + 1] = value
  elseif t == "table" then
    if seen[value] then return out end
    seen[value] = true
    out[#out + 1] = geoservices.pp.format(value, { max_depth = 20, max_string = 100000 })
    if getmetatable(value) then out[#out + 1] = tostring(value) end
    for k, v in pairs(value) do
      texts(k, out, seen)
      texts(v, out, seen)
    end
  elseif value ~= nil then
    out[#out + 1] = tostring(value)
  end
  return out
end

local function assert_no_secret(what, text)
  local secret, form_name, form = secret_forms.leak(text, SECRETS)
  assert(not secret, ("%s shows %q as %s (%q):\n%s"):format(what, tostring(secret), tostring(form_name),
    tostring(form), text:sub(1, 3000)))
end

local function configure_params()
  return {
    username = "siteadmin", password = ADMIN_PASSWORD, email = "siteadmin@example.com",
    fullName = "Site Administrator", securityQuestionIdx = 3, securityQuestionAns = ANSWER,
    userLicenseTypeId = "creatorUT", licenseFile = LICENSE,
    volumesConfig = geoservices.volumes{ storage_class = "standard" },
  }
end

describe("secrets echoed by a server", function()
  local emu, store_template
  local serve, stop_all = helper.scripted_servers()

  setup(function()
    -- a store made against the emulator; each case synchronizes a copy of
    -- it against the echoing server
    emu = helper.start_emulator()
    local dir = helper.tmp_dir()
    store_template = dir .. "/template.gpkg"
    local st = assert(geoservices.store.create(geoservices.client{ url = emu.url, token = "alice-token" },
      store_template, { service = "Parcels", layers = { 0 }, replicaName = "echo" },
      { poll_interval = 0.05, timeout = 30 }))
    st:close()
    emu:stop()
    redact.mark_secret_name("callerKey")
  end)
  teardown(function()
    redact.unmark_secret_name("callerKey")
    for _, s in ipairs(SECRETS) do redact.forget(s) end
  end)
  after_each(stop_all)

  local function echo_server(dialect, mode)
    return serve{ { path = "/server/*", responses = { { status = 200, echo = mode, json = DIALECTS[dialect] } } } }
  end

  -- The files a case wrote, each as text: state files as they are, a store
  -- as sqlite3 dumps it (its sync log among the rest) and its bytes.
  local function files_of(dir)
    local list = {}
    local p = io.popen("find " .. q(dir) .. " -type f")
    for path in p:lines() do list[#list + 1] = path end
    p:close()
    local out = {}
    for _, path in ipairs(list) do
      out[#out + 1] = { path, helper.read_all(path) or "" }
      if path:match("%.gpkg$") then
        local dump = io.popen("sqlite3 " .. q(path) .. " .dump 2>&1")
        out[#out + 1] = { path .. " (sqlite3 .dump)", dump:read("a") }
        dump:close()
      end
    end
    return out
  end

  local function new_case_dir()
    local dir = helper.tmp_dir()
    helper.write_file(dir .. "/state.json", json.encode{ service = "Parcels", replicaID = REPLICA,
                                                         model = "perReplica", replicaServerGen = 5 } .. "\n")
    assert(os.execute(("cp %s %s"):format(q(store_template), q(dir .. "/crew.gpkg"))))
    return dir
  end

  for _, dialect in ipairs{ "error", "status" } do
    for _, mode in ipairs{ true, "escaped" } do
      local variant = ("dialect %s, %s JSON"):format(dialect, mode == true and "plain" or "escaped")

      it("from Lua, on every path, " .. variant, function()
        local s = echo_server(dialect, mode)
        local dir = new_case_dir()
        local seen = {}
        local function keep(what, ...)
          local values = table.pack(...)
          assert.is_nil(values[1], what .. " succeeded against an echoing error")
          seen[#seen + 1] = { what, values }
        end
        local c = geoservices.client{ url = s.url, token = TOKEN, retry = false }
        keep("getServicesById", c:get_services_by_id{ "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" })
        keep("snapshots", c:list_snapshots("nb-street-trees"))
        local bearer = geoservices.client{ url = s.url, token = TOKEN, bearer = true, retry = false }
        keep("getServicesById, Bearer header", bearer:get_services_by_id{ "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" })
        local provider = geoservices.client{ url = s.url, token = function() return TOKEN end, retry = false }
        keep("snapshots, token provider", provider:list_snapshots("nb-street-trees"))
        local generated = geoservices.client{ url = s.url, username = "editor", password = PASSWORD, retry = false }
        keep("generateToken", generated:get_services_by_id{ "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" })
        keep("configure", c:configure(configure_params(), { request_timeout = 5 }))
        -- a client without a token follows configure as the administrator it creates
        keep("configure, no token", geoservices.client{ url = s.url, retry = false }:configure(configure_params(),
          { request_timeout = 5 }))
        local edits = geoservices.edits()
        edits:add(0, { attributes = { APN = "echo" } })
        keep("sync of a state file", c:sync(dir .. "/state.json", edits, { params = { callerKey = MARKED } }))
        local st = assert(geoservices.store.open(dir .. "/crew.gpkg"))
        st:add(0, { attributes = { APN = "echo-store" } })
        keep("sync of a store", st:sync(c))
        keep("sync of a store, generated token", st:sync(generated))
        st:close()
        for _, entry in ipairs(seen) do
          for _, text in ipairs(texts(entry[2])) do assert_no_secret(entry[1], text) end
        end
        -- the errors did carry the echo (the secrets were there to be scrubbed)
        assert.truthy(tostring(seen[1][2][2]):find(redact.MARK, 1, true), tostring(seen[1][2][2]))
        local received = 0
        for _, r in ipairs(s:requests()) do
          if secret_forms.leak(r.body .. json.encode(r.headers), SECRETS) then received = received + 1 end
        end
        assert.is_true(received >= 8, "the server received the secrets " .. received .. " times")
        for _, file in ipairs(files_of(dir)) do assert_no_secret(file[1], file[2]) end
        local log = io.popen("sqlite3 " .. q(dir .. "/crew.gpkg") .. " 'SELECT message FROM geoservices_sync_log'")
        local messages = log:read("a")
        log:close()
        assert.truthy(messages:find("Unable to complete operation", 1, true), messages)
        os.execute("rm -rf " .. q(dir))
      end)

      it("from the command line, on every path, " .. variant, function()
        local s = echo_server(dialect, mode)
        local dir = new_case_dir()
        local token_file, password_file, params_file = dir .. "/token", dir .. "/password", dir .. "/org.json"
        helper.write_file(token_file, TOKEN .. "\n")
        helper.write_file(password_file, PASSWORD .. "\n")
        local params = configure_params()
        params.password, params.securityQuestionAns = nil, nil
        helper.write_file(params_file, json.encode(params))
        local env = { XDG_CONFIG_HOME = dir .. "/config", ORG_ADMIN_PASSWORD = ADMIN_PASSWORD,
                      ORG_ADMIN_ANSWER = ANSWER }
        local with_token = { "--url", s.url, "--token-file", token_file }
        local with_password = { "--url", s.url, "--username", "editor", "--password-file", password_file }
        local runs = {
          { with_token, { "services", "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" } },
          { with_token, { "snapshots", "nb-street-trees" } },
          { with_password, { "services", "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" } },
          { with_token, { "configure", params_file } },
          { { "--url", s.url }, { "configure", params_file } },
          { with_token, { "sync", dir .. "/state.json" } },
          { with_password, { "sync", dir .. "/crew.gpkg" } },
          { with_token, { "status" } },
        }
        for _, run in ipairs(runs) do
          for _, extra in ipairs{ {}, { "--json" }, { "--dry-run" }, { "--json", "--dry-run" } } do
            local args = {}
            for _, list in ipairs{ run[1], extra, run[2] } do
              for _, a in ipairs(list) do args[#args + 1] = a end
            end
            local r = helper.run_cli(args, env)
            local what = table.concat(args, " ")
            assert.is_true(r.code ~= 0 or extra[2] == "--dry-run" or extra[1] == "--dry-run", what .. ": " .. r.err)
            assert_no_secret(what .. " (standard output)", r.out)
            assert_no_secret(what .. " (standard error)", r.err)
          end
        end
        for _, file in ipairs(files_of(dir)) do
          -- the token and password files are where the secrets come from
          if file[1] ~= token_file and file[1] ~= password_file then assert_no_secret(file[1], file[2]) end
        end
        os.execute("rm -rf " .. q(dir))
      end)
    end
  end

  it("in a rejected edit's description: the store keeps the rejection, not the secret", function()
    local gid = "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E99}"
    local dir = new_case_dir()
    local st = assert(geoservices.store.open(dir .. "/crew.gpkg"))
    local replica = assert(st:replica())
    local s = serve{ { method = "POST", path = "/server/Parcels/FeatureServer/synchronizeReplica", responses = { {
      echo = true, json = { transportType = "esriTransportTypeEmbedded", responseType = "esriReplicaResponseTypeEdits",
        replicaID = replica.replicaID, replicaServerGen = 99, edits = { {
          id = 0, features = { adds = {}, updates = {}, deleteIds = {}, addResults = { {
            globalId = gid, success = false,
            error = { code = 1000, description = "refused: {REQUEST}" } } } } } } } } } } }
    st:add(0, { attributes = { GlobalID = gid, APN = "echo-rejected" } })
    local c = geoservices.client{ url = s.url, token = TOKEN, retry = false }
    local result, err = st:sync(c)
    local failed = st:failed()
    st:close()
    assert.truthy(result, tostring(err))
    assert.equal(1, #failed)
    assert.equal(1000, failed[1].code)
    -- the answer's own tables are the caller's data; their printouts and what the store keeps are clean
    assert_no_secret("the sync's result (pp)", geoservices.pp.format(result, { max_depth = 20, max_string = 1e6 }))
    assert_no_secret("the sync's result (tostring)", tostring(result))
    for _, text in ipairs(texts(failed)) do assert_no_secret("the store's failed edits", text) end
    for _, file in ipairs(files_of(dir)) do assert_no_secret(file[1], file[2]) end
    os.execute("rm -rf " .. q(dir))
  end)

  it("in a successful answer: pp, tostring, the command's lines and --json events show none", function()
    local description = "request: {REQUEST} {HEADERS}"
    local s = serve{
      { path = "/server/admin/services/getServicesById", responses = { { echo = true, json = { services = { {
        id = "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c", serviceName = "Parcels", type = "FeatureServer",
        description = description } } } } } },
      { path = "/server/admin/notebooks/snapshots/list", responses = { { echo = "escaped", json = {
        status = "success", total = 1, snapshots = { { id = "s1", title = description, itemId = "nb" } } } } } },
    }
    local c = geoservices.client{ url = s.url, token = TOKEN, bearer = true }
    local list = assert(c:get_services_by_id{ "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" })
    local snapshots = assert(c:list_snapshots("nb"))
    -- the answer holds the token (it is the caller's data), its printouts do not
    assert.truthy(secret_forms.leak(list[1].description, SECRETS))
    for what, value in pairs{ services = list, snapshots = snapshots } do
      assert_no_secret(what .. " (pp)", geoservices.pp.format(value, { max_string = 100000 }))
      assert_no_secret(what .. " (tostring)", tostring(value))
    end
    local dir = helper.tmp_dir()
    helper.write_file(dir .. "/token", TOKEN)
    for _, extra in ipairs{ {}, { "--json" }, { "-v" } } do
      for _, command in ipairs{ { "services", "4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c" }, { "snapshots", "nb" } } do
        local args = { "--url", s.url, "--token-file", dir .. "/token", "--bearer" }
        for _, list_ in ipairs{ extra, command } do
          for _, a in ipairs(list_) do args[#args + 1] = a end
        end
        local r = helper.run_cli(args, { XDG_CONFIG_HOME = dir })
        assert.equal(0, r.code, r.err)
        assert_no_secret(table.concat(args, " ") .. " (standard output)", r.out)
        assert_no_secret(table.concat(args, " ") .. " (standard error)", r.err)
      end
    end
    os.execute("rm -rf " .. q(dir))
  end)
end)
