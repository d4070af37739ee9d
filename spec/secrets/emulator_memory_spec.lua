-- The emulator returns the memory of a large request once it has answered
-- it (issue 30): a 64 MiB form field (urlencoded, and a multipart field)
-- leaves the emulator's resident memory where it was, within a few MiB,
-- instead of holding the decoded value until some later allocation runs
-- the collector. (spec/bench/emulator_body_rss.sh measures 256 MiB.)
local helper = require "spec.helper"

local q = helper.shell_quote
local MIB = 1024 * 1024
local SIZE = 64 * MIB

local function rss_kib(pid)
  local text = helper.read_all("/proc/" .. pid .. "/status") or ""
  return tonumber(text:match("VmRSS:%s+(%d+)"))
end

describe("the emulator after a large request", function()
  local emu, dir
  setup(function()
    emu = helper.start_emulator()
    dir = helper.tmp_dir()
    local f = assert(io.open(dir .. "/form.txt", "wb"))
    f:write("f=json&big=")
    local block = ("a"):rep(MIB)
    for _ = 1, SIZE // MIB do f:write(block) end
    f:close()
    f = assert(io.open(dir .. "/value", "wb"))
    for _ = 1, SIZE // MIB do f:write(block) end
    f:close()
  end)
  teardown(function()
    emu:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  for _, case in ipairs{ "an urlencoded field", "a multipart field" } do
    it(("gives back the memory of %s of 64 MiB once it answered"):format(case), function()
      local args
      if case:match("urlencoded") then
        args = "--data-binary @" .. q(dir .. "/form.txt")
      else
        args = "-F f=json -F " .. q("big=<" .. dir .. "/value")
      end
      local before = rss_kib(emu.pid)
      local cmd = ("env -u LD_PRELOAD curl -s -o %s -w '%%{http_code}' --max-time 120 %s %s"):format(
        q(dir .. "/out"), args, q(emu.root .. "/_emulator/echo"))
      local p = io.popen(cmd)
      local code = p:read("a")
      p:close()
      assert.equal("200", code, helper.read_all(dir .. "/out"))
      assert.truthy(helper.read_all(dir .. "/out"):find('"length":' .. SIZE, 1, true))
      -- answered: the memory goes back without another request
      local after
      local deadline = os.time() + 5 * helper.WAIT_SCALE -- scaled as every wait: a loaded machine's emulator is slow
      repeat
        helper.sleep(0.1)
        after = rss_kib(emu.pid)
      until after - before < 16 * 1024 or os.time() > deadline
      assert.is_true(after - before < 16 * 1024, ("RSS %d MiB before, %d MiB after"):format(before // 1024,
        after // 1024))
    end)
  end
end)
