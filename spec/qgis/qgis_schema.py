"""QGIS itself changes a replica store's schema and lists its layers (issue 37,
`make test-qgis`): through QGIS's OGR provider, headless, as a user's clicks
would. Run with the system's python3 and QT_QPA_PLATFORM=offscreen.

    qgis_schema.py addfield STORE LAYER FIELD FID VALUE   add a text field (Layer Properties > Fields >
                                                         New field), fill it in for one feature, commit
    qgis_schema.py rename STORE LAYER OLD NEW             rename a field (the field's rename in the table)
    qgis_schema.py deletefield STORE LAYER FIELD          delete a field (Layer Properties > Fields > Delete field)
    qgis_schema.py layers STORE                           the layers QGIS offers for the file, and whether
                                                         each loads, with its feature count
Prints one JSON line: {"ok": true, ...}.
"""
import json
import os
import sys

from qgis.core import QgsApplication, QgsField, QgsProviderRegistry, QgsVectorLayer
from qgis.PyQt.QtCore import QVariant


def layer_of(path, name):
    layer = QgsVectorLayer("%s|layername=%s" % (path, name), name, "ogr")
    if not layer.isValid():
        raise SystemExit("QGIS cannot open %s of %s" % (name, path))
    return layer


def main():
    mode = sys.argv[1]
    QgsApplication.setPrefixPath("/usr", True)
    app = QgsApplication([], False)
    app.initQgis()
    assert app
    out = {"ok": True}
    if mode == "addfield":
        path, name, field, fid, value = sys.argv[2:7]
        layer = layer_of(path, name)
        if not layer.startEditing():
            raise SystemExit("QGIS cannot edit the layer")
        layer.addAttribute(QgsField(field, QVariant.String))
        layer.changeAttributeValue(int(fid), layer.fields().indexOf(field), value)
        out["committed"] = layer.commitChanges()
        out["errors"] = layer.commitErrors()
    elif mode == "rename":
        path, name, old, new = sys.argv[2:6]
        layer = layer_of(path, name)
        provider = layer.dataProvider()
        out["committed"] = provider.renameAttributes({layer.fields().indexOf(old): new})
        out["errors"] = provider.errors()
    elif mode == "deletefield":
        path, name, field = sys.argv[2:5]
        layer = layer_of(path, name)
        provider = layer.dataProvider()
        out["committed"] = provider.deleteAttributes([layer.fields().indexOf(field)])
        out["errors"] = provider.errors()
    elif mode == "layers":
        path = sys.argv[2]
        layers = []
        for s in QgsProviderRegistry.instance().querySublayers(path):
            layer = QgsVectorLayer(s.uri(), s.name(), s.providerKey())
            layers.append({"name": s.name(), "valid": layer.isValid(),
                           "count": layer.featureCount() if layer.isValid() else None})
        out["layers"] = layers
    print(json.dumps(out))
    sys.stdout.flush()
    # QGIS 3.22 may crash tearing down a headless application: the work is done
    os._exit(0)


if __name__ == "__main__":
    main()
