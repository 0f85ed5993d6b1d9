#!/bin/bash
# tools/lm-time-to-quality.sh, shortened (4 steps, 8 validation windows): normbench's run and
# compare/pytorch/lm_train.py side by side on Tiny Shakespeare, both curves in one figure. Needs
# NB_TEST_TINYSHAKESPEARE (the directory of input.txt), Debian's python3-torch and gnuplot (TAP).
set -u
. "$(dirname "$0")/lib.sh"
src=${NB_TEST_TINYSHAKESPEARE:-}
if [ -z "$src" ] || [ ! -r "$src/input.txt" ] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null ||
    ! command -v gnuplot >/dev/null; then
    echo "1..0 # skip needs NB_TEST_TINYSHAKESPEARE, /usr/bin/python3 with torch and gnuplot"
    exit 0
fi
export NORMBENCH_DATA=$tmp/data
unset NORMBENCH_DB
tool="$(dirname "$0")/../../tools/lm-time-to-quality.sh"
check "fetch tinyshakespeare --from DIR" 0 "$NB" fetch tinyshakespeare --from "$src"
check "the tool, 4 steps" 0 env NB="$NB" STEPS=4 EVAL_EVERY=2 EVAL_WINDOWS=8 "$tool" "$tmp/ttq"
for side in normbench pytorch; do
    has "it reports $side" "$tmp/out" "^$side +best val_loss [0-9.]+, val_loss <= 2.0 after +s, 4 steps in [0-9.]+ s"
    rows=$(awk -F'\t' 'NR > 1 && $1 ~ /^[0-9]+$/' "$tmp/ttq-$side.tsv" | wc -l)
    [ "$rows" -ge 2 ] && ok "$side's curve has its evaluations ($rows)" || not_ok "$side's curve has its evaluations ($rows)"
    l=$(awk -F'\t' 'NR > 1 && $1 ~ /^[0-9]+$/ { v = $3 } END { print v }' "$tmp/ttq-$side.tsv")
    awk -v v="$l" 'BEGIN { exit !(v > 2 && v < log(65) + 0.5) }' && ok "$side's loss is a loss over 65 characters ($l)" || not_ok "$side's loss is a loss over 65 characters ($l)"
done
[ -s "$tmp/ttq.png" ] && [ -s "$tmp/ttq.svg" ] && ok "the figure, png and svg" || not_ok "the figure, png and svg"
has "one figure draws both" "$tmp/ttq.gp" 'ttq-normbench.tsv.*, \\$'
has "one figure draws both (PyTorch)" "$tmp/ttq.gp" 'ttq-pytorch.tsv'
check "without torch it refuses" 2 env NB="$NB" PYTHON=/bin/false "$tool" "$tmp/no"
has "saying so" "$tmp/err" "has no torch"
echo "1..$n"
[ $fails -eq 0 ]
