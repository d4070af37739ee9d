-- True curves as QGIS reads and edits them (issue 28, `make test-qgis`, not
-- in `make test`: QGIS is large): through QGIS's own OGR provider
-- (spec/support/qgis_curves.py, headless), every curve feature of a store
-- made from the server's curves is a curve, non-empty; a curve QGIS edits is
-- uploaded as the user drew it, an unedited one as the server sent it.
-- GDAL's reading of the same store: spec/store/curves_spec.lua.
-- luacheck: std +busted
-- (run by `make test-qgis` alone: its name keeps it out of busted's default pattern)
local curves = require "spec.support.curves_fixture"
local helper = require "spec.helper"
local json = require "geoservices.base.json"
local store = require "geoservices.store"

local q = helper.shell_quote
local run = helper.run_shell
local validate = helper.validate_gpkg
local gid, CURVES, plain = curves.gid, curves.CURVES, curves.plain

local function qgis(...)
  local args = {}
  for i, a in ipairs{ ... } do args[i] = q(a) end
  local out, ok = run("QT_QPA_PLATFORM=offscreen /usr/bin/python3 spec/support/qgis_curves.py "
    .. table.concat(args, " "))
  assert(ok, out)
  return json.decode(out:match("{.*}"))
end

describe("the replica store's true curves in QGIS (issue 28)", function()
  local dir, path

  setup(function()
    dir = helper.tmp_dir()
    path = curves.make_store(dir)
  end)

  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("gives QGIS every curve feature, as curves", function()
    local mains = qgis("read", path, "Mains")
    assert.equal("MultiCurve", mains.layer)
    local parcels = qgis("read", path, "Parcels")
    assert.equal("MultiSurface", parcels.layer)
    for _, l in ipairs{ mains, parcels } do
      for _, f in ipairs(l.features) do
        assert.is_false(f.null, f.GlobalID)
        assert.is_false(f.empty, f.GlobalID)
      end
    end
    local curved = {}
    for _, f in ipairs(mains.features) do curved[f.GlobalID] = f.curved end
    assert.is_true(curved[gid(0, 1)])
    assert.is_false(curved[gid(0, 2)])
  end)

  it("uploads an unedited curve as the server sent it, an edited one as the user drew it", function()
    local copy = dir .. "/edited.gpkg"
    assert(os.execute(("cp %s %s"):format(q(path), q(copy))))
    -- QGIS moves the arc's middle and lengthens the line; redraws the Bézier as a line
    qgis("edit", copy, "Mains", gid(0, 1), "MULTICURVE(COMPOUNDCURVE(CIRCULARSTRING(0 0,5 -5,10 0),(10 0,25 0)))")
    qgis("edit", copy, "Mains", gid(0, 3), "MULTILINESTRING((0 20,15 25,30 20))")
    local st <close> = assert(store.open(copy))
    -- the library renames the elliptic arc and adds an arc of its own
    assert(st:update(0, { attributes = { GlobalID = gid(0, 4), NAME = "renamed" } }))
    local added = assert(st:add(0, { attributes = { NAME = "new" },
      geometry = { curvePaths = { { { 0, 50 }, { c = { { 10, 50 }, { 5, 55 } } } } } } }))
    assert.same({ curvePaths = { { { 0, 50 }, { c = { { 10, 50 }, { 5, 55 } } } } } }, plain(st:get(0, added).geometry))
    local sent = curves.uploaded(st)
    assert.same({ curvePaths = { { { 0, 0 }, { c = { { 10, 0 }, { 5, -5 } } }, { 25, 0 } } } },
      plain(sent[gid(0, 1)].geometry))
    assert.same({ paths = { { { 0, 20 }, { 15, 25 }, { 30, 20 } } } }, plain(sent[gid(0, 3)].geometry))
    -- never a densified copy of what the server holds
    local ellipse = sent[gid(0, 4)]
    assert.equal("renamed", ellipse.attributes.NAME)
    if ellipse.geometry ~= nil then assert.same(plain(CURVES[0][4]), plain(ellipse.geometry)) end
    assert.equal("", validate(copy))
  end)
end)
