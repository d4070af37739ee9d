-- One store made by geoservices.store.create against a server (createReplica,
-- the result file downloaded and filled into the store) in its own process, so
-- its peak RSS is its own: the client's side of createReplica -> store.
--   lua5.4 spec/bench/store_download_one.lua SERVER_URL STORE_PATH [attachments]
-- With "attachments", returnAttachments (their bytes fetched by URL into the store).
-- Prints: download_create seconds features peak_rss_kib attachments_fetched
local common = require "spec.bench.common"
local core = require "geoservices.core"
local geoservices = require "geoservices"

local url, target, with_attachments = arg[1], arg[2], arg[3] == "attachments"
os.remove(target)
local t0 = core.monotonic()
local client = geoservices.client{ url = url, timeout = 600 }
local st = assert(geoservices.store.create(client, target, { service = "Bench", layers = { 0 },
  replicaName = "bench", syncModel = "perReplica", returnAttachments = with_attachments or nil }, { timeout = 600 }))
local secs = core.monotonic() - t0
local n = st:count(0)
local fetched = st.created.attachments and st.created.attachments.fetched or 0
st:close()
print(("download_create %.3f %d %d %d"):format(secs, n, common.peak_rss_kib(), fetched))
