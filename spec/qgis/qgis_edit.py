"""QGIS itself edits a replica store (issue 27, `make test-qgis`): the layer
opened through QGIS's OGR provider, edited in an edit session and
committed, as a user's clicks would. Run with the system's python3 and
QT_QPA_PLATFORM=offscreen.

    qgis_edit.py edit STORE LAYER JSON    apply the edits of JSON, commit, print what QGIS saw
    qgis_edit.py hold STORE LAYER JSON MARKER SECONDS
                                           open the layer, buffer the edits of JSON, write MARKER,
                                           keep the file open SECONDS, then commit

JSON: {"rename": [[GlobalID, field, value], ...], "move": [[GlobalID, x, y], ...],
       "delete": [GlobalID, ...], "add": [{"attributes": {...}, "x": .., "y": ..}, ...]}
Prints one JSON line: {"ok": true, "fids": {GlobalID: fid}, "added": [fid, ...], "errors": [...]}.
"""
import json
import os
import sys
import time

from qgis.core import QgsApplication, QgsFeature, QgsGeometry, QgsPointXY, QgsVectorLayer


def by_gid(layer):
    out = {}
    for f in layer.getFeatures():
        out[f["GlobalID"]] = f.id()
    return out


def buffer_edits(layer, edits):
    fids = by_gid(layer)
    fields = layer.fields()
    if not layer.startEditing():
        raise SystemExit("QGIS cannot edit the layer")
    for gid, field, value in edits.get("rename", []):
        layer.changeAttributeValue(fids[gid], fields.indexOf(field), value)
    for gid, x, y in edits.get("move", []):
        layer.changeGeometry(fids[gid], QgsGeometry.fromPointXY(QgsPointXY(x, y)))
    for gid in edits.get("delete", []):
        layer.deleteFeature(fids[gid])
    for add in edits.get("add", []):
        f = QgsFeature(fields)
        for name, value in add["attributes"].items():
            f.setAttribute(name, value)
        f.setGeometry(QgsGeometry.fromPointXY(QgsPointXY(add["x"], add["y"])))
        layer.addFeature(f)


def main():
    mode, path, layer_name, edits = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    QgsApplication.setPrefixPath("/usr", True)
    app = QgsApplication([], False)
    app.initQgis()
    layer = QgsVectorLayer("%s|layername=%s" % (path, layer_name), layer_name, "ogr")
    if not layer.isValid():
        raise SystemExit("QGIS cannot open %s" % path)
    before = set(by_gid(layer).values())
    buffer_edits(layer, edits)
    if mode == "hold":
        with open(sys.argv[5], "w") as marker:
            marker.write("holding\n")
        time.sleep(float(sys.argv[6]))
    ok = layer.commitChanges()
    errors = layer.commitErrors()
    layer.reload()
    fids = by_gid(layer)
    added = sorted(fid for fid in fids.values() if fid not in before)
    print(json.dumps({"ok": ok, "fids": fids, "added": added, "errors": errors}))
    sys.stdout.flush()
    # QGIS 3.22 may crash tearing down a headless application: the work is done
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()
