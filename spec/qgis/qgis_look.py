"""What a QGIS user sees of a replica store (issue 28, `make test-qgis`):
every layer opened through QGIS's own OGR provider, headless. Run with the
system's python3 and QT_QPA_PLATFORM=offscreen.

    qgis_look.py STORE PNGDIR

Prints one JSON line:
  {"version": QGIS's,
   "widgets": {"Layer.FIELD": {"type": "ValueMap", "map": [[name, code], ...]} or
                              {"type": "Range", "min":, "max":, ...}},   (fields QGIS set a widget up for)
   "relations": {"discovered": [names QGIS found itself],
                 "media": [{"base": layer, "valid": bool, "error": text,
                            "attachments": [{"GlobalID": the feature's, "name":, "size":, "sha256":}]}]},
   "curves": {layer: {"type": layer's type, "png": path, "pixels": of the whole layer,
                      "features": [{"fid":, "GlobalID":, "type":, "curved":, "empty":, "pixels":}]}}}
Curve layers (a curved geometry type) are drawn 400x400 on white, the whole
layer into PNGDIR/<layer>.png, then each feature alone (subset `fid = N`):
"pixels" counts the pixels that are not white.
"""
import hashlib
import json
import os
import sqlite3
import sys

from qgis.core import (QgsApplication, QgsLineSymbol, QgsFillSymbol, QgsMapRendererSequentialJob, QgsMapSettings,
                       Qgis, QgsProject, QgsRelation, QgsSingleSymbolRenderer, QgsVectorLayer,
                       QgsWkbTypes)
from qgis.PyQt.QtCore import QSize
from qgis.PyQt.QtGui import QColor, QImage

SIZE = 400


def open_layer(path, name):
    layer = QgsVectorLayer("%s|layername=%s" % (path, name), name, "ogr")
    if not layer.isValid():
        raise SystemExit("QGIS cannot open %s of %s" % (name, path))
    return layer


def widgets(layer):
    out = {}
    for i, field in enumerate(layer.fields()):
        setup = layer.editorWidgetSetup(i)
        if not setup.type():
            continue
        config = dict(setup.config())
        if setup.type() == "ValueMap":
            # QGIS keeps the domain as a list of {name: code}
            config["map"] = sorted([[k, v] for pair in config["map"] for k, v in pair.items()], key=lambda p: p[1])
        out["%s.%s" % (layer.name(), field.name())] = dict(config, type=setup.type())
    return out


def media_relations(path, layers):
    """QGIS 3.22 finds no GeoPackage relation itself (asked below); the store's
    project relates a feature to its attachments by parent_global_id, a
    QgsRelation made here as the project defines it. The Related Tables
    Extension's mapping table is an extension's table that GDAL does not offer
    as a layer: it is read as SQL, as gpkgext_relations is, and each link QGIS
    follows must be one of its rows (feature fid, attachment id)."""
    discovered = []
    for layer in layers.values():
        discovered += [r.name() for r in layer.dataProvider().discoverRelations(layer, list(layers.values()))]
    project = QgsProject.instance()
    project.addMapLayers(list(layers.values()))
    found = []
    # GDAL keeps gpkgext_relations and the mapping tables to itself (no layer, even listing all tables): SQL
    with sqlite3.connect("file:%s?mode=ro" % path, uri=True) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM gpkgext_relations WHERE relation_name = 'media'").fetchall()
        links = {row["mapping_table_name"]: {(r[0], r[1]) for r in db.execute(
            'SELECT base_id, related_id FROM "%s"' % row["mapping_table_name"].replace('"', '""'))} for row in rows}
    for row in rows:
        base, media = layers[row["base_table_name"]], layers[row["related_table_name"]]
        rel = QgsRelation()
        rel.setId("attachments_%s" % base.name())
        rel.setName(rel.id())
        rel.setReferencingLayer(media.id())
        rel.setReferencedLayer(base.id())
        rel.addFieldPair("parent_global_id", "GlobalID")
        valid = rel.isValid()
        seen = []
        for feature in base.getFeatures() if valid else []:
            for attachment in rel.getRelatedFeatures(feature):
                data = bytes(attachment["data"] or b"")
                seen.append({"GlobalID": feature["GlobalID"], "name": attachment["name"], "size": len(data),
                             "sha256": hashlib.sha256(data).hexdigest(),
                             "mapped": (feature.id(), attachment.id()) in links[row["mapping_table_name"]]})
        found.append({"base": base.name(), "valid": valid, "attachments": seen,
                      "error": "" if valid else rel.validationError()})
    return {"discovered": discovered, "media": found}


def not_white(image):
    rgb = image.convertToFormat(QImage.Format_RGB32)  # kept: its bits are read below
    raw = rgb.constBits()
    raw.setsize(rgb.sizeInBytes())
    return sum(1 for px in memoryview(bytes(raw)).cast("I") if px & 0xFFFFFF != 0xFFFFFF)


def draw(layer, extent):
    settings = QgsMapSettings()
    settings.setLayers([layer])
    settings.setDestinationCrs(layer.crs())
    settings.setExtent(extent)
    settings.setOutputSize(QSize(SIZE, SIZE))
    settings.setBackgroundColor(QColor(255, 255, 255))
    job = QgsMapRendererSequentialJob(settings)
    job.start()
    job.waitForFinished()
    return job.renderedImage()


def curves(layer, png_dir):
    if QgsWkbTypes.geometryType(layer.wkbType()) == QgsWkbTypes.LineGeometry:
        symbol = QgsLineSymbol.createSimple({"color": "black", "width": "0.8"})
    else:
        symbol = QgsFillSymbol.createSimple({"color": "black", "outline_color": "black", "outline_width": "0.8"})
    layer.setRenderer(QgsSingleSymbolRenderer(symbol))
    extent = layer.extent()
    extent.scale(1.1)
    whole = draw(layer, extent)
    png = os.path.join(png_dir, layer.name() + ".png")
    whole.save(png)
    features = []
    for f in list(layer.getFeatures()):
        g = f.geometry()
        layer.setSubsetString("fid = %d" % f.id())
        features.append({"fid": f.id(), "GlobalID": f["GlobalID"], "type": QgsWkbTypes.displayString(g.wkbType()),
                         "curved": QgsWkbTypes.isCurvedType(g.wkbType()), "empty": g.isNull() or g.isEmpty(),
                         "pixels": not_white(draw(layer, extent))})
    layer.setSubsetString("")
    return {"type": QgsWkbTypes.displayString(layer.wkbType()), "png": png, "pixels": not_white(whole),
            "features": features}


def main():
    path, png_dir = sys.argv[1], sys.argv[2]
    QgsApplication.setPrefixPath("/usr", True)
    app = QgsApplication([], False)
    app.initQgis()
    with sqlite3.connect("file:%s?mode=ro" % path, uri=True) as db:
        names = [r[0] for r in db.execute("SELECT table_name FROM gpkg_contents ORDER BY table_name")]
    layers = {name: open_layer(path, name) for name in names}
    out = {"version": Qgis.QGIS_VERSION, "widgets": {}, "curves": {}}
    for layer in layers.values():
        out["widgets"].update(widgets(layer))
        if QgsWkbTypes.isCurvedType(layer.wkbType()):
            out["curves"][layer.name()] = curves(layer, png_dir)
    out["relations"] = media_relations(path, layers)
    print(json.dumps(out))
    sys.stdout.flush()
    # QGIS 3.22 may crash tearing down a headless application: the work is done
    os._exit(0)


if __name__ == "__main__":
    main()
