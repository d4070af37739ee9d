#!/usr/bin/env python3
"""A feature service that answers as the vendor DOCUMENTS it, written apart
from the project's emulator (Python standard library only), so the specs
can drive the store and client:sync against a second reading of the docs.

    documented_server.py CONFIG.json LOG.jsonl [--exit-with PID]

CONFIG: {"data": "examples/data/world.json", "service": "Parcels",
"token": "...", "settings": {...}} -- the service's layers and features come
from data's featureServices[service]; settings are the knobs below (also
POST /_control/settings {name: value}). Binds 127.0.0.1 on a free port,
prints "listening on http://127.0.0.1:PORT", serves HTTP/1.1 with
keep-alive, logs every request as a JSON line (connection number, its
request number on that connection, method, path, query, headers, form,
what was answered, and a job status resource's status) and exits when --exit-with PID is gone.

Services live under /arcgis/rest/services: <service>/FeatureServer (the
service resource), /<layer> (a layer), /<layer>/query, /createReplica,
/synchronizeReplica, /unRegisterReplica, /replicas/<id>, /jobs/<id> (GET or
POST: the job's status resource) and /replicafiles/<name> (result files,
Range requests answered with 206).

What the vendor documents, and this server does (INTERFACE.md = the
project's spec; "createReplica doc", "rollbackOnFailure page" etc. are the
vendor's REST API pages the issue cites):
* no transportType -> esriTransportTypeUrl (setting default_transport); the
  ArcGIS API for Python's SyncManager.synchronize: "The default value is
  esriTransportTypeUrl". async=true -> always URL ("If async is true, the
  results will always be returned as if transportType is
  esriTransportTypeUrl", createReplica doc).
* per-edit results (addResults/updateResults/deleteResults) only in an
  embedded answer of an edits response type (INTERFACE.md 2.1: "Present when
  the response type is an edits type and the transport is embedded"); never
  in a URL result file, never with NoEdits.
* syncDirection upload -> responseType NoEdits: no edits, no results, no
  result file ("There is no delta file returned", response types page).
* rollbackOnFailure absent -> setting rollback_default (true unless set);
  true + one failed edit -> nothing applied, an error answer naming the
  failed edits in details; false -> failed edits skipped, the rest applied
  (rollbackOnFailure page). Setting rollback_forced (true/false) makes the
  service one without supportsRollbackOnFailure: the parameter is ignored
  and that behaviour is fixed, as the page describes for such services.
* result files deleted after result_lifetime_s (600 by default: "deleted
  after about 10 minutes", error handling page): then 404.
* job status values as INTERFACE.md section 3 lists them: Pending,
  InProgress, ImportChanges (the edits are applied on entering it),
  ExportChanges, then Completed / CompletedWithErrors / Failed, spread over
  job_seconds.
* enumerations answered with the prefix enum_prefix ("esri"); "esri..." and
  "svc..." both accepted.
* the changes a sync downloads: every change of the replica's layers after
  the generation the client sent, except the client's own uploads.
* a duplicate GlobalID add and an update or delete of a missing feature are
  failed edits (DUPLICATE_CODE, MISSING_CODE).
* setting sync_capabilities ({name: bool}) overrides the service's
  syncCapabilities, and the server does what they say: a sync model it lacks
  is refused by createReplica and by syncs of such replicas, async=true
  without supportsAsync is refused; without supportsRollbackOnFailure the
  parameter is ignored and the model decides ("When supportsRollbackOnFailure
  is false and only a perLayer sync model is supported ... always applies
  the false rollbackOnFailure behavior"; perReplica only: the true one;
  rollbackOnFailure page; both models: the replica's own model, our reading).
* GlobalIDs compare as a GUID column does (norm_gid: any case, braces or none).
* uploaded edits: POST <service>/FeatureServer/uploads/upload (multipart, its
  "file" part) keeps the file as an item and answers {"success": true, "item":
  {itemID, itemName, description, date, committed}} (the Upload Item and Item
  pages); synchronizeReplica's editsUploadId with editsUploadFormat reads it in
  place of the edits parameter ("Edits can be supplied in the edits parameter,
  or, alternatively, by using the editsUploadId and editsUploadFormat to
  identify a file containing the edits that were previously uploaded",
  synchronizeReplica page). This double reads JSON items only (the 2.1 edits
  array); SQLITE, an unknown item, or edits beside editsUploadId are refused.

Faults (settings):
* edit_results: "all" | "failures" (only the skipped edits listed, as the
  rollbackOnFailure page words it) | "none".
* drop_edit_post: "reused" | "any" | null, drop_edit_post_count (1): the
  first edit-carrying synchronizeReplica POST that arrives on a kept-alive
  connection that already served a request ("reused"), or on any
  connection ("any"), is APPLIED, then the connection is closed without an
  answer: a blind re-send duplicates it.
* job_seconds: how long an async job runs (0.4 by default, short for the specs).
* race: null | {"edits": [...], "origin": NAME}: another crew's edits (2.1
  array) applied right before the next synchronizeReplica runs (once): a
  change placed between what a client read and what it sends.
* gateway: null | {"mode": "504" | "drop", "delay_s": S, "every": N}: a gateway in
  front of the server answers each synchronizeReplica (each Nth one, counted
  from when the gateway is set; N is 1 by default) at once, 504 or a connection
  closed, and the server runs it S seconds later all the same (an async
  kick-off submits its job then). GET /_control/held: how many wait.
* poll_failure: {"seconds": N, "mode": "503" | "reset" | "404" | "error_body"}:
  status polls of a job submitted while it is set fail that way for N
  seconds after the job's submission (the job itself runs on).
* job_lifetime_s: a job older than this is purged (its status 404); null: kept.
* gid_spelling: "lower_bare" writes every GlobalID in lower case without braces (a GUID
  column's own spelling); null: as stored ("{UPPER}").
* protect_results: job status resources and result files need the token
  (job status without it: HTTP 200, error 499 "Token Required"; a result file
  without it: HTTP 403). A wrong token anywhere: error 498 "Invalid Token".

Control routes (not part of the service): GET /_control/changelog ->
{gen, entries: [{seq, gen, layer, op, globalId, origin, attributes,
refused, code, rolled_back}]}; POST /_control/edit {layer, op, feature |
globalId, origin}: another crew's edit; POST /_control/replica {model}: a
new registered replica -> {replicaID, gen}; GET /_control/feature?layer=&globalId=;
POST /_control/settings; POST /_control/expire: every result file expires now; GET /_control/jobs:
{jobs: [{id, kind, imported (its edits were applied or refused), status}]}.
"""
import copy
import http.server
import json
import os
import re
import socket
import struct
import sys
import threading
import time
import urllib.parse
import uuid

