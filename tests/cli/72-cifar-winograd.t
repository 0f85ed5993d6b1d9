#!/bin/bash
# cifar's --conv (the Winograd engine of the 3x3 convolutions, nn/winograd.c) and `bench conv`:
# the option's usage, a short synthetic run per engine whose losses follow im2col's (the same
# network, the same data, other rounding), the engine recorded, and the benchmark's table (TAP).
set -u
. "$(dirname "$0")/lib.sh"
db=$tmp/c.db
export NORMBENCH_DB=$db
losses() { sqlite3 "$db" "select group_concat(value, ' ') from (select value from metrics where run = $1 and name = 'train_loss' order by step)"; }

check "run --help" 0 "$NB" run cifar --help
has "help lists --conv" "$tmp/out" "--conv E"
has "with its engines" "$tmp/out" "im2col\\|winograd\\|winograd4\\|auto"
check "a bad --conv is a usage error" 2 "$NB" run cifar --conv fft
has "it names the choices" "$tmp/err" "winograd4"

# 10 steps of a narrow network (12/24 channels) on 500 synthetic images, batch 50, a loss each
# step; runs 1..4: im2col, winograd, winograd4, auto (at width 0.125 no shape is in auto's table:
# im2col's numbers exactly). Measured: the Winograd losses within 3e-3 relative of im2col's.
r=0
for c in im2col winograd winograd4 auto; do
    r=$((r + 1))
    check "--conv $c: short synthetic run" 0 "$NB" run cifar --dataset synthetic --width 0.125 --subset 500 --batch 50 --steps 10 --log-every 1 --conv $c --quiet
done
base=$(losses 1)
for r in 2 3; do
    l=$(losses $r)
    awk -v a="$base" -v b="$l" 'BEGIN { na = split(a, x, " "); nb = split(b, y, " "); if (na != 10 || nb != 10) exit 1
        for (i = 1; i <= na; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 0.02 * x[i]) exit 1 } }' &&
        ok "run $r: ten losses within 2% of im2col's" || not_ok "run $r: ten losses within 2% of im2col's" "im2col: $base
run $r: $l"
    # another engine, not im2col under another name: the rounding differs somewhere
    [ "$l" != "$base" ] && ok "run $r: the losses are not im2col's bit for bit" || not_ok "run $r: the losses are not im2col's bit for bit"
done
[ -n "$base" ] && [ "$(losses 4)" = "$base" ] && ok "auto at an unmeasured width: im2col's losses" || not_ok "auto at an unmeasured width: im2col's losses"
check "the config records the engine" 0 "$NB" show 2
has "conv recorded" "$tmp/out" '"conv": "winograd"'
check "the default is recorded too" 0 "$NB" show 1
has "conv im2col recorded" "$tmp/out" '"conv": "im2col"'

# the benchmark: every 3x3 layer of the network, each pass and sum mode, the settings
check "bench conv at batch 2" 0 "$NB" bench conv --batch 2 --steps 3 --format csv --threads 2
rows=$(grep -c -E '^[0-9]+>[0-9]+ ' "$tmp/out")
[ "$rows" -eq 20 ] && ok "20 rows (5 layer shapes x fwd/bwd x batch/exact sums)" || not_ok "20 rows, got $rows" "$(cat "$tmp/out")"
has "the im2col/winograd ratio columns" "$tmp/out" "^layer,count,sums,pass,im2col_ms,wino2_ms,wino4_ms,im2col_over_wino2"
has "threads and BLAS recorded" "$tmp/out" "threads=2 .*blas="
check "bench conv takes one batch size" 2 "$NB" bench conv --batch 100,4
has "it says so" "$tmp/err" "one batch size"
check "bench conv has no --norms" 2 "$NB" bench conv --norms layer
# bench step takes --conv as cifar's option; its GEMM floor (im2col's GEMMs) says what it is not
check "bench step cifar --conv winograd4" 0 "$NB" bench step cifar --norms layer --batch 4 --steps 1 --conv winograd4
has "the floor notes the Winograd layers" "$tmp/out" "^# --conv winograd4: these are im2col's GEMMs"
check "bench step cifar --conv im2col" 0 "$NB" bench step cifar --norms layer --batch 4 --steps 1 --conv im2col
grep -q -- "^# --conv" "$tmp/out" && not_ok "no note with im2col" || ok "no note with im2col"

echo "1..$n"
[ $fails -eq 0 ]
