-- One run's kill: the emulator set up for the target phase (a delay of one
-- route's answers, longer job statuses), the child started, and once it
-- reaches the phase's marker, after a random part of the phase, SIGKILL:
-- of the child, or of the emulator with the child's request in flight (the
-- child then killed too, or left to see the server vanish and come back).
-- The emulator is restarted with its state file; the phase each kill
-- landed in is read from the child's markers.
local helper = require "spec.helper"
local child_mod = require "spec.torture.child"
local phases = require "spec.torture.phases"

local M = {}

local function uniform(lo, hi) return lo + (hi - lo) * math.random() end

--- `run`: {dir, emu, mode, target, script, args, env, kill_emulator (false |
-- "with_child" | "alone")}. Returns {child_phase =, emulator_phase =,
-- child = the child (exited)}.
function M.run(r)
  local plan = phases.plan(r.target, r.mode)
  if plan.delay then r.emu:delay(plan.delay.route, plan.delay.ms) end
  if plan.settings then assert(r.emu:apply_settings(plan.settings)) end
  local env = {}
  for k, v in pairs(r.env or {}) do env[k] = v end
  env.TORTURE_PAUSE = plan.pause
  local child = child_mod.start(r.dir, r.script, r.args, env)
  local out = { child = child }
  local reached = child:wait_marker(plan.marker, 60)
  local scale = tonumber(os.getenv("TORTURE_WINDOW_SCALE")) or 1
  if reached then helper.sleep(uniform(plan.window[1], plan.window[2]) * scale) end
  local kill_emulator = r.kill_emulator and plan.in_flight and reached
  -- the phase is read just before the kill: once a process dies, the other
  -- moves on at once (a reset answer, a retry)
  if kill_emulator then
    out.emulator_phase = phases.landed(child:markers(), r.mode)
    r.emu:kill()
    if r.kill_emulator == "with_child" then
      helper.sleep(uniform(0, 0.1))
      out.child_phase = phases.landed(child:markers(), r.mode)
      child:kill()
    end
    r.emu:start() -- its state file: the same replicas, jobs, result files and log; no faults
  else
    out.child_phase = phases.landed(child:markers(), r.mode)
    child:kill()
    r.emu:clear_faults()
    if plan.settings then
      local restore = {}
      for k in pairs(plan.settings) do restore[k] = r.emu.settings[k] or {} end
      assert(r.emu:apply_settings(restore))
    end
  end
  child:wait_exit(180)
  if os.getenv("TORTURE_DEBUG") == "1" then
    io.stderr:write(("[%s -> child %s, emulator %s]\n%s\n"):format(r.target, tostring(out.child_phase),
      tostring(out.emulator_phase), child:text()))
  end
  return out
end

return M
