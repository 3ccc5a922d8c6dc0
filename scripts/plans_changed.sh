#!/usr/bin/env bash
# Which plans a change of the cost model's tables moves (docs/cost-model.md,
# "Refitting"): compiles every example model at each budget on a
# device with the device and architecture files of BEFORE (a git revision)
# and with those of the working tree, and prints one markdown row per plan.
#
#   bash scripts/plans_changed.sh BEFORE [DEVICE] [BUDGET...]
#   bash scripts/plans_changed.sh HEAD~1 k40 12GiB 8GiB 4GiB
#
# Needs build/cli/mplan. Only the device files differ between the two runs:
# the planner is the working tree's in both, unless MPLAN_BEFORE names an
# mplan built from BEFORE (a change of the model's code, not only of its
# tables), which then plans "before" with its own tree's device files. "plan changed" compares the
# plan's shape (sub-batch, rounds, offloads), not its algorithms; a compile
# that makes no plan (a budget too small, a device BEFORE lacks) says "fails".
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: bash scripts/plans_changed.sh BEFORE [DEVICE] [BUDGET...]" >&2
  exit 2
fi
before=$1
device=${2:-k40}
shift $(( $# >= 2 ? 2 : 1 ))
budgets=("$@")
[[ ${#budgets[@]} -eq 0 ]] && budgets=(12GiB 8GiB 4GiB)

root=$(cd "$(dirname "$0")/.." && pwd)
mplan=$root/build/cli/mplan
[[ -x $mplan ]] || { echo "plans_changed: build mplan first ($mplan missing)" >&2; exit 1; }
git -C "$root" rev-parse --verify --quiet "$before^{commit}" > /dev/null ||
  { echo "plans_changed: '$before' is not a revision of $root" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The BEFORE revision's device files, in an install layout MPLAN_HOME can name.
mkdir -p "$work/home/share/mplan"
git -C "$root" archive "$before" examples/devices | tar -x -C "$work"
mv "$work/examples/devices" "$work/home/share/mplan/devices"
ln -s "$root/runtime" "$work/home/share/mplan/runtime"

export LC_ALL=C  # printf's number format

# "ms|sub-batch x rounds|offloads (bytes)" of one compile's output, or
# "fails|-|-" (with its output on stderr) where it made no plan.
summary() {
  local out=$1
  local ms batch copies
  ms=$(sed -n 's/^time: \([0-9.]*\) ms simulated.*/\1/p' "$out")
  batch=$(sed -n 's/^batch: [0-9]* as \([0-9]*\) rounds\{0,1\} of sub-batch \([0-9]*\).*/\2 x \1/p' "$out")
  copies=$(sed -n 's/^copies: \([0-9]*\) offloads (\([^)]*\) to host).*/\1 (\2)/p' "$out")
  if [[ -z $ms || -z $batch ]]; then
    echo "plans_changed: no plan in this output:" >&2
    cat "$out" >&2
    printf 'fails|-|-'
    return
  fi
  printf '%.0f|%s|%s' "$ms" "$batch" "${copies:-0 (0 B)}"
}

echo "| model | budget | before: simulated ms | sub-batch x rounds | offloads (to host) | after: simulated ms | sub-batch x rounds | offloads (to host) | plan changed |"
echo "|---|---|---|---|---|---|---|---|---|"
for model in alexnet vgg16 vgg19 resnet18 resnet34 resnet50 resnet101 resnet152 googlenet densenet121 resnet1001 resnet2500; do
  for budget in "${budgets[@]}"; do
    if [[ -n ${MPLAN_BEFORE:-} ]]; then
      env -u MPLAN_HOME "$MPLAN_BEFORE" compile "$root/examples/models/$model.yaml" --device "$device" \
        --budget "$budget" -o "$work/before" > "$work/before.txt" 2>&1 || true
    else
      MPLAN_HOME="$work/home" "$mplan" compile "$root/examples/models/$model.yaml" --device "$device" \
        --budget "$budget" -o "$work/before" > "$work/before.txt" 2>&1 || true
    fi
    env -u MPLAN_HOME "$mplan" compile "$root/examples/models/$model.yaml" --device "$device" --budget "$budget" \
      -o "$work/after" > "$work/after.txt" 2>&1 || true
    b=$(summary "$work/before.txt")
    a=$(summary "$work/after.txt")
    IFS='|' read -r b_ms b_batch b_copies <<< "$b"
    IFS='|' read -r a_ms a_batch a_copies <<< "$a"
    changed=no
    [[ "$b_batch|$b_copies" != "$a_batch|$a_copies" ]] && changed="**yes**"
    echo "| $model | $budget | $b_ms | $b_batch | $b_copies | $a_ms | $a_batch | $a_copies | $changed |"
  done
done