DUPLICATE_CODE = 1000  # the client must not rely on any code's meaning: it reads the server instead
MISSING_CODE = 1019    # "Object is missing." (the vendor's own text for it)
BASE = "/arcgis/rest/services"

config = json.load(open(sys.argv[1]))
log_path = sys.argv[2]
exit_with = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--exit-with" else None

settings = {
    "enum_prefix": "esri",
    "default_transport": "url",
    "edit_results": "all",
    "rollback_default": True,
    "rollback_forced": None,
    "drop_edit_post": None,
    "drop_edit_post_count": 1,
    "job_seconds": 0.4,
    "poll_failure": None,
    "job_lifetime_s": None,
    "result_lifetime_s": 600,
    "protect_results": False,
    "gid_spelling": None,
    "sync_capabilities": {},
    "gateway": None,
    "race": None,
}
settings.update(config.get("settings") or {})
TOKEN = config.get("token")
SERVICE = config.get("service", "Parcels")

lock = threading.RLock()
root = ""
connection_count = 0


def norm_gid(g):
    if not isinstance(g, str):
        return None
    g = g.strip().strip("{}").upper()
    return "{" + g + "}" if g else None


# ------------------------------------------------------------------ state

class Layer:
    def __init__(self, meta):
        self.id = meta["id"]
        self.meta = {k: v for k, v in meta.items() if k != "features"}
        self.fields = meta.get("fields") or []
        self.features = {}  # GlobalID -> record
        self.next_oid = 1
        for f in meta.get("features", []):
            attrs = dict(f.get("attributes") or {})
            gid = norm_gid(attrs.get("GlobalID")) or norm_gid(str(uuid.uuid4()))
            attrs["GlobalID"] = gid
            attrs["OBJECTID"] = self.next_oid
            self.next_oid += 1
            self.features[gid] = {"attributes": attrs, "geometry": f.get("geometry"), "deleted": False,
                                  "gen": 0, "created_gen": 0, "origin": None}

    def field_names(self):
        return {f["name"].lower(): f["name"] for f in self.fields}


data = json.load(open(config.get("data", "examples/data/world.json")))
svc_meta = data["featureServices"][SERVICE]
layers = {m["id"]: Layer(m) for m in svc_meta["layers"]}
gen = int(svc_meta.get("serverGen", 1))
changelog = []
replicas = {}   # replicaID -> {name, model, layers, gen, layer_gens, direction}
jobs = {}       # id -> job
results = {}    # file name -> {"bytes", "created"}
busy = {}       # replicaID -> job id of a running sync job
uploads = {}    # itemID -> {"bytes", "name", "date"}: uploaded items
held = []       # synchronizeReplica forms the gateway answered, still to run
gateway_seen = {"gateway": None, "count": 0}  # the synchronizeReplica requests met since the gateway was set


def log_change(entry):
    entry["seq"] = len(changelog) + 1
    changelog.append(entry)


def prefix():
    return settings["enum_prefix"]


def error_body(code, message, details=None):
    return {"error": {"code": code, "message": message, "details": details or []}}


def parse_bool(v, default=None):
    if v is None or v == "":
        return default
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() == "true"


def parse_transport(v):
    if not v:
        return None
    v = v.lower()
    if v.endswith("transporttypeurl"):
        return "url"
    if v.endswith("transporttypeembedded"):
        return "embedded"
    return "bad"


def new_replica(name, model, layer_ids, direction="bidirectional"):
    rid = norm_gid(str(uuid.uuid4()))
    replicas[rid] = {"replicaID": rid, "replicaName": name, "model": model, "layers": list(layer_ids),
                     "gen": gen, "layer_gens": {i: gen for i in layer_ids}, "direction": direction,
                     "created": int(time.time() * 1000)}
    return replicas[rid]


def find_replica(rid):
    return replicas.get(norm_gid(rid)) if rid else None


# ------------------------------------------------------------------ edits

