-- The planted data-loss bugs of `make mutate` (spec/mutations/NN-name.patch,
-- spec/mutations/run.sh) guard the safety net only while they still apply:
-- a refactor that moves the code they patch turns a patch into one that
-- "no longer applies" and the net silently stops checking that bug (three
-- did after the store's move into folders). This spec, in the normal lane,
-- fails as soon as one no longer applies to the tree or names a spec that
-- is gone, so the patch is remade with the change that moved its code.
local helper = require "spec.helper"

local q = helper.shell_quote
local DIR = helper.ROOT .. "/spec/mutations"

local function patches()
  local list = {}
  local p = assert(io.popen("ls " .. q(DIR)))
  for name in p:lines() do
    if name:match("^%d+%-.*%.patch$") then list[#list + 1] = name end
  end
  p:close()
  return list
end

local function header(text, key)
  return text:match("\n?" .. key .. ": *([^\n]*)")
end

describe("the planted bugs of make mutate", function()
  local list = patches()

  it("are there (one per data-loss bug the net claims to catch)", function()
    assert.is_true(#list >= 20, ("%d patches"):format(#list))
  end)

  for _, name in ipairs(list) do
    it(name .. " applies to the tree and names specs that exist", function()
      local text = helper.read_all(DIR .. "/" .. name)
      assert.is_truthy(header(text, "Mutation"), "no Mutation: line")
      local specs = header(text, "Specs")
      assert.is_truthy(specs, "no Specs: line")
      for spec in specs:gmatch("%S+") do
        local f = io.open(helper.ROOT .. "/" .. spec)
        assert.is_truthy(f, spec .. " is gone")
        f:close()
      end
      local out = helper.tmp_name()
      local ok = os.execute(("cd %s && git apply --check %s > %s 2>&1"):format(
        q(helper.ROOT), q(DIR .. "/" .. name), q(out)))
      assert.is_true(ok == true, name .. " no longer applies: remake it against the code\n"
        .. helper.read_all(out))
    end)
  end
end)
