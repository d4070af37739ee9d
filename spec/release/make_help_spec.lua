-- `make help` is generated from the Makefile's `## ` comments: every target
-- a person runs (the .PHONY names) has one, and the list names exactly those.
local helper = require "spec.helper"

local function makefile_lines()
  local lines = {}
  for line in helper.read_all(helper.ROOT .. "/Makefile"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  return lines
end

-- the literal names of the .PHONY lines (continuations included), not the
-- variables ($(CTEST_RUNS): one per C test) nor the internal FORCE and warncheck
local function phony_targets(lines)
  local names, seen, taking = {}, {}, false
  for _, line in ipairs(lines) do
    local rest = line:match("^%.PHONY:(.*)$")
    if rest then taking = true else rest = taking and line or nil end
    if rest then
      for name in rest:gmatch("[^%s\\]+") do
        if not name:match("^%$") and name ~= "FORCE" and name ~= "warncheck" and not seen[name] then
          seen[name] = true
          names[#names + 1] = name
        end
      end
      taking = line:match("\\%s*$") ~= nil
    end
  end
  return names
end

describe("make help", function()
  local lines = makefile_lines()
  local phony = phony_targets(lines)

  it("has a ## comment right above every phony target's rule", function()
    assert.is_true(#phony >= 20, "phony targets found: " .. #phony)
    local missing = {}
    for _, name in ipairs(phony) do
      local documented = false
      for i, line in ipairs(lines) do
        if line:sub(1, #name + 1) == name .. ":" and i > 1 and lines[i - 1]:match("^## ") then documented = true end
      end
      if not documented then missing[#missing + 1] = name end
    end
    assert.same({}, missing)
  end)

  it("lists every phony target, and only targets make knows", function()
    local out, ok = helper.run_shell("cd " .. helper.shell_quote(helper.ROOT) .. " && make -s help")
    assert.is_true(ok, out)
    local listed = {}
    for line in out:gmatch("[^\n]+") do listed[#listed + 1] = line:match("^  make (%S+)") end
    table.sort(listed)
    local want = { table.unpack(phony) }
    table.sort(want)
    assert.same(want, listed)
    -- make's own database (-p, nothing run: -q and the empty target ':')
    local db = helper.run_shell("cd " .. helper.shell_quote(helper.ROOT) .. " && make -pRrq : 2>/dev/null")
    for _, name in ipairs(listed) do
      assert.truthy(db:find("\n" .. name:gsub("%-", "%%-") .. ":"), name .. " is not a target")
    end
  end)
end)