def apply_edits(edits, origin, rollback, directions):
    """Applies a 2.1 edits array for `origin`. Returns (results, failed,
    applied): results per layer {"addResults": [...], ...}; failed: the
    failed entries; applied: whether anything changed (the generation moves).
    With rollback and a failure nothing stays applied."""
    global gen
    snapshot = {lid: copy.deepcopy(l.features) for lid, l in layers.items()}
    oids = {lid: l.next_oid for lid, l in layers.items()}
    new_gen = gen + 1
    out, failed, entries = {}, [], []
    for entry in edits or []:
        lid = entry.get("id")
        layer = layers.get(lid)
        if layer is None:
            failed.append({"layer": lid, "error": {"code": 400, "description": "layer %s does not exist" % lid}})
            continue
        if directions.get(lid, "bidirectional") not in ("bidirectional", "upload"):
            continue  # a layer that does not upload this time: its edits are not read
        feats = entry.get("features") or {}
        res = out.setdefault(lid, {"addResults": [], "updateResults": [], "deleteResults": []})
        names = layer.field_names()

        def fail(kind, gid, code, description, attrs=None, op=None):
            r = {"globalId": gid, "success": False, "error": {"code": code, "description": description}}
            res[kind].append(r)
            failed.append(dict(r, layer=lid))
            entries.append({"gen": new_gen, "layer": lid, "op": op, "globalId": gid, "origin": origin,
                            "attributes": attrs, "refused": True, "code": code})

        for f in feats.get("adds") or []:
            attrs = dict((f or {}).get("attributes") or {})
            gid = norm_gid(attrs.get("GlobalID"))
            if gid is None:
                gid = norm_gid(str(uuid.uuid4()))
            if gid in layer.features:
                fail("addResults", gid, DUPLICATE_CODE, "Unable to add the feature: GlobalID %s exists." % gid,
                     attrs, "add")
                continue
            clean = {names[k.lower()]: v for k, v in attrs.items() if k.lower() in names}
            clean["GlobalID"], clean["OBJECTID"] = gid, layer.next_oid
            layer.next_oid += 1
            layer.features[gid] = {"attributes": clean, "geometry": f.get("geometry"), "deleted": False,
                                   "gen": new_gen, "created_gen": new_gen, "origin": origin}
            res["addResults"].append({"objectId": clean["OBJECTID"], "globalId": gid, "success": True})
            entries.append({"gen": new_gen, "layer": lid, "op": "add", "globalId": gid, "origin": origin,
                            "attributes": attrs})
        for f in feats.get("updates") or []:
            attrs = dict((f or {}).get("attributes") or {})
            gid = norm_gid(attrs.get("GlobalID"))
            rec = layer.features.get(gid)
            if rec is None or rec["deleted"]:
                fail("updateResults", gid, MISSING_CODE, "Object is missing.", attrs, "update")
                continue
            for k, v in attrs.items():
                if k.lower() in names and names[k.lower()] not in ("OBJECTID", "GlobalID"):
                    rec["attributes"][names[k.lower()]] = v
            if "geometry" in f and f["geometry"] is not None:
                rec["geometry"] = f["geometry"]
            rec["gen"], rec["origin"] = new_gen, origin
            res["updateResults"].append({"objectId": rec["attributes"]["OBJECTID"], "globalId": gid,
                                         "success": True})
            entries.append({"gen": new_gen, "layer": lid, "op": "update", "globalId": gid, "origin": origin,
                            "attributes": attrs})
        for g in feats.get("deleteIds") or []:
            gid = norm_gid(g)
            rec = layer.features.get(gid)
            if rec is None or rec["deleted"]:
                fail("deleteResults", gid, MISSING_CODE, "Object is missing.", None, "delete")
                continue
            rec["deleted"], rec["gen"], rec["origin"] = True, new_gen, origin
            res["deleteResults"].append({"objectId": rec["attributes"]["OBJECTID"], "globalId": gid,
                                         "success": True})
            entries.append({"gen": new_gen, "layer": lid, "op": "delete", "globalId": gid, "origin": origin})
    applied = any(not e.get("refused") for e in entries)
    if rollback and failed:
        for lid, l in layers.items():
            l.features, l.next_oid = snapshot[lid], oids[lid]
        for e in entries:
            if not e.get("refused"):
                e["rolled_back"] = True
        applied = False
    for e in entries:
        log_change(e)
    if applied:
        gen = new_gen
    return out, failed, applied


def export_changes(since, origin, layer_ids, directions):
    """The 2.1 edits array of the changes after generation `since` (per
    layer: a number, or a dict by layer id) made by anyone but `origin`."""
    out = []
    for lid in layer_ids:
        if directions.get(lid, "bidirectional") not in ("bidirectional", "download"):
            continue
        layer = layers[lid]
        s = since[lid] if isinstance(since, dict) else since
        adds, updates, deletes = [], [], []
        for gid in sorted(layer.features):
            rec = layer.features[gid]
            if rec["gen"] <= s or rec["origin"] == origin:
                continue
            if rec["deleted"]:
                if rec["created_gen"] <= s:
                    deletes.append(gid)
            else:
                f = {"attributes": copy.deepcopy(rec["attributes"]), "geometry": copy.deepcopy(rec["geometry"])}
                (adds if rec["created_gen"] > s else updates).append(f)
        out.append({"id": lid, "features": {"adds": adds, "updates": updates, "deleteIds": deletes},
                    "attachments": {"adds": [], "updates": [], "deleteIds": []}})
    return out


def with_results(edits_out, results_by_layer):
    """The embedded answer's edits: each layer's per-edit results as
    setting edit_results allows."""
    mode = settings["edit_results"]
    by_id = {e["id"]: e for e in edits_out}
    for lid, res in results_by_layer.items():
        e = by_id.get(lid)
        if e is None:
            e = {"id": lid, "features": {"adds": [], "updates": [], "deleteIds": []}}
            edits_out.append(e)
            by_id[lid] = e
        for kind, lst in res.items():
            if mode == "all":
                e["features"][kind] = lst
            elif mode == "failures":
                e["features"][kind] = [r for r in lst if not r["success"]]
    return edits_out


GUID = re.compile(r"^\{?[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\}?$")
GID_KEYS = ("globalid", "deleteids", "parentglobalid")


def spelled(doc):
    """Setting gid_spelling "lower_bare": every GlobalID the service writes (features, per-edit
    results, deleteIds, result files, queries) in lower case without braces, as a GUID column
    may spell it; the client must compare them as GUIDs, not as strings."""
    if settings["gid_spelling"] != "lower_bare":
        return doc

    def walk(v, key):
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, key) for x in v]
        if isinstance(v, str) and key and key.lower() in GID_KEYS and GUID.match(v):
            return v.strip("{}").lower()
        return v
    return walk(doc, None)


