"""QGIS itself reads and edits the curve features of a replica store (issue
28): the layer opened through QGIS's OGR provider, as a user's project
would. Run with the system's python3 and QT_QPA_PLATFORM=offscreen.

    qgis_curves.py read STORE LAYER          one JSON line: the layer's geometry type and, per
                                             feature, its GlobalID, WKT type, vertex count, emptiness
    qgis_curves.py edit STORE LAYER GID WKT  the feature's geometry replaced by WKT in an edit
                                             session, committed; prints {"ok": true}
"""
import json
import os
import sys

from qgis.core import QgsApplication, QgsGeometry, QgsVectorLayer, QgsWkbTypes


def main():
    mode, path, layer_name = sys.argv[1], sys.argv[2], sys.argv[3]
    QgsApplication.setPrefixPath("/usr", True)
    app = QgsApplication([], False)
    app.initQgis()
    layer = QgsVectorLayer("%s|layername=%s" % (path, layer_name), layer_name, "ogr")
    if not layer.isValid():
        raise SystemExit("QGIS cannot open %s" % path)
    if mode == "read":
        features = []
        for f in layer.getFeatures():
            g = f.geometry()
            features.append({"GlobalID": f["GlobalID"], "type": QgsWkbTypes.displayString(g.wkbType()),
                             "null": g.isNull(), "empty": g.isEmpty(), "vertices": g.constGet().nCoordinates()
                             if not g.isNull() else 0, "curved": QgsWkbTypes.isCurvedType(g.wkbType())})
        print(json.dumps({"layer": QgsWkbTypes.displayString(layer.wkbType()), "features": features}))
    elif mode == "edit":
        gid, wkt = sys.argv[4], sys.argv[5]
        fid = [f.id() for f in layer.getFeatures() if f["GlobalID"] == gid][0]
        layer.startEditing()
        if not layer.changeGeometry(fid, QgsGeometry.fromWkt(wkt)):
            raise SystemExit("QGIS refused the geometry")
        if not layer.commitChanges():
            raise SystemExit("QGIS could not commit: %s" % layer.commitErrors())
        print(json.dumps({"ok": True}))
    sys.stdout.flush()
    # QGIS 3.22 may crash tearing down a headless application: the work is done
    os._exit(0)


main()
