#!/usr/bin/env bash
# Mutation check: plants each small, realistic bug of scripts/mutation.py in
# turn (planner heuristics, CPU kernels, verifier checks, generated program,
# checkpoints, shape inference) in a copy of the tree, rebuilds and runs the
# tests the mutant names, and fails if any mutant survives (every test
# passing). Run it before saying a change is done; docs/robustness.md says how
# long each set takes.
#
#   scripts/mutation.sh [--set "planner,runtime,..."] [--only "name,name"] [--keep]
#
# The copy and its build live in $MUTATION_WORK (default: a fresh temporary
# folder, removed at the end unless --keep); the working tree is not touched.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
keep=0
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keep) keep=1; shift ;;
    --only) args+=(--only "$2"); shift 2 ;;
    --set) args+=(--set "$2"); shift 2 ;;
    *) echo "usage: scripts/mutation.sh [--set SETS] [--only NAMES] [--keep]" >&2; exit 2 ;;
  esac
done
work="${MUTATION_WORK:-$(mktemp -d /tmp/mplan-mutation.XXXXXX)}"
mkdir -p "$work/src"
# The sources as git sees them (tracked and new files, not ignored ones).
# Only files whose content differs are copied, with a new time stamp: a kept
# copy (--keep, MUTATION_WORK) then rebuilds exactly what changed (copying
# with the source's old time stamp left objects of an earlier mutant in place).
# Files gone from the source (deleted, renamed) leave the copy too: the
# libraries glob their sources.
: > "$work/files.list"
(cd "$root" && git ls-files -co --exclude-standard -z) | while IFS= read -r -d '' f; do
  [[ -e "$root/$f" ]] || continue
  printf '%s\0' "$f" >> "$work/files.list"
  if ! cmp -s "$root/$f" "$work/src/$f"; then
    mkdir -p "$(dirname "$work/src/$f")"
    cp "$root/$f" "$work/src/$f"
  fi
done
(cd "$work/src" && find . -path ./build -prune -o -type f -printf '%P\0') | while IFS= read -r -d '' f; do
  grep -qzxF -- "$f" "$work/files.list" || rm -f -- "$work/src/$f"
done
rm -f "$work/files.list"
cmake -S "$work/src" -B "$work/src/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMPLAN_BUILD_BENCH=OFF \
  > "$work/configure.log" 2>&1
status=0
/usr/bin/python3 "$root/scripts/mutation.py" --work "$work" "${args[@]}" || status=$?
if [[ $keep -eq 0 && -z "${MUTATION_WORK:-}" ]]; then rm -rf "$work"; else echo "kept: $work"; fi
exit $status