def store_result(doc):
    name = uuid.uuid4().hex + ".json"
    results[name] = {"bytes": json.dumps(spelled(doc)).encode(), "created": time.time()}
    return "%s%s/%s/FeatureServer/replicafiles/%s" % (root, BASE, SERVICE, name)


def gens_fields(replica, new_gen, as_string=False):
    if replica["model"] == "perLayer":
        return {"layerServerGens": [{"id": i, "serverGen": new_gen} for i in replica["layers"]]}
    return {"replicaServerGen": str(new_gen) if as_string else new_gen}


# ------------------------------------------------------------------ synchronizeReplica

class SyncPlan:
    pass


def plan_sync(form):
    """Reads a synchronizeReplica form: a SyncPlan, or an error body."""
    p = SyncPlan()
    p.replica = find_replica(form.get("replicaID"))
    if p.replica is None:
        return None, error_body(400, "Unable to synchronize replica.",
                                ["Replica %s does not exist." % form.get("replicaID")])
    r = p.replica
    p.direction = (form.get("syncDirection") or r["direction"] or "bidirectional").lower()
    p.directions = {i: p.direction for i in r["layers"]}
    if r["model"] == "perLayer":
        try:
            sync_layers = json.loads(form.get("syncLayers") or "[]")
        except ValueError:
            return None, error_body(400, "Unable to synchronize replica.", ["'syncLayers' is not JSON."])
        p.since = {i: r["layer_gens"].get(i, 0) for i in r["layers"]}
        for sl in sync_layers:
            lid = sl.get("id")
            if lid in p.since:
                if sl.get("serverGen") is not None:
                    p.since[lid] = int(sl["serverGen"])
                if sl.get("syncDirection"):
                    p.directions[lid] = sl["syncDirection"].lower()
    else:
        g = form.get("replicaServerGen")
        p.since = int(g) if g not in (None, "") else r["gen"]
    p.asynchronous = parse_bool(form.get("async"), False)
    transport = parse_transport(form.get("transportType"))
    if transport == "bad":
        return None, error_body(400, "Unable to synchronize replica.",
                                ["Invalid transportType: %s" % form.get("transportType")])
    p.transport = "url" if p.asynchronous else (transport or settings["default_transport"])
    caps = sync_capabilities()
    if (r["model"] == "perReplica" and not caps["supportsPerReplicaSync"]) or \
            (r["model"] == "perLayer" and not caps["supportsPerLayerSync"]):
        return None, error_body(400, "Unable to synchronize replica.",
                                ["The service does not support the %s sync model." % r["model"]])
    if p.asynchronous and not caps["supportsAsync"]:
        return None, error_body(400, "Unable to synchronize replica.", ["async is not supported by this service."])
    if settings["rollback_forced"] is not None:
        p.rollback = bool(settings["rollback_forced"])
    elif not caps["supportsRollbackOnFailure"]:
        if caps["supportsPerLayerSync"] and not caps["supportsPerReplicaSync"]:
            p.rollback = False
        elif caps["supportsPerReplicaSync"] and not caps["supportsPerLayerSync"]:
            p.rollback = True
        else:
            p.rollback = r["model"] != "perLayer"
    else:
        p.rollback = parse_bool(form.get("rollbackOnFailure"), settings["rollback_default"])
    if form.get("editsUploadId"):
        edits, err = uploaded_edits(form)
        if err:
            return None, err
        p.edits = edits
        p.downloads = any(d in ("bidirectional", "download") for d in p.directions.values())
        return p, None
    try:
        p.edits = json.loads(form["edits"]) if form.get("edits") else []
    except ValueError:
        return None, error_body(400, "Unable to synchronize replica.", ["'edits' is not JSON."])
    p.downloads = any(d in ("bidirectional", "download") for d in p.directions.values())
    return p, None


def uploaded_edits(form):
    """The 2.1 edits array of the item editsUploadId names: (edits, None) or (None, error body)."""
    item = uploads.get(form.get("editsUploadId"))
    fmt = (form.get("editsUploadFormat") or "").lower()
    if form.get("edits"):
        return None, error_body(400, "Unable to synchronize replica.",
                                ["Supply the edits in the edits parameter or by editsUploadId, not both."])
    if item is None:
        return None, error_body(400, "Unable to synchronize replica.",
                                ["Item %s was not found." % form.get("editsUploadId")])
    if fmt != "json":
        return None, error_body(400, "Unable to synchronize replica.",
                                ["editsUploadFormat %s is not read by this server." % form.get("editsUploadFormat")])
    try:
        edits = json.loads(item["bytes"])
    except ValueError:
        return None, error_body(400, "Unable to synchronize replica.", ["The uploaded item is not JSON."])
    return edits if isinstance(edits, list) else [], None


def multipart_file(body, ctype):
    """The "file" part of a multipart/form-data body: (bytes, filename) or (None, None)."""
    m = re.search(r'boundary="?([^";]+)"?', ctype)
    if not m:
        return None, None
    for part in body.split(b"--" + m.group(1).encode()):
        head, sep, data = part.partition(b"\r\n\r\n")
        if not sep:
            continue
        disposition = re.search(rb'name="([^"]*)"(?:; filename="([^"]*)")?', head)
        if disposition and disposition.group(1) == b"file":
            if data.endswith(b"\r\n"):
                data = data[:-2]
            return data, (disposition.group(2) or b"upload").decode("utf-8", "replace")
    return None, None


def carries_edits(form):
    if form.get("editsUploadId"):
        return True
    try:
        edits = json.loads(form.get("edits") or "[]")
    except ValueError:
        return False
    for e in edits if isinstance(edits, list) else []:
        f = (e or {}).get("features") or {}
        if f.get("adds") or f.get("updates") or f.get("deleteIds"):
            return True
    return False


