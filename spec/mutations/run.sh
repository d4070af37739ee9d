#!/usr/bin/env bash
# The standing mutation check (`make mutate`, part of `make test-slow`): each
# spec/mutations/NN-name.patch plants one small, plausible data-loss bug. Its
# header names the bug and the specs that must catch it:
#
#   Mutation: what the bug does to a user
#   Specs: spec/a_spec.lua spec/b_spec.lua
#   Filter: a busted --filter Lua pattern (optional: only the specs' tests whose name matches)
#
# followed by the diff (git diff format). Each patch is applied alone to a
# scratch copy of the working tree (under /tmp; core.so rebuilt there when the
# patch touches csrc/), the named specs run, and the mutation counts as caught
# when they fail. The same specs must pass on the unpatched copy first (a spec
# failing anyway catches nothing). A patch that no longer applies is NOT
# caught and says so: remake it against the current code.
#
#   spec/mutations/run.sh [NN ...]     (MUTATE_TIMEOUT seconds per spec run, default 900)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
BUSTED=${BUSTED:-busted}
LIMIT=${MUTATE_TIMEOUT:-900}
SCRATCH=$(mktemp -d /tmp/geoservices-mutate.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT

# the working tree as it is (uncommitted edits too), with its build
mkdir -p "$SCRATCH/base"
git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C "$SCRATCH/base"
if [ ! -f build/geoservices/core.so ]; then echo "mutate: build first (make all)"; exit 2; fi
mkdir -p "$SCRATCH/base/build" && cp -a build/geoservices "$SCRATCH/base/build/"

header() { sed -n "s/^$2: *//p" "$1" | head -n 1; }

patches=()
if [ $# -gt 0 ]; then
  for n in "$@"; do for p in spec/mutations/"$n"-*.patch; do [ -f "$p" ] && patches+=("$p"); done; done
else
  for p in spec/mutations/[0-9]*.patch; do [ -f "$p" ] && patches+=("$p"); done
fi
if [ ${#patches[@]} -eq 0 ]; then echo "mutate: no patches"; exit 2; fi

# busted over SPECS (+ FILTER) in DIR; its exit status (124: timed out)
run_specs() { # dir specs filter log
  local dir=$1 specs=$2 filter=$3 log=$4
  local args=(--cpath='build/?.so' -o TAP)
  # busted splits its arguments at spaces: a space of the pattern becomes "." (any character)
  [ -n "$filter" ] && args+=(--filter="${filter// /.}")
  # shellcheck disable=SC2086
  (cd "$dir" && timeout "$LIMIT" "$BUSTED" "${args[@]}" $specs) >"$log" 2>&1
}

declare -A baseline
caught=0 total=0 rows=()
for p in "${patches[@]}"; do
  total=$((total + 1))
  name=$(basename "$p" .patch)
  what=$(header "$p" Mutation)
  specs=$(header "$p" Specs)
  filter=$(header "$p" Filter)
  log="$SCRATCH/$name.log"
  if [ -z "$specs" ]; then
    rows+=("NOT caught  $name: its header names no specs ('Specs: ...')"); continue
  fi
  key="$specs|$filter"
  if [ -z "${baseline[$key]:-}" ]; then
    if run_specs "$SCRATCH/base" "$specs" "$filter" "$SCRATCH/baseline.log"; then baseline[$key]=pass
    else baseline[$key]=fail; cp "$SCRATCH/baseline.log" "$SCRATCH/baseline-$name.log"; fi
  fi
  if [ "${baseline[$key]}" = fail ]; then
    rows+=("NOT caught  $name: its specs fail WITHOUT the bug ($specs); fix them first")
    tail -n 15 "$SCRATCH/baseline-$name.log" | sed 's/^/    | /'
    continue
  fi
  rm -rf "$SCRATCH/work" && cp -a "$SCRATCH/base" "$SCRATCH/work"
  if ! (cd "$SCRATCH/work" && git apply "$ROOT/$p") >"$log" 2>&1; then
    rows+=("NOT caught  $name: the patch NO LONGER APPLIES (the code moved: remake it): $(head -n 1 "$log")")
    continue
  fi
  if git apply --numstat "$p" | grep -q '[[:space:]]csrc/'; then
    if ! make -s -C "$SCRATCH/work" all >"$log" 2>&1; then
      rows+=("NOT caught  $name: the patched C does not build (remake it): $(tail -n 1 "$log")"); continue
    fi
  fi
  start=$(date +%s)
  run_specs "$SCRATCH/work" "$specs" "$filter" "$log"
  status=$?
  secs=$(( $(date +%s) - start ))
  if [ $status -eq 124 ]; then
    caught=$((caught + 1)); rows+=("caught      $name (the specs timed out after ${LIMIT} s): $what")
  elif [ $status -ne 0 ]; then
    caught=$((caught + 1))
    failed=$(grep -c '^not ok' "$log")
    rows+=("caught      $name (${failed} failing test(s), ${secs} s): $what")
  else
    rows+=("NOT caught  $name (the specs pass with the bug, ${secs} s): $what")
  fi
  echo "  ${rows[-1]}"
done
echo
echo "mutation check: caught $caught of $total planted bugs"
for r in "${rows[@]}"; do echo "  $r"; done
[ "$caught" -eq "$total" ]
