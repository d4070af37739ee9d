#!/bin/sh
# A short tour of the `geoservices` command against the emulator (run by
# `make demo` through run_with_emulator.sh, which sets GEOSERVICES_URL and the
# module paths). Installed, the command is simply `geoservices`.
set -u
LUA=${LUA:-lua5.4}
geoservices() { "$LUA" -e 'os.exit(require("geoservices.cli").main(arg))' /dev/null "$@"; }
export GEOSERVICES_TOKEN=admin-token

echo '$ geoservices services 4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c 7a1e3c5b2d4f4e6a9c8b7a6f5e4d3c2b'
geoservices services 4d6f1a2b9c8e4f0a8b7c6d5e4f3a2b1c 7a1e3c5b2d4f4e6a9c8b7a6f5e4d3c2b

echo; echo '$ geoservices --token-env ALICE --json snapshots nb-street-trees   # JSON lines for scripts'
ALICE=alice-token geoservices --token-env ALICE --json snapshots nb-street-trees | cut -c 1-110

echo; echo '$ geoservices status'
geoservices status

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/crew-2.json" <<'JSON'
{"service": "Parcels", "replicaID": "{5E1A0C2B-2222-4A5B-9C8D-000000000002}", "model": "perReplica",
 "replicaServerGen": 1, "syncDirection": "bidirectional"}
JSON
cat > "$dir/edits.json" <<'JSON'
[{"id": 0, "features": {"adds": [], "deleteIds": [], "updates": [
  {"attributes": {"GlobalID": "{0B7B2D2A-5C1E-4F6A-9D3B-1A2B3C4D5E01}", "OWNER": "Jane Smith-Doe"}},
  {"attributes": {"GlobalID": "{DEADBEEF-0000-4000-8000-000000000000}", "OWNER": "nobody"}}]}}]
JSON

echo; echo '$ geoservices --dry-run sync crew-2.json --edits edits.json   # nothing is sent, the token is redacted'
geoservices --dry-run sync "$dir/crew-2.json" --edits "$dir/edits.json"

echo; echo '$ geoservices sync crew-2.json --edits edits.json --async'
geoservices sync "$dir/crew-2.json" --edits "$dir/edits.json" --async --poll-interval 0.2
echo "exit code $? (3: synchronized, but some edits failed)"
exit 0
