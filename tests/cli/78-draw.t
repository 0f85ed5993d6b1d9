#!/bin/bash
# Command-line tests of task draw (DRAW, LN paper §6.4): its options and refusals (--norm batch,
# --act, out-of-range sizes, attention options without attention); every norm it takes overfits
# a batch of synthetic images in 30 steps (the bound falls, every value finite, the parts add
# up); a run stopped by Ctrl-C mid-epoch resumes to the numbers of an uninterrupted one; two
# MPI ranks record what one process records; the kept model draws a PNG grid and a canvas
# sequence (read back with Python's zlib), the same for the same seed; report --paper sets the
# LN paper's bounds beside the runs; plot draws the bound against steps and seconds; bench step
# draw times every norm it takes (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DB=$tmp/draw.db
export NORMBENCH_DATA=$tmp/data
tiny="--dataset synthetic --dim 16 --glimpses 4 --z-dim 4 --batch 8 --threads 1 --quiet"
q() { sqlite3 "$NORMBENCH_DB" "$1"; }
vals() { q "select group_concat(value, ' ') from (select value from metrics where run = $1 and name = '$2' order by step, rowid)"; }

check "help run draw" 0 "$NB" help run draw
has "it lists draw's options" "$tmp/out" '^  --glimpses N'
has "the model choice" "$tmp/out" '^  --model M'
has "and --no-attention" "$tmp/out" '^  --no-attention'
has "with the datasets" "$tmp/out" 'binarized-mnist mnist-binarized fashion-mnist-binarized \(default\) synthetic'
check "--norm batch is refused" 2 "$NB" run draw --norm batch $tiny
has "saying why" "$tmp/err" "task draw cannot use --norm batch: its LSTMs run a step at a time"
has "and what to use" "$tmp/err" "use a row-wise norm: none, weight, layer, rms, prms or dyt"
check "--act is refused" 2 "$NB" run draw --act relu $tiny
has "saying why" "$tmp/err" "cannot use --act: its LSTMs' activations are sigmoid and tanh"
check "--read-n 1 is refused" 2 "$NB" run draw --read-n 1 $tiny
has "naming it" "$tmp/err" "read-n"
check "--write-n 17 is refused" 2 "$NB" run draw --write-n 17 $tiny
check "--read-n without attention is refused" 2 "$NB" run draw --no-attention --read-n 3 $tiny
has "saying it sizes the attention" "$tmp/err" "--read-n is an option of draw --model attention"
check "an unknown model is refused" 2 "$NB" run draw --model convolutional $tiny
check "an unknown binarization is refused" 2 "$NB" run draw --binarize median $tiny
check "a negative --glimpses is refused" 2 "$NB" run draw --glimpses -1 $tiny
check "a dataset of another task is refused" 2 "$NB" run draw --dataset cifar10 --dim 16
check "a batch larger than the training set" 1 "$NB" run draw $tiny --subset 4 --steps 1
has "is refused naming both" "$tmp/err" "batch size 8 is larger than the 4 training images"
nodata=$tmp/nodata
mkdir -p "$nodata"
check "binarized-mnist before it is fetched" 1 "$NB" run draw --dataset binarized-mnist --data-dir "$nodata" --dim 16 --glimpses 4 --z-dim 4 --steps 1 --quiet
has "says how to get it" "$tmp/err" "fetch binarized-mnist"

# every norm the task takes overfits 8 images (one batch, an evaluation after each step): the
# training bound falls by more than 100 nats in 30 steps (from about 784 ln 2 = 543)
for norm in none layer rms prms weight dyt; do
    check "$norm: 30 steps on 8 synthetic images" 0 "$NB" run draw $tiny --subset 8 --steps 30 --lr 0.01 --log-every 5 --norm $norm
    run=$(q "select max(id) from runs")
    s=$(q "select status from runs where id = $run")
    tl=$(vals $run train_loss)
    first=${tl%% *} last=${tl##* }
    if [ "$s" = finished ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 520 && a < 560 && b < a - 100) }'; then
        ok "$norm: the training bound falls ($tl)"
    else
        not_ok "$norm: the training bound falls (status $s: $tl)"
    fi
    bad=$(q "select count(*) from metrics where run = $run and (value is null or abs(value) > 1e300 or value != value)")
    n6=$(q "select count(distinct name) from metrics where run = $run and name in ('val_nll', 'val_recon', 'val_kl', 'test_nll', 'test_recon', 'test_kl', 'best_val_nll')")
    [ "$bad" = 0 ] && [ "$n6" = 7 ] && ok "$norm: val, test and best bounds recorded, all finite" || not_ok "$norm: bounds recorded ($n6 of 7 names, $bad not finite)"
    sum=$(q "select (select value from metrics where run = $run and name = 'test_nll') - (select value from metrics where run = $run and name = 'test_recon') - (select value from metrics where run = $run and name = 'test_kl')")
    awk -v d="$sum" 'BEGIN { exit !(d < 1e-9 && d > -1e-9) }' && ok "$norm: test_nll = test_recon + test_kl" || not_ok "$norm: test_nll = test_recon + test_kl (differs by $sum)"
