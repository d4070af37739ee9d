#!/bin/sh
# Peak resident memory (VmHWM) of the emulator while it receives one large
# request body, per route: an urlencoded field and a multipart file part to
# /_emulator/echo, a licenseFile to configure, and a synchronizeReplica whose
# edits carry 8 adds with large attributes. A fresh emulator per case.
#   sh spec/bench/emulator_body_rss.sh [MiB=256] [tree=.]
# Prints one line per case: route, body bytes, VmHWM before and after (MiB), VmRSS once answered
# (the memory the emulator keeps), seconds.
set -eu
MIB=${1:-256}
TREE=$(cd "${2:-.}" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SIZE=$((MIB * 1024 * 1024))

# The bodies, written once: a value of SIZE bytes of 'a' in each.
head -c "$SIZE" /dev/zero | tr '\0' 'a' > "$WORK/value"
{ printf 'f=json&big='; cat "$WORK/value"; } > "$WORK/form.txt"
# synchronizeReplica: 8 adds, each with an attribute of SIZE/8 bytes (a JSON
# string of the decoder's 64 MiB maximum or less)
head -c $((SIZE / 8)) /dev/zero | tr '\0' 'a' > "$WORK/eighth"
CREW1='%7B5E1A0C2B-1111-4A5B-9C8D-000000000001%7D'
{ printf 'f=json&replicaID=%s&replicaServerGen=1&edits=' "$CREW1"
  printf '%%5B%%7B%%22id%%22%%3A0%%2C%%22features%%22%%3A%%7B%%22adds%%22%%3A%%5B'
  for i in 1 2 3 4 5 6 7 8; do
    [ $i = 1 ] || printf '%%2C'
    printf '%%7B%%22attributes%%22%%3A%%7B%%22GlobalID%%22%%3A%%22%%7BDDDDDDDD-0000-4000-8000-00000000000%d%%7D' $i
    printf '%%22%%2C%%22NOTE%%22%%3A%%22'
    cat "$WORK/eighth"
    printf '%%22%%7D%%7D'
  done
  printf '%%5D%%7D%%7D%%5D'; } > "$WORK/sync.txt"
VOLUMES='{"volumesConfig":[{"provisioningType":"DYNAMIC","component":"RELATIONAL_PRIMARY","size":"16Gi","storageClass":"standard","labels":{}},{"provisioningType":"DYNAMIC","component":"RELATIONAL_SECONDARY","size":"16Gi","storageClass":"standard","labels":{}},{"provisioningType":"DYNAMIC","component":"BLOB","size":"16Gi","storageClass":"standard","labels":{}},{"provisioningType":"DYNAMIC","component":"IN_MEM_CACHE","size":"16Gi","storageClass":"standard","labels":{}},{"provisioningType":"DYNAMIC","component":"QUEUE","size":"16Gi","storageClass":"standard","labels":{}},{"provisioningType":"DYNAMIC","component":"INDEXER","size":"16Gi","storageClass":"standard","labels":{}},{"provisioningType":"DYNAMIC","component":"SHARING","size":"16Gi","storageClass":"standard","labels":{}},{"provisioningType":"DYNAMIC","component":"REST_METRICS_API","size":"16Gi","storageClass":"standard","labels":{}}]}'

hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$1/status"; }
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$1/status"; }

run_case() { # name, kind (form | multipart | configure | sync)
  name=$1; kind=$2
  cd "$TREE"
  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/?.so;;' \
    lua5.4 lua/geoservices/emulator/main.lua --port 0 --data examples/data/world.json \
    --configure-seconds 60 > "$WORK/log" 2>&1 &
  pid=$!
  i=0
  url=
  while [ -z "$url" ]; do
    i=$((i + 1)); [ $i -lt 200 ] || { cat "$WORK/log"; kill "$pid"; exit 1; }; sleep 0.05
    url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$WORK/log")
  done
  root=${url%/server}
  case $kind in
    form) set -- --data-binary "@$WORK/form.txt" "$root/_emulator/echo" ;;
    multipart) set -- -F "licenseFile=@$WORK/value" "$root/_emulator/echo" ;;
    configure) set -- -F f=json -F token=admin-token -F username=siteadmin -F password=Pa55word-x1 \
      -F email=siteadmin@example.com -F "fullName=Site Admin" -F securityQuestionIdx=3 \
      -F securityQuestionAns=answer -F userLicenseTypeId=creatorUT -F "volumesConfig=$VOLUMES" \
      -F "licenseFile=@$WORK/value;filename=license.prvc" "$url/admin/configure" ;;
    sync) set -- --data-binary "@$WORK/sync.txt" "$url/Parcels/FeatureServer/synchronizeReplica" ;;
  esac
  before=$(hwm "$pid")
  t0=$(date +%s.%N)
  code=$(env -u LD_PRELOAD curl -s -o "$WORK/out" -w '%{http_code}' --max-time 600 "$@" || true)
  t1=$(date +%s.%N)
  after=$(hwm "$pid")
  sleep 0.5 # the emulator's step that answered returns the request's memory
  kept=$(rss "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  printf '%-36s HTTP %s  VmHWM %5d -> %5d MiB  VmRSS after %5d MiB  %6.1f s  %s\n' "$name" "$code" \
    $((before / 1024)) $((after / 1024)) $((kept / 1024)) "$(echo "$t1 - $t0" | bc)" \
    "$(head -c 100 "$WORK/out" | tr -d '\n')"
}

run_case "echo: urlencoded ${MIB} MiB field" form
run_case "echo: multipart ${MIB} MiB file part" multipart
run_case "configure: ${MIB} MiB licenseFile" configure
run_case "synchronizeReplica: ${MIB} MiB edits" sync
