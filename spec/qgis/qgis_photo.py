"""A photo added to a feature through QGIS's form (issue 37, `make test-qgis`):
the project in the store opened headless, the relation from a valve to its
attachments, and the child feature made as the relation editor's "Add child
feature" makes it (QgsVectorLayerUtils.createFeature with the relation's key
from the parent), the photo's bytes, name and content type set as the form's
fields set them, committed by the attachments layer. Run with the system's
python3 and QT_QPA_PLATFORM=offscreen.

    qgis_photo.py STORE PROJECT PHOTO_FILE   prints one JSON line: {"ok": true, "committed": ..., ...}
"""
import json
import os
import sys

from qgis.core import QgsApplication, QgsGeometry, QgsProject, QgsVectorLayerUtils
from qgis.PyQt.QtCore import QByteArray


def main():
    path, name, photo = sys.argv[1:4]
    QgsApplication.setPrefixPath("/usr", True)
    app = QgsApplication([], False)
    app.initQgis()
    assert app
    p = QgsProject.instance()
    out = {"ok": True, "read": p.read("geopackage:%s?projectName=%s" % (path, name))}
    relation = [r for r in p.relationManager().relations().values() if r.name() == "Attachments of Valves"][0]
    out["relation_valid"] = relation.isValid()
    valves, photos = relation.referencedLayer(), relation.referencingLayer()
    parent = next(valves.getFeatures())
    # the relation editor: the child's key from the parent
    values = {}
    for child_field, parent_field in relation.fieldPairs().items():
        values[photos.fields().indexOf(child_field)] = parent[parent_field]
    # the form: the photo (the binary widget), its name and content type
    with open(photo, "rb") as f:
        values[photos.fields().indexOf("data")] = QByteArray(f.read())
    values[photos.fields().indexOf("name")] = os.path.basename(photo)
    values[photos.fields().indexOf("content_type")] = "image/jpeg"
    child = QgsVectorLayerUtils.createFeature(photos, QgsGeometry(), values)
    photos.startEditing()
    out["added"] = photos.addFeature(child)
    out["committed"] = photos.commitChanges()
    out["errors"] = photos.commitErrors()
    out["parent"] = parent["GlobalID"]
    print(json.dumps(out))
    sys.stdout.flush()
    # QGIS 3.22 may crash tearing down a headless application: the work is done
    os._exit(0)


main()