def import_step(p):
    """Applies the plan's edits: (per-edit results by layer, failed edits)."""
    res, failed, _ = apply_edits(p.edits, p.replica["replicaID"], p.rollback, p.directions)
    return res, failed


def response_type(p):
    return prefix() + ("ReplicaResponseTypeEdits" if p.downloads else "ReplicaResponseTypeNoEdits")


def rollback_error(failed):
    return error_body(400, "Unable to synchronize replica: edits failed and were rolled back "
                      "(rollbackOnFailure).",
                      ["%s %s: %s" % (f.get("layer"), f.get("globalId"), (f.get("error") or {}).get("description"))
                       for f in failed])


def sync_now(p):
    """A synchronous synchronizeReplica: the answer's document."""
    res, failed = import_step(p)
    if p.rollback and failed:
        return rollback_error(failed)
    r = p.replica
    new_gen = gen
    doc = {"transportType": prefix() + ("TransportTypeUrl" if p.transport == "url" else "TransportTypeEmbedded"),
           "replicaID": r["replicaID"], "responseType": response_type(p)}
    doc.update(gens_fields(r, new_gen))
    if p.downloads:
        changes = export_changes(p.since, r["replicaID"], r["layers"], p.directions)
        if p.transport == "url":
            file_doc = dict(doc, edits=changes)
            doc["URL"] = store_result(file_doc)
        else:
            doc["edits"] = with_results(changes, res)
    advance_replica(r, new_gen)
    return doc


def advance_replica(r, new_gen):
    r["gen"] = new_gen
    for i in r["layers"]:
        r["layer_gens"][i] = new_gen
    r["lastSync"] = int(time.time() * 1000)


# ------------------------------------------------------------------ jobs

PHASES = [(0.0, "Pending"), (0.1, "InProgress"), (0.2, "ImportChanges"), (0.6, "ExportChanges")]


def submit_job(kind, work):
    jid = uuid.uuid4().hex
    job = {"id": jid, "kind": kind, "submitted": time.time(), "duration": float(settings["job_seconds"]),
           "poll_failure": copy.deepcopy(settings["poll_failure"]), "fields": {}, "final": None,
           "resultUrl": "", "messages": []}
    job.update(work)
    jobs[jid] = job
    d = job["duration"]
    threading.Timer(0.2 * d, run_job_step, (jid, "import")).start()
    threading.Timer(d, run_job_step, (jid, "export")).start()
    return job


def run_job_step(jid, step):
    with lock:
        job = jobs.get(jid)
        if job is None:
            return
        if job["kind"] == "sync":
            sync_job_step(job, step)
        else:
            create_job_step(job, step)


def sync_job_step(job, step):
    p = job["plan"]
    if step == "import":
        res, failed = import_step(p)
        job["failed"], job["imported"] = failed, True
        if p.rollback and failed:
            job["final"] = "Failed"
            job["messages"] = [{"type": "error", "description": m} for m in rollback_error(failed)["error"]["details"]]
        elif failed:
            job["final"] = "CompletedWithErrors"
        return
    busy.pop(p.replica["replicaID"], None)
    if job["final"] == "Failed":
        return
    r = p.replica
    new_gen = gen
    job["fields"].update(gens_fields(r, new_gen, as_string=True))
    if p.downloads:
        doc = {"transportType": prefix() + "TransportTypeUrl", "replicaID": r["replicaID"],
               "responseType": response_type(p),
               "edits": export_changes(p.since, r["replicaID"], r["layers"], p.directions)}
        doc.update(gens_fields(r, new_gen))
        job["resultUrl"] = store_result(doc)
    advance_replica(r, new_gen)
    job["final"] = job["final"] or "Completed"


def create_job_step(job, step):
    if step == "export":
        doc = create_export(job["create"])
        job["fields"]["replicaID"] = doc.get("replicaID", "")
        job["resultUrl"] = store_result(doc)
        job["final"] = "Completed"


def job_status(job):
    elapsed = time.time() - job["submitted"]
    status = "Pending"
    for frac, name in PHASES:
        if elapsed >= frac * job["duration"]:
            status = name
    if job.get("resultUrl") or (job["final"] and elapsed >= job["duration"]):
        status = job["final"] or "Completed"
    doc = {"transportType": prefix() + "TransportTypeUrl", "responseType": job.get("responseType", ""),
           "replicaName": job.get("replicaName", ""), "replicaID": job.get("replicaID", ""),
           "targetType": "client", "resultUrl": job.get("resultUrl") or "",
           "submissionTime": str(int(job["submitted"] * 1000)),
           "lastUpdatedTime": str(int(time.time() * 1000)), "status": status}
    doc.update(job["fields"])
    if job["messages"]:
        doc["messages"] = job["messages"]
    return doc


# ------------------------------------------------------------------ createReplica

def create_export(plan):
    r = new_replica(plan["name"], plan["model"], plan["layers"], plan["direction"])
    out = []
    for lid in plan["layers"]:
        feats = [{"attributes": copy.deepcopy(rec["attributes"]), "geometry": copy.deepcopy(rec["geometry"])}
                 for gid, rec in sorted(layers[lid].features.items()) if not rec["deleted"]]
        out.append({"id": lid, "features": feats, "attachments": []})
    doc = {"replicaName": r["replicaName"], "replicaID": r["replicaID"],
           "transportType": prefix() + "TransportTypeUrl", "responseType": prefix() + "ReplicaResponseTypeData",
           "layers": out}
    doc.update(gens_fields(r, gen))
    return doc


