#!/bin/bash
# Time to quality of task lm, normbench against PyTorch, side by side on one machine: the `cpu`
# preset (nanoGPT's laptop configuration: 4 layers, 4 heads, width 128, context 64, batch 12,
# 2000 steps) trained by `normbench run lm` and by compare/pytorch/lm_train.py (nanoGPT's GPT in
# PyTorch ops, the same hyper-parameters, schedule and validation windows) at the same time with
# the same threads, so that a busy spell of the machine lands on both. Draws validation loss
# against wall-clock seconds for both on one figure (gnuplot: OUT.png and OUT.svg) and prints
# each side's seconds to validation loss 2.0 (the task's target) and its best validation loss.
#
# Usage: tools/lm-time-to-quality.sh [OUT] (default lm-time-to-quality; writes OUT.db, the
#        store of normbench's run, OUT-pytorch.tsv, OUT-normbench.tsv, OUT.gp, OUT.png, OUT.svg)
# Environment: NB (the normbench binary, default ./normbench), PYTHON (a Python with torch,
#   default /usr/bin/python3: Debian's python3-torch), NORM (layer), SEED (1), THREADS (per
#   side, 1), EVAL_EVERY (100), STEPS (the preset's 2000), EVAL_WINDOWS (the preset's 240). Tiny Shakespeare must be in
#   normbench's data directory (normbench fetch tinyshakespeare [--from DIR]).
set -u
out=${1:-lm-time-to-quality}
NB=${NB:-./normbench}
PYTHON=${PYTHON:-/usr/bin/python3}
NORM=${NORM:-layer} SEED=${SEED:-1} THREADS=${THREADS:-1} EVAL_EVERY=${EVAL_EVERY:-100}
STEPS=${STEPS:-2000} EVAL_WINDOWS=${EVAL_WINDOWS:-240}
here=$(cd "$(dirname "$0")/.." && pwd)
command -v gnuplot >/dev/null || { echo "$0: gnuplot is needed (apt-get install gnuplot)" >&2; exit 2; }
"$PYTHON" -c 'import torch' 2>/dev/null || {
    echo "$0: '$PYTHON' has no torch (apt-get install python3-torch, or set PYTHON)" >&2; exit 2; }
data=$("$NB" datasets | sed -n 's/^data directory: //p')
text="$data/tinyshakespeare/input.txt"
[ -r "$text" ] || { echo "$0: no '$text': run '$NB fetch tinyshakespeare' first" >&2; exit 2; }
rm -f "$out.db"
unset OPENBLAS_CORETYPE
echo "# $(uptime)"
echo "# $(grep -m1 'model name' /proc/cpuinfo)"
echo "# both sides at once, $THREADS thread(s) each: norm $NORM, seed $SEED, $STEPS steps, validation every $EVAL_EVERY"
OMP_NUM_THREADS=$THREADS "$NB" run lm --preset cpu --norm "$NORM" --seed "$SEED" --steps "$STEPS" \
    --eval-every "$EVAL_EVERY" --eval-windows "$EVAL_WINDOWS" --threads "$THREADS" --db "$out.db" \
    --quiet &
nb_pid=$!
OMP_NUM_THREADS=$THREADS "$PYTHON" "$here/compare/pytorch/lm_train.py" --data "$text" --preset cpu \
    --norm "$NORM" --seed "$SEED" --steps "$STEPS" --eval-every "$EVAL_EVERY" \
    --eval-windows "$EVAL_WINDOWS" --threads "$THREADS" >"$out-pytorch.tsv" &
py_pid=$!
trap 'kill $nb_pid $py_pid 2>/dev/null' INT TERM
wait $nb_pid || { echo "$0: normbench's run failed" >&2; exit 1; }
wait $py_pid || { echo "$0: the PyTorch run failed" >&2; exit 1; }
echo "# $(uptime)"
{
    printf 'step\tseconds\tval_loss\n'
    sqlite3 -separator $'\t' "$out.db" "select step, printf('%.3f', wall), printf('%.6f', value)
        from metrics where name = 'val_loss' order by step, rowid"
} >"$out-normbench.tsv"
# seconds to the target: the first evaluation at or below it
reach() { awk -F'\t' 'NR > 1 && $1 !~ /^#/ && $3 <= 2.0 { print $2; exit }' "$1"; }
best() { awk -F'\t' 'NR > 1 && $1 !~ /^#/ && (b == "" || $3 < b) { b = $3 } END { print b }' "$1"; }
for side in normbench pytorch; do
    f="$out-$side.tsv"
    last=$(awk -F'\t' 'NR > 1 && $1 !~ /^#/ { s = $2 } END { print s }' "$f")
    printf '%-9s best val_loss %s, val_loss <= 2.0 after %s s, %s steps in %s s\n' "$side" \
        "$(best "$f")" "$(reach "$f")" "$STEPS" "$last"
done
base=$(basename "$out")
torchv=$("$PYTHON" -c 'import torch; print(torch.__version__)')
cat >"$out.gp" <<EOF
# lm, the cpu preset: validation loss against wall-clock seconds, normbench and PyTorch side by
# side; written by tools/lm-time-to-quality.sh. Rerun from this directory: gnuplot $base.gp
# Data: $base-normbench.tsv, $base-pytorch.tsv (step, seconds, val_loss).
do for [fmt in 'png svg'] {
if (fmt eq 'png') {
    set terminal pngcairo size 900,560 font 'Sans,12'
    set output '$base.png'
} else {
    set terminal svg size 900,560 font 'Sans,12' background '#ffffff'
    set output '$base.svg'
}
set termoption noenhanced
set datafile separator tab
set key top right
set grid
set xlabel "wall-clock seconds (both at once, $THREADS thread(s) each)"
set ylabel "validation loss (nats per character)"
set title "lm, cpu preset ($NORM, seed $SEED, $STEPS steps): time to quality"
set xrange [0:*]
set yrange [1.6:3.4]
set arrow 1 from graph 0, first 2.0 to graph 1, first 2.0 nohead dashtype 2 lc rgb "gray"
plot "$base-normbench.tsv" using 2:3 skip 1 with linespoints lw 2 title "normbench", \\
     "$base-pytorch.tsv" using 2:3 skip 1 with linespoints lw 2 title "PyTorch $torchv (compare/pytorch/lm_train.py)"
}
set output
EOF
(cd "$(dirname "$out")" && gnuplot "$base.gp") || { echo "$0: gnuplot failed" >&2; exit 1; }
echo "# figure: $out.png, $out.svg"
