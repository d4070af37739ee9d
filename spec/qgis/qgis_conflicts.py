"""What a QGIS user sees of a store's conflicts (issue 36, `make test-qgis`):
the layer geoservices_conflicts opened through QGIS's own OGR provider,
headless, drawn 400x400 on white around its features. Run with the system's
python3 and QT_QPA_PLATFORM=offscreen.

    qgis_conflicts.py STORE PNG

Prints one JSON line:
  {"valid": bool, "type": the layer's geometry type, "count": features,
   "fields": [names], "features": [{"global_id":, "kind":, "outcome":, "differences":, "empty":, "x":, "y":}],
   "pixels": the pixels that are not white in PNG,
   "fields_table": [{"field":, "base_value":, "local_value":, "server_value":, "both_changed":}]}
"""
import json
import os
import sys

from qgis.core import QgsApplication, QgsMapRendererSequentialJob, QgsMapSettings, QgsVectorLayer, QgsWkbTypes
from qgis.PyQt.QtCore import QSize, QVariant
from qgis.PyQt.QtGui import QColor

SIZE = 400


def plain(value):
    """A field's value as JSON takes it (QGIS gives NULL as a null QVariant)."""
    return None if isinstance(value, QVariant) else value


def not_white(image):
    white = QColor("white").rgb()
    return sum(1 for x in range(image.width()) for y in range(image.height()) if image.pixel(x, y) != white)


def main(path, png):
    app = QgsApplication([], False)
    app.initQgis()
    layer = QgsVectorLayer("%s|layername=geoservices_conflicts" % path, "conflicts", "ogr")
    out = {"valid": layer.isValid()}
    if layer.isValid():
        out["type"] = QgsWkbTypes.displayString(layer.wkbType())
        out["count"] = layer.featureCount()
        out["fields"] = [f.name() for f in layer.fields()]
        feats = []
        for f in layer.getFeatures():
            g = f.geometry()
            point = None if g.isEmpty() else g.centroid().asPoint()
            feats.append({"global_id": plain(f["global_id"]), "kind": plain(f["kind"]), "outcome": plain(f["outcome"]),
                          "differences": plain(f["differences"]), "empty": g.isEmpty(),
                          "x": point and point.x(), "y": point and point.y()})
        out["features"] = feats
        extent = layer.extent()
        extent.grow(max(extent.width(), extent.height(), 0.001))
        settings = QgsMapSettings()
        settings.setLayers([layer])
        settings.setDestinationCrs(layer.crs())
        settings.setBackgroundColor(QColor("white"))
        settings.setOutputSize(QSize(SIZE, SIZE))
        settings.setExtent(extent)
        job = QgsMapRendererSequentialJob(settings)
        job.start()
        job.waitForFinished()
        image = job.renderedImage()
        image.save(png)
        out["pixels"] = not_white(image)
    fields = QgsVectorLayer("%s|layername=geoservices_conflict_fields" % path, "fields", "ogr")
    out["fields_table"] = [{k: plain(f[k]) for k in ("field", "base_value", "local_value", "server_value", "both_changed")}
                           for f in fields.getFeatures()] if fields.isValid() else None
    print(json.dumps(out), flush=True)
    os._exit(0)  # QGIS 3.22 may crash while it tears down offscreen


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
