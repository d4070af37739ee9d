-- Issue 34, F4: a sync that references uploaded edits (editsUploadId with
-- editsUploadFormat, any case of the vendor's SQLITE and JSON) carries
-- edits: sent once, never retried blindly, its outcome read back, and the
-- generation it moves is not taken for another copy's. The edits are
-- uploaded to the server's uploads (POST <service>/FeatureServer/
-- uploads/upload) as JSON; a gateway answers 504 while the server applies
-- the sync 2 s later. Driven through client:synchronize_replica, client:sync
-- with a state file and the store (st:sync with the parameters), against
-- the emulator and the documented double (spec/support/documented_server.py:
-- its uploads and editsUploadId as the vendor documents them); the cases
-- that need the emulator's faults, job outcomes or capability settings run
-- against it only. The client side's own spec, spec/sync/edits_upload_spec,
-- uses a scripted double.
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local world = require "spec.support.engine_world"

local E01, E03 = world.E01, world.E03
local CREW1 = "{5E1A0C2B-1111-4A5B-9C8D-000000000001}"
local NEW = "{D0C0DE00-0000-4000-8000-00000000F400}"

-- Uploads the edits (an add of NEW, its APN `apn` or "UPLOADED", an update of E01) as a JSON item;
-- returns its itemID.
local function upload_edits(server, owner, apn)
  return world.upload(server, { { id = 0, features = {
    adds = { { attributes = { GlobalID = NEW, APN = apn or "UPLOADED", OWNER = owner },
               geometry = { x = -117.2, y = 34.1 } } },
    updates = { { attributes = { GlobalID = E01, OWNER = owner } } } } } })
end

local function wait_applied(server)
  world.wait_ran(server, "the server to apply the request the gateway answered", 15)
end

-- A sync's options that carry the uploaded edits item `id` (JSON; `async`: as a job).
local function carrying(id, async)
  return { params = { editsUploadId = id, editsUploadFormat = "JSON", async = async or nil } }
end

-- Checks with `c` that `what` ("sync 2") answered `answer` (its result or error) saying the uploaded
-- item `id` is held: its outcome still to be read.
local function check_held(c, what, answer, id)
  local held = answer and answer.resolved and answer.resolved.uploaded
  c.check(held and held.id == id and held.kept, what .. " does not say the uploaded item is held: "
    .. tostring(answer and answer.resolved))
end

-- Checks with `c` that `what` ("sync 3") answered `answer` (its result or error) reporting the
-- uploaded item `id` settled, its outcome unknown.
local function check_unknown(c, what, answer, id)
  local settled = answer and answer.resolved and answer.resolved.uploaded
  c.check(settled and settled.id == id and settled.outcome == "unknown" and not settled.kept,
    what .. " does not report the uploaded item's outcome unknown: " .. tostring(answer and answer.resolved))
end

-- Checks with `c` that the sync that answered `err` was refused naming editsUploadId.
local function check_refused(c, err)
  c.check(err and err.kind == "invalid" and err.parameter == "editsUploadId",
    "the refusal does not name editsUploadId: " .. world.message_of(err))
end

-- The uploaded edits, counted in the server's change log for `origin`: each applied once, sent once.
local function check_once(c, server, origin)
  local attempts, applied = world.tally(server, origin)
  for _, key in ipairs{ "add|" .. NEW, "update|" .. E01 } do
    c.check((applied[key] or 0) == 1, ("%s applied %d times"):format(key, applied[key] or 0))
    c.check((attempts[key] or 0) == 1, ("%s sent %d times (a blind re-send of the uploaded edits)"):format(key,
      attempts[key] or 0))
  end
end

local SERVERS = {
  { "the emulator", function() return world.emulator() end, true },
  { "the documented double", function() return world.documented{ job_seconds = 0.3 } end, false },
}