done
# the last layer run: the test bound is that of the best validation point
lr=$(q "select max(id) from runs where norm = 'layer'")
best=$(q "select value from metrics where run = $lr and name = 'best_val_nll' order by step desc, rowid desc limit 1")
minv=$(q "select min(value) from metrics where run = $lr and name = 'val_nll'")
[ -n "$best" ] && [ "$best" = "$minv" ] && ok "best_val_nll is the lowest val_nll ($best)" || not_ok "best_val_nll is the lowest val_nll ($best, $minv)"
tags=$(q "select value from tags where run = $lr and key = 'model'")
[ "$tags" = "paper attention" ] && ok "the run's model label ($tags)" || not_ok "the run's model label ($tags)"

# without attention
check "--no-attention trains" 0 "$NB" run draw $tiny --subset 8 --steps 10 --lr 0.01 --no-attention --norm layer
run=$(q "select max(id) from runs")
tags=$(q "select value from tags where run = $run and key = 'model'")
[ "$tags" = "paper no-attention" ] && ok "its model label ($tags)" || not_ok "its model label ($tags)"

# resume: SIGINT mid-epoch (10 steps an epoch), then --resume: the numbers of an uninterrupted run
args="draw --dataset synthetic --dim 32 --glimpses 8 --z-dim 8 --batch 16 --subset 160 --steps 60 --log-every 5 --norm layer --threads 1 --quiet"
metrics() { q "select group_concat(name||':'||step||':'||value, ' ') from (select * from metrics where run = $1 and name not in ('ms_per_step', 'epoch_seconds') order by name, step)"; }
last_step() { q "select coalesce(max(step), 0) from metrics where run = $1"; }
check "an uninterrupted run" 0 "$NB" run $args
ref=$(q "select max(id) from runs")
id=$((ref + 1))
"$NB" run $args >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 3000); do
    [ "$(last_step $id 2>/dev/null || echo 0)" -ge 13 ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.01
done
kill -INT $pid 2>/dev/null
wait $pid 2>/dev/null
s=$(q "select status from runs where id = $id")
at=$(last_step $id)
[ "$s" = interrupted ] && [ "$at" -lt 60 ] && ok "SIGINT stops it (near step $at)" || not_ok "SIGINT stops it (status $s, step $at)"
[ -e "$NORMBENCH_DB-checkpoints/run-$id.ckpt" ] && ok "it keeps a checkpoint" || not_ok "it keeps a checkpoint"
check "resume it" 0 "$NB" run --resume $id --quiet
has "it finishes the same run" "$tmp/out" "^run $id finished$"
a=$(metrics "$ref")
b=$(metrics "$id")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "it recorded the numbers of the uninterrupted run" \
    || not_ok "it recorded the numbers of the uninterrupted run" "$(diff <(echo "$a" | tr ' ' '\n') <(echo "$b" | tr ' ' '\n') | head -n 6)"

# data-parallel: two ranks record what one process records (to float rounding of the summed
# gradients: 1e-5 relative)
if command -v mpirun >/dev/null 2>&1; then
    dp="--dataset synthetic --dim 16 --glimpses 4 --z-dim 4 --batch 8 --subset 32 --steps 12 --lr 0.01 --norm layer --threads 1 --quiet"
    check "one process" 0 "$NB" run draw $dp --db "$tmp/mp1.db"
    check "mpirun -np 2" 0 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 mpirun --bind-to none -np 2 "$NB" run draw $dp --db "$tmp/mp2.db"
    a=$(sqlite3 "$tmp/mp1.db" "select group_concat(value, ' ') from (select value from metrics where name = 'val_nll' order by step)")
    b=$(sqlite3 "$tmp/mp2.db" "select group_concat(value, ' ') from (select value from metrics where name = 'val_nll' order by step)")
    if [ -n "$a" ] && awk -v a="$a" -v b="$b" 'BEGIN { n = split(a, x, " "); m = split(b, y, " "); if (n != m || n < 3) exit 1
        for (i = 1; i <= n; i++) { d = (x[i] - y[i]) / x[i]; if (d > 1e-5 || d < -1e-5) exit 1 } }'; then
        ok "two ranks agree with one process ($a | $b)"
    else
        not_ok "two ranks agree with one process ($a | $b)"
    fi
