-- One store made by the CLI, `geoservices replica create Bench --layers 0
-- OUT.gpkg`, against a server (spec/bench/serve_replica.lua), in its own
-- process so that its peak RSS is its own: what a user's command costs,
-- beside spec/bench/store_download_one.lua's Lua API (issue 38: they take
-- one path and must stay flat alike).
--   lua5.4 spec/bench/cli_create_one.lua SERVER_URL STORE_PATH [attachments]
-- (with "attachments": --attachments, their bytes fetched by URL into the store)
-- Prints: cli_create seconds features peak_rss_kib exit_code
local common = require "spec.bench.common"
local core = require "geoservices.core"
local geoservices = require "geoservices"

local url, target = arg[1], arg[2]
os.remove(target)
local t0 = core.monotonic()
local args = { "--url", url, "replica", "create", "Bench", "--layers", "0", "--name", "bench", "--wait-timeout", "600",
               target }
if arg[3] == "attachments" then table.insert(args, #args, "--attachments") end
local code = require("geoservices.cli").main(args)
local secs = core.monotonic() - t0
local n = 0
local st = geoservices.store.open(target)
if st then
  n = st:count(0)
  st:close()
end
print(("cli_create %.3f %d %d %d"):format(secs, n, common.peak_rss_kib(), code or 0))