for _, srv in ipairs(SERVERS) do
  local server_name, start_server, emulator = srv[1], srv[2], srv[3]
  -- the emulator's faults, job settings and capability settings: its tests only
  local emu_it = emulator and it or function() end

  describe("engine, uploaded edits (F4), " .. server_name .. ":", function()
    local server, dir

    world.each_test(function(s, d) server, dir = s, d end, start_server)

    local function client()
      return world.client(server, true)
    end

    for _, format in ipairs{ "JSON", "json" } do
      it("synchronize_replica, editsUploadFormat " .. format .. ", a 504: outcome unknown, sent once, applied once",
        function()
          local c = world.checker()
          -- the emulator's world has crew 1's replica; the double registers one
          local crew = emulator and { replicaID = CREW1, gen = 1 } or server:control("replica", { name = "crew-1" })
          local id = upload_edits(server, "uploaded")
          server:gateway("504", 1000)
          local cl = client()
          local r, err = cl:synchronize_replica("Parcels", { replicaID = crew.replicaID, replicaServerGen = crew.gen,
            syncDirection = "bidirectional", editsUploadId = id, editsUploadFormat = format,
            transportType = "esriTransportTypeEmbedded" })
          c.check(not r, "the sync reported success through a 504")
          c.check(err and err.outcome_unknown, "the 504's outcome is not flagged unknown: " .. world.message_of(err))
          server:gateway(nil)
          wait_applied(server)
          cl:close()
          check_once(c, server, crew.replicaID)
          c.done()
        end)
    end

    it("client:sync with a state file: sent once, the late application not taken for a copy", function()
      local c, cl, way = world.crew(server, world.state_way, dir)
      local id = upload_edits(server, "uploaded")
      server:gateway("504", 2000)
      world.unsynced(c, way, 1, "a 504", carrying(id))
      server:gateway(nil)
      world.synced(c, way, 2) -- at once, before the server applied sync 1
      wait_applied(server)
      server:crew_update(E03, { OWNER = "crew B" })
      world.synced(c, way, 3)
      c.check(way.pending() == 0, "the journal is still there")
      c.check(way.value(E03, "OWNER") == "crew B", "the other crew's change was not downloaded: OWNER "
        .. tostring(way.value(E03, "OWNER")))
      check_once(c, server, way.origin)
      world.finish(c, cl, way)
    end)

    -- client:resume_sync of an older sync's job (async, wait = false: its op saved; a later
    -- client:sync re-attached and finished it) after a sync whose uploaded edits file's answer was lost:
    -- the resumed result is not the state's to keep; the journal keeps the uploaded item, the next sync
    -- holds it, the one after reports its outcome unknown; never sent again. Before, the resumed job's
    -- result cleared the journal: the item was never held nor reported.
    emu_it("client:resume_sync of an older job keeps the uploaded item a later sync journaled", function()
      server:set{ job_step_ms = 50 }
      local c, cl, way = world.crew(server, world.state_way, dir)
      local op = assert(way.sync{ params = { async = true }, wait = false })
      local rb, eb = cl:sync(way.path, nil, { poll_interval = 0.05, timeout = world.SYNC_TIMEOUT })
      c.check(rb and rb.reattached, "the next sync did not finish the job: " .. world.message_of(eb))
      local id = upload_edits(server, "uploaded")
      server:gateway("504", 1000)
      c.check(not way.sync(carrying(id)), "the sync with the uploaded file reported success through a 504")
      server:gateway(nil)
      local resumed = assert(cl:resume_sync(op:to_json()))
      local rr, er = resumed:wait{ poll_interval = 0.05 }
      c.check(rr, "the resumed job gave no result: " .. world.message_of(er))
      c.check(way.pending() == 1, "the resumed job's result cleared the journal of the uploaded item")
      wait_applied(server)
      check_held(c, "sync 2", world.synced(c, way, 2), id)
      check_unknown(c, "sync 3", world.synced(c, way, 3), id)
      c.check(way.pending() == 0, "the journal is still there after sync 3")
      check_once(c, server, way.origin)
      world.finish(c, cl, way)
    end)

    -- client:resume_sync of the uploaded file's own job (async, wait = false), a job that will never
    -- give its result: it failed (nothing applied) or its result file is gone (applied). The resumed
    -- wait reads the attempt back as a sync re-attaching does: the item settled with its outcome
    -- unknown (err.resolved.uploaded, the error naming it), the journal cleared, never sent again.
    -- Before, the resumed wait failed with the journal untouched and the item not named.
    for _, case in ipairs{ { "its job failed", { job_outcome = "Failed" }, 0 },
                           { "its result file gone", { result_lifetime_s = 0 }, 1 } } do
      emu_it("client:resume_sync of the uploaded file's own job, " .. case[1] .. ": reported unknown, never sent again",
        function()
          server:set{ job_step_ms = 50 }
          local c, cl, way = world.crew(server, world.state_way, dir)
          local id = upload_edits(server, "uploaded")
          server:set(case[2])
          local opts = carrying(id, true)
          opts.wait = false
          local op = assert(way.sync(opts))
          local resumed = assert(cl:resume_sync(op:to_json()))
          local rr, er = resumed:wait{ poll_interval = 0.05 }
          c.check(not rr, "the resumed wait reported success")
          check_unknown(c, "the resumed wait", er, id)
          c.check(world.message_of(er):find("outcome of the uploaded edits (item " .. id, 1, true),
            "the resumed wait's error does not name the uploaded item: " .. world.message_of(er))
          c.check(way.pending() == 0, "the journal is still there after the resumed wait")
          server:set{ job_outcome = "Completed", result_lifetime_s = 600 }
          world.synced(c, way, 2)
          local attempts, applied = world.tally(server, way.origin)
          c.check((attempts["add|" .. NEW] or 0) <= 1, "the uploaded add was sent again")
          c.check((applied["add|" .. NEW] or 0) == case[3], ("the uploaded add applied %d times (%d expected)"):format(
            applied["add|" .. NEW] or 0, case[3]))
          world.finish(c, cl, way)
        end)
    end

    -- client:sync with a state file, no edits of the caller's, an uploaded edits file given while an
    -- earlier sync's job (no uploaded file) is pending: refused naming editsUploadId, nothing sent; the
    -- file goes with a later sync, applied once. Before, the sync re-attached to the job, took its result
    -- for the whole answer and returned success without sending the file: the upload silently dropped.
    emu_it("client:sync, an uploaded edits file given while an earlier job is pending: refused, not dropped",
      function()
        server:set{ job_step_ms = 50 }
        local c, cl, way = world.crew(server, world.state_way, dir)
        assert(server.emu:control("faults", { route = "jobs", kind = "status", status = 404,
                                              attempts = { server.emu:count("jobs") + 1 } }))
        local _, e1 = cl:sync(way.path, nil, { params = { async = true }, poll_interval = 0.05,
                                               timeout = world.SYNC_TIMEOUT })
        c.check(e1 and e1.pending, "the first sync's job is not pending: " .. world.message_of(e1))
        local id = upload_edits(server, "uploaded")
        local opts = { params = { editsUploadId = id, editsUploadFormat = "JSON" }, poll_interval = 0.05,
                       timeout = world.SYNC_TIMEOUT }
        local r2, e2 = cl:sync(way.path, nil, opts)
        c.check(not r2, "the sync reported success while its uploaded edits file was not sent")
        check_refused(c, e2)
        local r3, e3 = cl:sync(way.path, nil, { poll_interval = 0.05, timeout = world.SYNC_TIMEOUT })
        c.check(r3, "the sync that finishes the job failed: " .. world.message_of(e3))
        local r4, e4 = cl:sync(way.path, nil, opts)
        c.check(r4, "the sync with the uploaded file failed: " .. world.message_of(e4))
        check_once(c, server, way.origin)
        world.finish(c, cl, way)
      end)

    -- No attempt left: the store's attempt table, the state file's journal.
    local function no_attempt(way)
      if way.st then return way.st:attempt() == false end
      return way.pending() == 0
    end

    -- A store or a state file (`make_way`: world.store_way or world.state_way, one engine) after a
    -- sync with uploaded edits whose answer was lost (gateway `mode`): the server applies them
    -- `delay_ms` later, after the next sync (late) or before it (`applied_first`).
    -- The next sync holds the attempt (it sends nothing of it again, and takes a move of the
    -- generation for its own), the one after settles it unknown; no sync is refused as another copy,
    -- and a later crew's change downloads.
    local function lost_answer_case(make_way, mode, delay_ms, applied_first)
      local c, cl, way = world.crew(server, make_way, dir)
      local id = upload_edits(server, "uploaded")
      server:gateway(mode, delay_ms)
      local _, e1 = world.unsynced(c, way, 1, "a lost answer", carrying(id))
      c.check(e1 and e1.outcome_unknown, "sync 1's outcome is not flagged unknown: " .. world.message_of(e1))
      local unknown = ("the outcome of the uploaded edits file (editsUploadId %s) is unknown"):format(id)
      c.check(world.message_of(e1):find(unknown, 1, true), "sync 1's error does not say the uploaded item's outcome "
        .. "is unknown: " .. world.message_of(e1))
      server:gateway(nil)
      if applied_first then wait_applied(server) end
      check_held(c, "sync 2", world.synced(c, way, 2), id)
      wait_applied(server)
      server:crew_update(E03, { OWNER = "crew B" })
      check_unknown(c, "sync 3", world.synced(c, way, 3), id)
      c.check(way.value(E03, "OWNER") == "crew B", "the other crew's change was not downloaded")
      c.check(no_attempt(way), "an attempt is still recorded after sync 3")
      server:crew_update(E03, { OWNER = "crew C" })
      world.synced(c, way, 4)
      c.check(way.value(E03, "OWNER") == "crew C", "sync 4 did not download the other crew's change")
      check_once(c, server, way.origin)
      world.finish(c, cl, way)
    end

    -- The held uploaded item passed again: refused naming editsUploadId, nothing sent.
    local function passed_again_case(make_way)
      local c, cl, way = world.crew(server, make_way, dir)
      local id = upload_edits(server, "uploaded")
      server:gateway("504", 2000)
      world.unsynced(c, way, 1, "a 504", carrying(id))
      server:gateway(nil)
      local before = server:sync_requests()
      local r2, e2 = way.sync(carrying(id))
      c.check(not r2, "the held item was sent again")
      check_refused(c, e2)
      c.check(server:sync_requests() == before, "a synchronizeReplica left with the refusal")
      c.check(world.message_of(e2):find(id, 1, true) and world.message_of(e2):find("synchronize without "
        .. "editsUploadId until a synchronization reports it resolved", 1, true),
        "the refusal does not name the held item and what to do: " .. world.message_of(e2))
      wait_applied(server)
      -- the hold is sync 3's: the refused sync 2 did not take it
      check_held(c, "sync 3", world.synced(c, way, 3), id)
      world.synced(c, way, 4)
      c.check(no_attempt(way), "an attempt is still recorded after sync 4")
      check_once(c, server, way.origin)
      world.finish(c, cl, way)
    end

    -- The uploaded item's request lost before the server read it, and the next sync's own request
    -- (it holds the item) lost too: the item is not forgotten, the sync after reports it unknown, and
    -- it is never sent again (the server never applies it).
    local function held_sync_lost_case(make_way)
      local c, cl, way = world.crew(server, make_way, dir)
      local id = upload_edits(server, "uploaded")
      -- sync 1's request and sync 2's (a download, which the client tries again) reset before the server reads them
      server:lose_requests{ 1, 2, 3, 4, 5, 6 }
      world.unsynced(c, way, 1, "a reset", carrying(id))
      world.unsynced(c, way, 2, "its resets")
      check_unknown(c, "sync 3", world.synced(c, way, 3), id)
      world.synced(c, way, 4)
      c.check(no_attempt(way), "an attempt is still recorded after sync 4")
      local attempts = world.tally(server, way.origin)
      c.check((attempts["add|" .. NEW] or 0) == 0, "the uploaded edits were sent again")
      world.finish(c, cl, way)
    end

    -- An earlier sync's job (async, the uploaded item) not finished when that sync ended (its first
    -- status poll answered 404: the job stays pending, err.pending, the next sync re-attaches), and the
    -- same item passed again: refused naming editsUploadId, nothing sent (before, the re-attached job
    -- applied it and the same sync sent it again: sent twice). The next sync without it finishes the
    -- job: each uploaded edit applied once, sent once.
    local function job_pending_case(make_way)
      server:set{ job_step_ms = 50 }
      local c, cl, way = world.crew(server, make_way, dir)
      local id = upload_edits(server, "uploaded")
      assert(server.emu:control("faults", { route = "jobs", kind = "status", status = 404,
                                            attempts = { server.emu:count("jobs") + 1 } }))
      local r1, e1 = way.sync(carrying(id, true))
      c.check(not r1 and e1 and e1.pending, "sync 1's job is not pending: " .. world.message_of(e1))
      local before = server:sync_requests()
      local r2, e2 = way.sync(carrying(id, true))
      c.check(not r2, "the uploaded item was sent again while the job that carries it was pending")
      check_refused(c, e2)
      c.check(world.message_of(e2):find(id, 1, true), "the refusal does not name the pending item: "
        .. world.message_of(e2))
      c.check(server:sync_requests() == before, "a synchronizeReplica left with the refusal")
      world.synced(c, way, 3)
      c.check(no_attempt(way), "an attempt is still recorded after sync 3")
      wait_applied(server)
      check_once(c, server, way.origin)
      world.finish(c, cl, way)
    end

    -- Rollback forced (a perReplica-only service without supportsRollbackOnFailure) and an uploaded
    -- file with an edit the server refuses: the request is refused as a whole. The engine's split
    -- (F3) and its retry after a failed job need journaled edits, and the form refuses edits beside
    -- editsUploadId, so the item goes once: one request, nothing applied, the server's words told.
    local function refused_whole_case(make_way, async, names)
      server:set{ supports_rollback_on_failure = false, supports_per_layer_sync = false,
                  rollback_names_edits = names, field_lengths = true, job_step_ms = 50 }
      local c, cl, way = world.crew(server, make_way, dir)
      local id = upload_edits(server, "uploaded", "APN-LONGER-THAN-20-CHARS")
      local before = server:sync_requests()
      local r1, e1 = way.sync(carrying(id, async))
      c.check(not r1, "a sync whose uploaded file the server refused reported success")
      c.check(world.message_of(e1):find("rolled back", 1, true), "the server's words are not told: "
        .. world.message_of(e1))
      c.check(server:sync_requests() - before == 1, ("%d synchronizeReplica requests for one uploaded file"):format(
        server:sync_requests() - before))
      world.synced(c, way, 2)
      c.check(no_attempt(way), "an attempt is still recorded after sync 2")
      local attempts, applied = world.tally(server, way.origin)
      c.check(next(applied) == nil, "an edit of the refused file was applied")
      c.check((attempts["add|" .. NEW] or 0) <= 1, ("the uploaded add sent %d times"):format(attempts["add|" .. NEW]))
      world.finish(c, cl, way)
    end

    for _, w in ipairs(world.WAYS) do
      local name, make_way = w[1], w[2]
      emu_it(name .. ": the held sync's own request lost, the uploaded item is not forgotten", function()
        held_sync_lost_case(make_way)
      end)

      it(name .. " (sync with the parameters), a 504 applied late: sent once, never taken for a copy", function()
        lost_answer_case(make_way, "504", 2000, false)
      end)

      it(name .. ", a 504 the server applies before the next sync: sent once, never taken for a copy", function()
        lost_answer_case(make_way, "504", 200, true)
      end)

      it(name .. ", an answer dropped and applied late: sent once, never taken for a copy", function()
        lost_answer_case(make_way, "drop", 2000, false)
      end)

      it(name .. ": the held uploaded item passed again is refused, nothing sent", function()
        passed_again_case(make_way)
      end)

      emu_it(name .. ": the item passed again while the job that carries it is pending is refused, sent once",
        function()
          job_pending_case(make_way)
        end)

      for _, async in ipairs{ false, true } do
        for _, names in ipairs{ true, false } do
          emu_it(("%s: rollback forced, the uploaded file refused whole (%s, the refusal %s): sent once, never split")
            :format(name, async and "a job" or "synchronous", names and "names the edit" or "names none"), function()
            refused_whole_case(make_way, async, names)
          end)
        end
      end
    end

    it("the store, a sync with uploaded edits answered at once: applied once, the generation moves", function()
      local c, cl, way = world.crew(server, world.store_way, dir)
      local id = upload_edits(server, "uploaded")
      local before = way.st:replica().replicaServerGen
      local r, e = way.sync{ params = { editsUploadId = id, editsUploadFormat = "Json" } }
      c.check(r, "the sync failed: " .. world.message_of(e))
      local after = way.st:replica().replicaServerGen
      c.check(after > before, ("the store's generation did not move: %s -> %s"):format(before, after))
      c.check(way.st:attempt() == false, "an attempt is still recorded")
      server:crew_update(E03, { OWNER = "crew B" })
      world.synced(c, way, 2)
      c.check(way.value(E03, "OWNER") == "crew B", "the other crew's change was not downloaded")
      check_once(c, server, way.origin)
      world.finish(c, cl, way)
    end)

    it("a sync with uploaded edits and no gateway: applied once, the state's generation moves", function()
      local c, cl, way = world.crew(server, world.state_way, dir)
      local id = upload_edits(server, "uploaded")
      local before = json.decode(helper.read_all(way.path)).replicaServerGen
      local r, e = way.sync{ params = { editsUploadId = id, editsUploadFormat = "Json" } }
      c.check(r, "the sync failed: " .. world.message_of(e))
      local after = json.decode(helper.read_all(way.path)).replicaServerGen
      c.check(after > before, ("the state's generation did not move: %s -> %s"):format(before, after))
      c.check(way.pending() == 0, "the journal is still there")
      check_once(c, server, way.origin)
      world.finish(c, cl, way)
    end)
  end)
end

