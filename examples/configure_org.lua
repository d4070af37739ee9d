-- Configures the emulator's organization (configure, 4.2) and shows the
-- stages live: a list redrawn in place on a terminal, one line per stage
-- transition otherwise (a log file, CI).
--   sh examples/run_with_emulator.sh examples/configure_org.lua
-- GEOSERVICES_URL is the {base_url}, set by run_with_emulator.sh.
local geoservices = require "geoservices"

local url = os.getenv("GEOSERVICES_URL") or "http://127.0.0.1:8080/server"
local admin = geoservices.client{ url = url, token = os.getenv("GEOSERVICES_TOKEN") or "admin-token" }
local tty = os.execute("test -t 1") == true

local params = {
  username = "siteadmin",
  password = os.getenv("ORG_ADMIN_PASSWORD") or "Change-me-2024",
  email = "siteadmin@example.com",
  fullName = "Site Administrator",
  securityQuestionIdx = 1,   -- geoservices.SECURITY_QUESTIONS[1]
  securityQuestionAns = os.getenv("ORG_ADMIN_ANSWER") or "Springfield",
  userLicenseTypeId = "creatorUT",
  licenseFile = "examples/data/sample.prvc", -- streamed from disk when sent
  volumesConfig = geoservices.volumes{ storage_class = "standard" },
  systemArchitectureProfile = "development",
}

print("== what would be sent (dry run: validated, nothing sent, secrets redacted)")
local preview = tostring(assert(admin:configure(params, { dry_run = true })))
print((preview:gsub("(volumesConfig = )[^\n]*", "%1{...eight volumes}")))

print("\n== a mistake is refused before anything is sent")
local bad = {}
for k, v in pairs(params) do bad[k] = v end
bad.securityQuestionIdx = 15
local _, err = admin:configure(bad)
print("  " .. tostring(err))

print("\n== configure (security question: " .. geoservices.SECURITY_QUESTIONS[params.securityQuestionIdx] .. ")")
local root, op = admin:configure(params, { wait = false })
if not root then
  io.stderr:write("configure failed: ", tostring(op), "\n")
  os.exit(1)
end

local MARK = { not_started = " ", in_progress = ">", completed = "x", not_applicable = "-" }
local function stage_line(stage)
  local took = ""
  if stage.state == "completed" and (stage.startTime or 0) > 0 then
    took = ("%5.1f s"):format((stage.lastUpdated - stage.startTime) / 1000)
  end
  return ("  [%s] %-32s %-15s %s"):format(MARK[stage.state] or "!", stage.name, stage.state, took)
end

-- On a terminal the list is redrawn in place: move up over the previous
-- drawing, then clear and rewrite each line.
local drawn = 0
local function draw(r)
  local out = {}
  if drawn > 0 then out[1] = ("\27[%dA"):format(drawn) end
  local stages = r.status.stages
  for _, stage in ipairs(stages) do out[#out + 1] = "\27[2K" .. stage_line(stage) .. "\n" end
  out[#out + 1] = "\27[2K  " .. tostring(r) .. "\n"
  io.write(table.concat(out))
  io.flush()
  drawn = #stages + 1
end

local started = os.time()
local on_stage
if tty then
  draw(root)
  on_stage = function() draw(op.root) end -- op.root is already the resource the change was seen in
else
  print("  " .. tostring(root))
  on_stage = function(stage, old)
    print(("  +%3ds  %-32s %s -> %s"):format(os.time() - started, stage.name, old, stage.state))
  end
end

local final, wait_err = op:wait{ poll_interval = 0.2, stall_after = 60, on_stage = on_stage }
if not final then
  io.stderr:write("configuration did not finish: ", tostring(wait_err), "\n")
  os.exit(1)
end
print(("\n%s (in about %d s)"):format(tostring(final), os.time() - started))

print("\n== re-attaching to a finished configuration returns at once; a second configure is refused")
print("  " .. tostring(assert(admin:wait_configured())))
_, err = admin:configure(params)
print("  " .. tostring(err))
