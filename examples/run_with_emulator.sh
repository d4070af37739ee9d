#!/bin/sh
# Starts the emulator on 127.0.0.1 and a free port, runs each Lua (or .sh) script given
# against it (the URL is in GEOSERVICES_URL), and stops the emulator by PID.
#   sh examples/run_with_emulator.sh examples/tour.lua examples/batch_sync.lua
set -u
LUA=${LUA:-lua5.4}
BUILD=${BUILD:-build}
DATA=${DATA:-examples/data/world.json}
export LUA_PATH="lua/?.lua;lua/?/init.lua;;"
export LUA_CPATH="$BUILD/?.so;;"

log=$(mktemp)
"$LUA" lua/geoservices/emulator/main.lua --port 0 --data "$DATA" --exit-with $$ >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT INT TERM

url=""
for _ in $(seq 1 100); do
  url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log")
  [ -n "$url" ] && break
  kill -0 $pid 2>/dev/null || { cat "$log"; echo "emulator failed to start" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "emulator did not start in 10 s" >&2; exit 1; }
echo "emulator (pid $pid) at $url"
status=0
for script in "$@"; do
  echo
  echo "### $script"
  case $script in
    *.sh) GEOSERVICES_URL="$url" LUA="$LUA" sh "$script" || status=1 ;;
    *) GEOSERVICES_URL="$url" "$LUA" "$script" || status=1 ;;
  esac
done
exit $status