def create_replica(form):
    ids_text = (form.get("layers") or "").strip().strip("[]")
    try:
        ids = [int(x) for x in ids_text.split(",") if x.strip() != ""]
    except ValueError:
        ids = []
    if not ids or any(i not in layers for i in ids):
        return error_body(400, "Unable to create replica.", ["'layers' must name layers of this service."])
    model = {"perreplica": "perReplica", "perlayer": "perLayer"}.get((form.get("syncModel") or "").lower())
    if model is None:
        return error_body(400, "Unable to create replica.", ["syncModel must be perReplica or perLayer here."])
    caps = sync_capabilities()
    if not caps["supports" + model[0].upper() + model[1:] + "Sync"]:
        return error_body(400, "Unable to create replica.", ["The service does not support the %s model." % model])
    if parse_bool(form.get("async"), False) and not caps["supportsAsync"]:
        return error_body(400, "Unable to create replica.", ["async is not supported by this service."])
    plan = {"name": form.get("replicaName") or SERVICE, "model": model, "layers": ids,
            "direction": (form.get("syncDirection") or "bidirectional").lower()}
    if parse_bool(form.get("async"), False):
        job = submit_job("create", {"create": plan, "replicaName": plan["name"],
                                    "responseType": prefix() + "ReplicaResponseTypeData"})
        return {"statusUrl": "%s%s/%s/FeatureServer/jobs/%s" % (root, BASE, SERVICE, job["id"])}
    doc = create_export(plan)
    transport = parse_transport(form.get("transportType")) or settings["default_transport"]
    if transport == "embedded":
        return doc
    return {"transportType": doc["transportType"], "responseUrl": store_result(doc)}


# ------------------------------------------------------------------ resources

def sync_capabilities():
    """The service's syncCapabilities: the data file's, with the settings'."""
    caps = dict(svc_meta.get("syncCapabilities") or {})
    caps.setdefault("supportsAsync", True)
    caps.setdefault("supportsPerReplicaSync", True)   # "If supportsPerReplicaSync is not provided, it's true"
    caps.setdefault("supportsPerLayerSync", False)    # "If supportsPerLayerSync is not provided, it's false"
    caps.setdefault("supportsRollbackOnFailure", True)
    caps.update(settings.get("sync_capabilities") or {})
    if settings["rollback_forced"] is not None:
        caps["supportsRollbackOnFailure"] = False
    return caps


def service_resource():
    caps = sync_capabilities()
    return {"currentVersion": 11.3, "serviceDescription": "", "capabilities": svc_meta.get("capabilities"),
            "syncEnabled": True, "supportsDisconnectedEditing": True, "supportsApplyEditsWithGlobalIds": True,
            "syncCapabilities": caps, "maxRecordCount": 2000, "supportedQueryFormats": "JSON",
            "spatialReference": svc_meta.get("spatialReference", {"wkid": 4326}),
            "layers": [{"id": l.id, "name": l.meta.get("name"), "geometryType": l.meta.get("geometryType")}
                       for l in layers.values() if l.meta.get("type") != "Table"],
            "tables": [{"id": l.id, "name": l.meta.get("name")} for l in layers.values()
                       if l.meta.get("type") == "Table"]}


def layer_resource(layer):
    m = layer.meta
    doc = {"currentVersion": 11.3, "id": layer.id, "name": m.get("name"), "type": m.get("type", "Feature Layer"),
           "displayField": m.get("displayField", ""), "fields": layer.fields,
           "capabilities": svc_meta.get("capabilities"),
           "objectIdField": "OBJECTID", "globalIdField": "GlobalID", "hasAttachments": False,
           "supportsRollbackOnFailureParameter": sync_capabilities()["supportsRollbackOnFailure"],
           "syncCanReturnChanges": True,
           "maxRecordCount": 2000, "hasZ": False, "hasM": False}
    if m.get("type") != "Table":
        sr = svc_meta.get("spatialReference", {"wkid": 4326})
        doc["geometryType"] = m.get("geometryType", "esriGeometryPoint")
        doc["extent"] = {"xmin": -180, "ymin": -90, "xmax": 180, "ymax": 90, "spatialReference": sr}
        doc["sourceSpatialReference"] = sr
    return doc


WHERE_IN = re.compile(r"^\s*globalid\s+in\s*\((.*)\)\s*$", re.I | re.S)
WHERE_EQ = re.compile(r"^\s*globalid\s*=\s*'([^']*)'\s*$", re.I)


def query(layer, form):
    where = (form.get("where") or "1=1").strip()
    wanted = None
    m = WHERE_IN.match(where)
    if m:
        wanted = {norm_gid(x.strip().strip("'\"")) for x in m.group(1).split(",") if x.strip()}
    elif WHERE_EQ.match(where):
        wanted = {norm_gid(WHERE_EQ.match(where).group(1))}
    elif re.sub(r"\s", "", where) != "1=1":
        return error_body(400, "Unable to complete operation.", ["Unsupported where clause: %s" % where])
    out_fields = (form.get("outFields") or "*").strip()
    names = None if out_fields == "*" else {n.strip().lower() for n in out_fields.split(",")}
    geometry = parse_bool(form.get("returnGeometry"), True)
    feats = []
    for gid, rec in sorted(layer.features.items()):
        if rec["deleted"] or (wanted is not None and gid not in wanted):
            continue
        attrs = {k: v for k, v in rec["attributes"].items() if names is None or k.lower() in names}
        f = {"attributes": attrs}
        if geometry and rec["geometry"] is not None:
            f["geometry"] = rec["geometry"]
        feats.append(f)
    return {"objectIdFieldName": "OBJECTID", "globalIdFieldName": "GlobalID",
            "geometryType": layer.meta.get("geometryType", "esriGeometryPoint"),
            "spatialReference": svc_meta.get("spatialReference", {"wkid": 4326}),
            "fields": layer.fields, "features": feats}


