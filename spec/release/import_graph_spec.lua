-- The import graph (`make graph`, .ci/import-graph; `make check` and `make
-- lint` run it): data flows one way, so a circle of Lua requires (one
-- inside a function too) or of C includes fails the lanes, naming the
-- files; the tree itself has none.
local helper = require "spec.helper"

local q = helper.shell_quote
local GRAPH = helper.ROOT .. "/.ci/import-graph"

local function write(path, text)
  assert(os.execute("mkdir -p " .. q(path:match("^(.*)/[^/]*$"))))
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- Runs the graph in dir; returns its exit code and output.
local function graph(dir)
  local out = helper.tmp_name()
  local _, _, code = os.execute(("cd %s && lua5.4 %s > %s 2>&1"):format(q(dir), q(GRAPH), q(out)))
  return code, helper.read_all(out)
end

-- A tree of two modules and two C files, a circle in each graph when asked.
local function tree(lua_circle, c_circle)
  local dir = helper.tmp_dir()
  write(dir .. "/lua/geoservices/base.lua", "local m = {}\nreturn m\n")
  write(dir .. "/lua/geoservices/top.lua", 'local base = require "geoservices.base"\nreturn base\n')
  if lua_circle then -- closed by a require inside a function, as the four of issue 40 were
    write(dir .. "/lua/geoservices/base.lua",
      'local m = {}\nfunction m.f() return require("geoservices.top") end\nreturn m\n')
  end
  write(dir .. "/csrc/a.h", '#include "b.h"\n')
  write(dir .. "/csrc/b.h", c_circle and '#include "a.h"\n' or "\n")
  return dir
end

describe("the import graph", function()
  it("passes a tree without a circle", function()
    local code, out = graph(tree(false, false))
    assert.equal(0, code, out)
    assert.truthy(out:find("lua: 2 nodes, 1 edges, 0 circles", 1, true), out)
    assert.truthy(out:find("c-inc: 2 nodes, 1 edges, 0 circles", 1, true), out)
  end)

  it("fails on a circle of Lua requires, one inside a function, naming both modules", function()
    local code, out = graph(tree(true, false))
    assert.equal(1, code, out)
    assert.truthy(out:find("lua: 2 nodes, 2 edges, 1 circle", 1, true), out)
    assert.truthy(out:find("geoservices.base -> geoservices.top", 1, true), out)
    assert.truthy(out:find("geoservices.top -> geoservices.base", 1, true), out)
  end)

  it("fails on a circle of C includes", function()
    local code, out = graph(tree(false, true))
    assert.equal(1, code, out)
    assert.truthy(out:find("csrc/a.h -> csrc/b.h", 1, true), out)
    assert.truthy(out:find("csrc/b.h -> csrc/a.h", 1, true), out)
  end)

  it("finds none in this tree's Lua and C includes", function()
    local code, out = graph(helper.ROOT)
    assert.equal(0, code, out)
    assert.truthy(out:find("lua: %d+ nodes, %d+ edges, 0 circles"), out)
    assert.truthy(out:find("c%-inc: %d+ nodes, %d+ edges, 0 circles"), out)
  end)
end)
