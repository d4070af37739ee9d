-- Plays the conflict matrix (spec/oracle/matrix.lua) against the emulator
-- with real replica stores, and holds what they end with against the
-- oracle (spec/oracle/model.lua). Counts, over every case:
--
-- * lost: a local edit whose value is neither on the server nor in the
--   conflicts of the replica that made it (read from the server and the
--   stores), unless the oracle says a later edit replaced it knowing it
--   (made from a copy that held it);
-- * false conflicts: a conflict a replica lists that the oracle does not
--   (identical or disjoint edits must merge);
-- * silent winners: a conflict the oracle expects that the replica does
--   not list (someone's value overwritten or dropped without a word);
-- * mismatches: the server or a replica holding other values than the
--   oracle says, a sync that failed.
local geoservices = require "geoservices"
local matrix = require "spec.oracle.matrix"
local model = require "spec.oracle.model"

local driver = {}

local LAYER = 0

local function values_of(f)
  if not f then return nil end
  local g = f.geometry or {}
  return { OWNER = f.attributes.OWNER, APN = f.attributes.APN,
           POINT = g.x and matrix.point_text(g.x, g.y) or nil }
end

local function same_values(a, b)
  if not a or not b then return a == b end
  for _, k in ipairs(model.FIELDS) do
    if a[k] ~= b[k] then return false end
  end
  return true
end

local function key(gid) return (tostring(gid):upper():gsub("[{}]", "")) end

--- Runs batches; returns the counts.
-- @tparam table o `emu` (a started spec.helper emulator), `dir`, `batches` (matrix.batches), `policy`
--   (sync option `conflicts` and the oracle's: "manual", "server" or "local"), `log` (function(line), optional)
function driver.run(o)
  local counts = { cases = 0, lost = 0, false_conflicts = 0, silent = 0, mismatches = 0, by_kind = {},
                   expected = 0, examples = {}, labels = {} }
  local function note(what, case, detail)
    if #counts.examples < (tonumber(os.getenv("ORACLE_EXAMPLES")) or 12) then
      counts.examples[#counts.examples + 1] = ("%s: case %d (%s): %s"):format(what, case.id, case.label, detail)
    end
  end
  local client = geoservices.client{ url = o.emu.url, token = "alice-token", timeout = 60 }
  for b, batch in ipairs(o.batches) do
    o.emu:reset()
    o.emu:control("settings", { job_step_ms = 10 })
    local function create(name)
      return assert(geoservices.store.create(client, ("%s/b%d-%s.gpkg"):format(o.dir, b, name),
        { service = "Parcels", layers = { LAYER }, replicaName = ("b%d-%s"):format(b, name),
          syncModel = "perReplica" }, { poll_interval = 0.02, timeout = 60 }))
    end
    -- the cases' features, on the server before the replicas are made
    local seed = create("seed")
    for _, case in ipairs(batch.cases) do
      case.gid = assert(seed:add(LAYER, { attributes = { OWNER = case.initial.OWNER, APN = case.initial.APN },
                                          geometry = matrix.geometry_of(case.initial.POINT) }))
      case.add_gids = {}
    end
    assert(seed:sync(client))
    seed:close()
    local stores = {}
    for r = 1, batch.replicas do stores[r] = create("r" .. r) end
    local failures = {}
    local function sync(r)
      local result, err = stores[r]:sync(client, { conflicts = o.policy or "manual", timeout = 60 })
      if not result then failures[#failures + 1] = ("sync of r%d: %s"):format(r, tostring(err)) end
      if os.getenv("ORACLE_TRACE") then io.stderr:write(("r%d: %s\n"):format(r, tostring(result or err))) end
    end
    local performed = {}
    for _, ev in ipairs(batch.schedule) do
      local what, r = ev[1], ev[2]
      if what == "E" then
        local st = stores[r]
        for _, case in ipairs(batch.cases) do
          local op = case.ops[r]
          performed[case] = performed[case] or {}
          if op.kind == "add" then
            case.add_gids[r] = assert(st:add(LAYER, { attributes = { OWNER = op.value.OWNER, APN = op.value.APN },
                                                      geometry = matrix.geometry_of(op.value.POINT) }))
            performed[case][r] = true
          elseif st:get(LAYER, case.gid) then
            performed[case][r] = true
            if op.kind == "delete" then
              assert(st:delete(LAYER, case.gid))
            elseif op.kind == "move" then
              assert(st:update(LAYER, { attributes = { GlobalID = case.gid },
                                        geometry = matrix.geometry_of(op.value) }))
            else
              assert(st:update(LAYER, { attributes = { GlobalID = case.gid, [op.field] = op.value } }))
            end
          end
        end
      else
        sync(r)
      end
    end
    for _ = 1, 2 do
      for r = 1, batch.replicas do sync(r) end
    end
    -- what the server and the stores hold
    local features = o.emu:control("state").featureServices.Parcels.layers[tostring(LAYER)].features
    local on_server = {}
    for gid, f in pairs(features) do
      if not f.deleted then on_server[key(gid)] = f end
    end
    local listed = {}
    for r = 1, batch.replicas do
      listed[r] = {}
      for _, k in ipairs(assert(stores[r]:conflicts())) do
        local l = listed[r][key(k.globalId)] or {}
        l[#l + 1] = k
        listed[r][key(k.globalId)] = l
      end
    end
    for _, case in ipairs(batch.cases) do
      counts.cases = counts.cases + 1
      counts.labels[case.label] = (counts.labels[case.label] or 0) + 1
      local want = model.run(case, batch.schedule, o.policy)
      for _, f in ipairs(failures) do note("sync failed", case, f) end
      if #failures > 0 then counts.mismatches = counts.mismatches + 1 end
      local server = values_of(on_server[key(case.gid)])
      if not same_values(server, want.server or nil) then
        counts.mismatches = counts.mismatches + 1
        note("server", case, ("holds %s, the oracle says %s"):format(server and (server.OWNER .. "|" .. server.APN ..
          "|" .. tostring(server.POINT)) or "nothing", want.server and (want.server.OWNER .. "|" .. want.server.APN
          .. "|" .. want.server.POINT) or "nothing"))
      end
      for r = 1, batch.replicas do
        if (performed[case] or {})[r] ~= (want.performed[r] and true) then
          counts.mismatches = counts.mismatches + 1
          note("edit", case, ("r%d could%s make its edit, the oracle says otherwise"):format(r,
            (performed[case] or {})[r] and "" or " not"))
        end
        local mine = values_of(stores[r]:get(LAYER, case.gid))
        if not same_values(mine, want.replica[r]) then
          counts.mismatches = counts.mismatches + 1
          note("replica", case, ("r%d holds %s"):format(r, mine and (mine.OWNER .. "|" .. mine.APN) or "nothing"))
        end
        -- conflicts: those listed against those expected
        local got = {}
        for _, k in ipairs(listed[r][key(case.gid)] or {}) do
          got[#got + 1] = tostring(k.kind)
          counts.by_kind[k.kind] = (counts.by_kind[k.kind] or 0) + 1
        end
        local expected = {}
        for _, kind in ipairs(want.conflicts[r]) do expected[#expected + 1] = kind end
        counts.expected = counts.expected + #expected
        local left = {}
        for _, kind in ipairs(expected) do left[kind] = (left[kind] or 0) + 1 end
        for _, kind in ipairs(got) do
          if (left[kind] or 0) > 0 then left[kind] = left[kind] - 1
          else
            counts.false_conflicts = counts.false_conflicts + 1
            note("false conflict", case, ("r%d lists %s"):format(r, kind))
          end
        end
        for kind, n in pairs(left) do
          if n > 0 then
            counts.silent = counts.silent + n
            note("silent winner", case, ("r%d does not list its %s conflict"):format(r, kind))
          end
        end
        -- lost: the edit's value nowhere (from the server and the store, not the oracle)
        local op = case.ops[r]
        if (performed[case] or {})[r] and want.performed[r] ~= "unchanged" then
          local kept = false
          for _, k in ipairs(listed[r][key(case.gid)] or {}) do
            local f = values_of(k.feature)
            if op.kind == "delete" then kept = kept or k.op == "delete"
            elseif f and f[op.field] == op.value then kept = true end
          end
          -- a value a policy let another replica's edit replace is in that replica's conflicts, as the server's
          for other = 1, batch.replicas do
            for _, k in ipairs(listed[other][key(case.gid)] or {}) do
              local s = type(k.server) == "table" and k.server.attributes and values_of(k.server)
              if s and op.field and s[op.field] == op.value then kept = true end
            end
          end
          local found
          if op.kind == "add" then
            local a = values_of(on_server[key(case.add_gids[r])])
            found = a and a.OWNER == op.value.OWNER
            for other = 1, batch.replicas do
              if not stores[other]:get(LAYER, case.add_gids[r]) then
                counts.mismatches = counts.mismatches + 1
                note("add", case, ("r%d's add is not in r%d"):format(r, other))
              end
            end
          elseif op.kind == "delete" then
            found = server == nil
          else
            found = server ~= nil and server[op.field] == op.value
          end
          if not (found or kept or want.superseded[r]) then
            counts.lost = counts.lost + 1
            note("lost", case, ("r%d's %s (%s) is neither on the server nor in its conflicts"):format(r, op.kind,
              tostring(op.field)))
          end
        end
      end
    end
    for r = 1, batch.replicas do stores[r]:close() end
    os.execute(("rm -f %s/b%d-*"):format(o.dir, b))
    if o.log then
      o.log(("batch %d/%d: %d replicas, %d cases, %d events; so far %d cases, %d lost, %d false, %d silent, "
        .. "%d mismatches"):format(b, #o.batches, batch.replicas, #batch.cases, #batch.schedule, counts.cases,
        counts.lost, counts.false_conflicts, counts.silent, counts.mismatches))
    end
  end
  client:close()
  return counts
end

--- The counts as the lines `make oracle` prints.
function driver.report(counts)
  local kinds = {}
  for kind, n in pairs(counts.by_kind) do kinds[#kinds + 1] = ("%s %d"):format(kind, n) end
  table.sort(kinds)
  local lines = {
    ("cases %d (%d classes), conflicts listed %d (expected %d): %s"):format(counts.cases,
      (function() local n = 0 for _ in pairs(counts.labels) do n = n + 1 end return n end)(),
      (function() local n = 0 for _, v in pairs(counts.by_kind) do n = n + v end return n end)(), counts.expected,
      #kinds > 0 and table.concat(kinds, ", ") or "none"),
    ("lost %d, false conflicts %d, silent winners %d, mismatches %d"):format(counts.lost, counts.false_conflicts,
      counts.silent, counts.mismatches),
  }
  for _, e in ipairs(counts.examples) do lines[#lines + 1] = "  " .. e end
  return lines
end

--- Whether the counts are clean.
function driver.clean(counts)
  return counts.lost == 0 and counts.false_conflicts == 0 and counts.silent == 0 and counts.mismatches == 0
end

return driver