else
    n=$((n + 1)); echo "ok $n # skip mpirun is not installed"
fi

# sample: a PNG from the kept model
kept="$NORMBENCH_DB-checkpoints/run-$ref.model/model"
[ -f "$kept" ] && head -c 22 "$kept" | grep -q "normbench-draw-model 1" && ok "the finished run keeps its model" || not_ok "the finished run keeps its model"
pngcheck() {
    python3 - "$1" "$2" "$3" <<'EOF'
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n"
i, idat, dims = 8, b"", None
while i < len(d):
    n, = struct.unpack(">I", d[i:i + 4]); t = d[i + 4:i + 8]; body = d[i + 8:i + 8 + n]
    assert struct.unpack(">I", d[i + 8 + n:i + 12 + n])[0] == zlib.crc32(t + body), "crc"
    if t == b"IHDR": dims = struct.unpack(">II", body[:8])
    if t == b"IDAT": idat += body
    i += 12 + n
raw = zlib.decompress(idat)
w, h = dims
assert (w, h) == (int(sys.argv[2]), int(sys.argv[3])), (w, h)
assert len(raw) == h * (w + 1)
EOF
}
check "sample a grid" 0 "$NB" sample $ref --out "$tmp/grid.png"
pngcheck "$tmp/grid.png" 233 233 && ok "a PNG of 8x8 images of 28 pixels, read back" || not_ok "a PNG of 8x8 images, read back"
check "the same seed again" 0 "$NB" sample $ref --out "$tmp/grid2.png"
cmp -s "$tmp/grid.png" "$tmp/grid2.png" && ok "gives the same picture" || not_ok "gives the same picture"
check "another seed" 0 "$NB" sample $ref --seed 2 --out "$tmp/grid3.png"
cmp -s "$tmp/grid.png" "$tmp/grid3.png" && not_ok "gives another picture" || ok "gives another picture"
check "the canvas sequence" 0 "$NB" sample $ref --frames 4 --count 3 --out "$tmp/frames.png"
pngcheck "$tmp/frames.png" 117 88 && ok "a row of 4 frames per image, 3 images" || not_ok "a row of 4 frames per image"
check "sample without --out" 2 "$NB" sample $ref
has "asks for the PNG's name" "$tmp/err" "draws images: name the PNG to write with --out"
check "--tokens for a draw run" 2 "$NB" sample $ref --tokens 5 --out "$tmp/x.png"
has "is refused" "$tmp/err" "--tokens is for text"
[ ! -e "$tmp/x.png" ] && ok "and writes nothing" || not_ok "and writes nothing"
cp "$kept" "$tmp/kept.bak"
printf 'x' | dd of="$kept" bs=1 seek=500 conv=notrunc 2>/dev/null
check "a changed model is refused" 1 "$NB" sample $ref --out "$tmp/y.png"
has "as damaged" "$tmp/err" "is damaged"
cp "$tmp/kept.bak" "$kept"

# report --paper: the LN paper's bounds beside the runs
check "report --paper" 0 "$NB" report --task draw --paper
has "sets the paper's baseline bound" "$tmp/out" "82\\.36"
has "and LN's" "$tmp/out" "82\\.09"

# plot --task draw: the bound against steps and seconds
if command -v gnuplot >/dev/null 2>&1; then
    check "plot --task draw" 0 "$NB" plot --task draw --term dumb
    has "draws the validation bound" "$tmp/out" "val_nll"
    has "against wall-clock time" "$tmp/out" "against wall-clock time"
else
    n=$((n + 1)); echo "ok $n # skip gnuplot is not installed"
fi

# bench step draw: every norm the task takes (dyt too), batch left out of 'all'
check "bench step draw" 0 "$NB" bench step draw --batch 4 --dim 16 --glimpses 4 --z-dim 4 --steps 2 --threads 1
for norm in none weight layer rms prms dyt; do has "times $norm" "$tmp/out" "^draw +$norm +4 "; done
grep -q "^draw  *batch" "$tmp/out" && not_ok "leaves batch out" || ok "leaves batch out"
check "bench step draw --norms batch is refused" 1 "$NB" bench step draw --norms batch --batch 4 --dim 16 --steps 1
has "saying so" "$tmp/err" "draw: batch normalization is not available"
check "bench step draw --preset small" 0 "$NB" bench step draw --preset small --norms layer --batch 2 --glimpses 2 --steps 1 --threads 1
has "times it" "$tmp/out" "^draw +layer +2 "

echo "1..$n"
[ "$fails" -eq 0 ]
