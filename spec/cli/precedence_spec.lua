-- Where the command's server and credentials come from (issue 39 item 3):
-- flags > a profile named by --profile > the environment > a profile named
-- by $GEOSERVICES_PROFILE > [default], and a profile's credentials go only
-- to the URL the profile names. Two scripted servers stand for two sites;
-- each logs what it received, so a token that reached the wrong one shows.
local helper = require "spec.helper"

local q = helper.shell_quote
local CLI = 'os.exit(require("geoservices.cli").main(arg))'

local ANSWER = { { status = 200, json = { snapshots = {} } } }
local TOKEN_ANSWER = { { status = 200, json = { token = "token-of-A", expires = 4102444800000, ssl = false } } }

local function site()
  return helper.start_scripted{ routes = {
    { method = "POST", path = "/server/tokens/generateToken", responses = TOKEN_ANSWER },
    { method = "POST", path = "/server*", responses = ANSWER },
    { method = "GET", path = "/server*", responses = ANSWER },
  } }
end

-- Everything a server received, as one text (headers and bodies).
local function received(server)
  local parts = {}
  for _, r in ipairs(server:requests()) do
    parts[#parts + 1] = r.method .. " " .. r.path
    for k, v in pairs(r.headers or {}) do parts[#parts + 1] = k .. ": " .. tostring(v) end
    parts[#parts + 1] = tostring(r.body or "")
  end
  return table.concat(parts, "\n"), #server:requests()
end

describe("the command's configuration precedence", function()
  local a, b, dir, config_home

  -- Runs the command with exactly the environment given (nothing inherited
  -- of GEOSERVICES_*); returns {code, out, err}.
  local function run(args, env)
    local out, err = helper.tmp_name(), helper.tmp_name()
    local vars = { GEOSERVICES_TTY = "0", LUA_PATH = package.path, LUA_CPATH = package.cpath,
                   XDG_CONFIG_HOME = config_home }
    for k, v in pairs(env or {}) do vars[k] = v end
    local assigns = {}
    for k, v in pairs(vars) do assigns[#assigns + 1] = k .. "=" .. q(v) end
    table.sort(assigns)
    local quoted = {}
    for i, x in ipairs(args) do quoted[i] = q(x) end
    local cmd = ("cd %s && env -u GEOSERVICES_URL -u GEOSERVICES_TOKEN -u GEOSERVICES_PROFILE -u GEOSERVICES_PASSWORD "
      .. "%s lua5.4 -e %s /dev/null %s >%s 2>%s </dev/null"):format(q(helper.ROOT), table.concat(assigns, " "),
        q(CLI), table.concat(quoted, " "), q(out), q(err))
    local _, _, code = os.execute(cmd)
    local r = { code = code, out = helper.read_all(out) or "", err = helper.read_all(err) or "" }
    os.remove(out)
    os.remove(err)
    return r
  end

  setup(function()
    a, b = site(), site()
  end)
  teardown(function()
    a:stop()
    b:stop()
  end)
  before_each(function()
    dir = helper.tmp_dir()
    config_home = dir .. "/config"
    os.execute("mkdir -p " .. q(config_home .. "/geoservices"))
    helper.write_file(dir .. "/a.token", "secret-token-of-A")
    helper.write_file(dir .. "/d.token", "secret-token-of-default")
    helper.write_file(dir .. "/a.password", "password-of-A")
    helper.write_file(config_home .. "/geoservices/config", ([[
[default]
url = %s
token_file = %s

[work]
url = %s
token_file = %s

[worklogin]
url = %s
username = alice
password_file = %s
]]):format(a.url, dir .. "/d.token", a.url, dir .. "/a.token", a.url, dir .. "/a.password"))
  end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  -- Which site got the request, and whether any secret of a profile reached B.
  local function outcome(r, before_a, before_b)
    local text_a, n_a = received(a)
    local text_b, n_b = received(b)
    return { a = n_a > before_a, b = n_b > before_b, code = r.code, err = r.err, text_a = text_a, text_b = text_b }
  end

  local function counts()
    return #a:requests(), #b:requests()
  end

  it("--url beats --profile, and the profile's token does not go to the other URL", function()
    local na, nb = counts()
    local r = run{ "--profile", "work", "--url", b.url, "snapshots", "nb-1" }
    local o = outcome(r, na, nb)
    assert.is_false(o.a)
    assert.is_true(o.b, r.out .. r.err)
    assert.falsy(o.text_b:find("secret-token-of-A", 1, true))
    assert.truthy(r.err:find("profile 'work' is for " .. a.url .. ", not " .. b.url, 1, true), r.err)
  end)

  it("--profile beats $GEOSERVICES_URL: the profile's server gets the request with its token", function()
    local na, nb = counts()
    local r = run({ "--profile", "work", "snapshots", "nb-1" }, { GEOSERVICES_URL = b.url })
    local o = outcome(r, na, nb)
    assert.equal(0, r.code, r.out .. r.err)
    assert.is_true(o.a)
    assert.is_false(o.b)
    assert.truthy(o.text_a:find("secret-token-of-A", 1, true))
  end)

  it("$GEOSERVICES_URL beats $GEOSERVICES_PROFILE, whose token stays home", function()
    local na, nb = counts()
    local r = run({ "snapshots", "nb-1" }, { GEOSERVICES_URL = b.url, GEOSERVICES_PROFILE = "work" })
    local o = outcome(r, na, nb)
    assert.is_false(o.a)
    assert.is_true(o.b, r.out .. r.err)
    assert.falsy(o.text_b:find("secret-token-of-A", 1, true))
    assert.truthy(r.err:find("profile 'work' is for", 1, true), r.err)
  end)

  it("$GEOSERVICES_URL beats [default], whose token stays home", function()
    local na, nb = counts()
    local r = run({ "snapshots", "nb-1" }, { GEOSERVICES_URL = b.url })
    local o = outcome(r, na, nb)
    assert.is_true(o.b, r.out .. r.err)
    assert.falsy(o.text_b:find("secret-token-of-default", 1, true))
  end)

  it("$GEOSERVICES_PROFILE beats [default]", function()
    local na, nb = counts()
    local r = run({ "snapshots", "nb-1" }, { GEOSERVICES_PROFILE = "work" })
    local o = outcome(r, na, nb)
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(o.text_a:find("secret-token-of-A", 1, true))
    assert.falsy(o.text_a:find("secret-token-of-default", 1, true))
  end)

  it("a profile whose URL is the one in effect keeps its credentials", function()
    local na, nb = counts()
    local r = run({ "snapshots", "nb-1" }, { GEOSERVICES_URL = a.url .. "/" })
    local o = outcome(r, na, nb)
    assert.equal(0, r.code, r.out .. r.err)
    assert.truthy(o.text_a:find("secret-token-of-default", 1, true))
    assert.equal("", r.err)
  end)

  it("login --profile stores the token for the profile's URL, not $GEOSERVICES_URL's", function()
    local na, nb = counts()
    local r = run({ "--profile", "worklogin", "login" }, { GEOSERVICES_URL = b.url })
    local o = outcome(r, na, nb)
    assert.equal(0, r.code, r.out .. r.err)
    assert.is_true(o.a)
    assert.is_false(o.b)
    assert.falsy(o.text_b:find("password-of-A", 1, true))
    local stored = helper.read_all(config_home .. "/geoservices/tokens/worklogin.json")
    assert.truthy(stored:find(a.url, 1, true), stored)
  end)
end)