def replica_resource(r):
    doc = {"replicaName": r["replicaName"], "replicaID": r["replicaID"], "layers": r["layers"],
           "syncModel": r["model"], "syncDirection": r["direction"], "targetType": "client",
           "creationDate": r["created"], "lastSyncDate": r.get("lastSync", r["created"])}
    doc.update(gens_fields(r, r["gen"]))
    return doc


# ------------------------------------------------------------------ HTTP

def token_of(handler, form):
    t = form.get("token")
    if t:
        return t
    for h in ("X-Esri-Authorization", "Authorization"):
        v = handler.headers.get(h)
        if v and v.lower().startswith("bearer "):
            return v[7:].strip()
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        global connection_count
        super().setup()
        with lock:
            connection_count += 1
            self.conn_id = connection_count
        self.served = 0

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass

    def do_GET(self):
        self.handle_one("GET")

    def do_POST(self):
        self.handle_one("POST")

    def handle_one(self, method):
        nth = self.served
        self.served += 1
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(self.path)
        form = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        ctype = self.headers.get("Content-Type") or ""
        if body and "json" in ctype:
            try:
                form.update(json.loads(body))
            except ValueError:
                pass
        elif body and "multipart/form-data" in ctype:
            self.upload = multipart_file(body, ctype)  # the uploads/upload route reads it
        elif body:
            for k, v in urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items():
                form[k] = v[0]
        entry = {"t": time.time(), "conn": self.conn_id, "nth": nth, "method": method, "path": url.path,
                 "query": url.query, "headers": dict(self.headers), "form": form}
        with lock:
            try:
                outcome = self.route(method, url.path, form, nth)
            except Exception as e:  # a bug here must show in the spec's log, not hang the client
                outcome = ("json", 500, error_body(500, "documented_server: %r" % e))
            if outcome[0] == "file":
                entry["answer"] = 206 if self.headers.get("Range") else 200
            else:
                entry["answer"] = outcome[1] if len(outcome) > 1 and isinstance(outcome[1], int) else outcome[0]
            if outcome[0] == "json" and isinstance(outcome[2], dict) and "error" in outcome[2]:
                entry["error"] = outcome[2]["error"].get("code")
            if outcome[0] == "json" and isinstance(outcome[2], dict) and "/jobs/" in url.path:
                entry["status"] = outcome[2].get("status")  # what the job's status resource said
            with open(log_path, "a") as f:
                f.write(json.dumps(entry) + "\n")
        kind = outcome[0]
        if kind == "drop":
            self.close_connection = True  # no answer: the client sees the connection end
            return
        if kind == "reset":
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        if kind == "json":
            doc = outcome[2] if url.path.startswith("/_control/") else spelled(outcome[2])
            self.send_bytes(outcome[1], json.dumps(doc).encode(), "application/json; charset=utf-8")
        elif kind == "file":
            self.send_file(outcome[1])
        else:
            self.send_bytes(outcome[1], outcome[2].encode(), "text/plain")

    def send_bytes(self, status, data, ctype, extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_file(self, data):
        rng = self.headers.get("Range")
        m = rng and re.match(r"bytes=(\d+)-(\d*)$", rng.strip())
        if m:
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
            if start >= len(data):
                self.send_bytes(416, b"", "application/json", {"Content-Range": "bytes */%d" % len(data)})
                return
            self.send_bytes(206, data[start:end + 1], "application/json",
                            {"Content-Range": "bytes %d-%d/%d" % (start, end, len(data))})
        else:
            self.send_bytes(200, data, "application/json")

    # -------------------------------------------------------------- routes

    def route(self, method, path, form, nth):
        if path.startswith("/_control/"):
            return self.control(method, path[len("/_control/"):], form)
        prefix_path = "%s/%s/FeatureServer" % (BASE, SERVICE)
        if not path.startswith(prefix_path):
            return ("json", 404, error_body(404, "Service not found."))
        rest = path[len(prefix_path):].strip("/")
        token = token_of(self, form)
        if token is not None and TOKEN is not None and token != TOKEN:
            return ("json", 200, error_body(498, "Invalid Token"))
        if rest.startswith("jobs/"):
            return self.job_route(rest[5:], token)
        if rest.startswith("replicafiles/"):
            if settings["protect_results"] and token is None:
                return ("json", 403, error_body(403, "You do not have permissions to access this resource."))
            rec = results.get(rest[len("replicafiles/"):])
            if rec and time.time() - rec["created"] > settings["result_lifetime_s"]:
                results.pop(rest[len("replicafiles/"):], None)
                rec = None
            if rec is None:
                return ("json", 404, error_body(404, "File not found."))
            return ("file", rec["bytes"])
        if rest == "":
            return ("json", 200, service_resource())
        if rest == "synchronizeReplica" and method == "POST":
            return self.synchronize(form, nth)
        if rest == "uploads/upload" and method == "POST":
            data, name = getattr(self, "upload", (None, None))
            self.upload = (None, None)
            if data is None:
                return ("json", 200, error_body(400, "Unable to upload item.", ["No file part."]))
            item_id = "i" + str(uuid.uuid4())
            uploads[item_id] = {"bytes": data, "name": name, "date": int(time.time() * 1000)}
            return ("json", 200, {"success": True, "item": {"itemID": item_id, "itemName": name, "description": None,
                                                            "date": uploads[item_id]["date"], "committed": True}})
        if rest == "createReplica" and method == "POST":
            return ("json", 200, create_replica(form))
        if rest == "unRegisterReplica" and method == "POST":
            r = find_replica(form.get("replicaID"))
            if r is None:
                return ("json", 200, error_body(404, "Replica does not exist."))
            replicas.pop(r["replicaID"], None)
            return ("json", 200, {"success": True})
        if rest.startswith("replicas/"):
            r = find_replica(urllib.parse.unquote(rest[len("replicas/"):]))
            if r is None:
                return ("json", 200, error_body(404, "Replica does not exist."))
            return ("json", 200, replica_resource(r))
        m = re.match(r"^(\d+)(/query)?$", rest)
        if m and int(m.group(1)) in layers:
            layer = layers[int(m.group(1))]
            if m.group(2):
                doc = query(layer, form)
                return ("json", 200, doc)
            return ("json", 200, layer_resource(layer))
        return ("json", 200, error_body(400, "Unable to complete operation.", ["Unknown resource %s" % rest]))

    def synchronize(self, form, nth):
        gw = settings.get("gateway")
        if gw and gateway_seen["gateway"] is not gw:
            gateway_seen["gateway"], gateway_seen["count"] = gw, 0
        if gw:
            gateway_seen["count"] += 1
        if gw and gateway_seen["count"] % int(gw.get("every", 1)) == 0:
            held.append(form)
            threading.Timer(float(gw.get("delay_s", 2)), run_held, (form,)).start()
            if gw.get("mode") == "drop":
                return ("drop",)
            return ("text", 504, "504 Gateway Time-out")
        return self.run_sync(form, nth)

    def run_sync(self, form, nth):
        r = settings.get("race")
        if r:
            settings["race"] = None
            apply_edits(r.get("edits") or [], r.get("origin", "another crew"), True, {})
        p, err = plan_sync(form)
        if err:
            return ("json", 200, err)
        rid = p.replica["replicaID"]
        drop = settings["drop_edit_post"]
        dropping = (drop and settings["drop_edit_post_count"] > 0 and carries_edits(form)
                    and (drop == "any" or (drop == "reused" and nth > 0)))
        if p.asynchronous:
            if rid in busy and jobs.get(busy[rid]) and not jobs[busy[rid]]["final"] \
                    and not jobs[busy[rid]].get("resultUrl"):
                answer = ("json", 200, error_body(409, "Replica %s is busy with another synchronization." % rid))
            else:
                job = submit_job("sync", {"plan": p, "replicaName": p.replica["replicaName"], "replicaID": rid,
                                          "responseType": response_type(p)})
                busy[rid] = job["id"]
                answer = ("json", 200, {"statusUrl": "%s%s/%s/FeatureServer/jobs/%s" % (root, BASE, SERVICE,
                                                                                        job["id"])})
        else:
            answer = ("json", 200, sync_now(p))
        if dropping:
            settings["drop_edit_post_count"] -= 1
            return ("drop",)
        return answer

    def job_route(self, jid, token):
        job = jobs.get(jid)
        lifetime = settings["job_lifetime_s"]
        if job and lifetime is not None and time.time() - job["submitted"] > lifetime:
            jobs.pop(jid, None)
            job = None
        if job:
            pf = job.get("poll_failure")
            if pf and time.time() - job["submitted"] < float(pf.get("seconds", 0)):
                mode = str(pf.get("mode", "503"))
                if mode == "reset":
                    return ("reset",)
                if mode == "404":
                    return ("json", 404, error_body(404, "Job not found."))
                if mode == "error_body":
                    return ("json", 200, error_body(500, "Unable to get the job's status."))
                return ("text", 503, "Service Unavailable")
        if settings["protect_results"] and token is None:
            return ("json", 200, error_body(499, "Token Required"))
        if job is None:
            return ("json", 404, error_body(404, "Job not found."))
        return ("json", 200, job_status(job))

    def control(self, method, what, form):
        global gen
        if what == "settings":
            unknown = [k for k in form if k not in settings]
            if unknown:  # a misspelt knob must not pass for the default
                return ("json", 400, error_body(400, "unknown settings: %s" % ", ".join(sorted(unknown))))
            if method == "POST":
                settings.update(form)
            return ("json", 200, settings)
        if what == "changelog":
            return ("json", 200, {"gen": gen, "entries": changelog})
        if what == "edit":
            lid = int(form.get("layer", 0))
            op = form["op"]
            e = {"id": lid, "features": {"adds": [], "updates": [], "deleteIds": []}}
            if op == "delete":
                e["features"]["deleteIds"] = [form["globalId"]]
            else:
                e["features"][op + "s"] = [form["feature"]]
            _, failed, _ = apply_edits([e], form.get("origin", "another crew"), True, {})
            return ("json", 200, {"gen": gen, "failed": failed})
        if what == "replica":
            r = new_replica(form.get("name", "crew"), form.get("model", "perReplica"),
                            form.get("layers") or sorted(layers))
            return ("json", 200, {"replicaID": r["replicaID"], "gen": r["gen"]})
        if what == "feature":
            rec = layers[int(form.get("layer", 0))].features.get(norm_gid(form.get("globalId")))
            return ("json", 200, {"feature": rec})
        if what == "jobs":
            return ("json", 200, {"jobs": [{"id": j["id"], "kind": j["kind"], "imported": bool(j.get("imported")),
                                            "status": job_status(j)["status"]} for j in jobs.values()]})
        if what == "held":
            return ("json", 200, {"held": len(held)})
        if what == "expire":
            for rec in results.values():
                rec["created"] = 0
            return ("json", 200, {"expired": len(results)})
        return ("json", 404, error_body(404, "no such control route"))


def run_held(form):
    """A request the gateway answered, run by the server now; its answer goes nowhere."""
    with lock:
        try:
            Handler.run_sync(None, form, 0)
        finally:
            held.remove(form)


def watch_parent():
    while exit_with:
        try:
            os.kill(exit_with, 0)
        except OSError:
            os._exit(0)
        time.sleep(0.5)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Handler)
root = "http://127.0.0.1:%d" % server.server_address[1]
threading.Thread(target=watch_parent, daemon=True).start()
print("listening on " + root, flush=True)
server.serve_forever()
