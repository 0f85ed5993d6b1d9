#!/bin/bash
# A norm is one file: the test build (build/tests/normbench-toy) has the norm of tests/norm_centre.c
# (mean-only centring), registered by that file's one line, and no other file of the product names
# it. It is a --norm choice there (not in the product), trains through `run` in the tasks whose
# models take a row-wise norm through its kernels (mnist's MLP, mt's Transformer, lm's GPT, and the
# unfused paths of the GRU, the LSTM and the convolution: order, reader, cifar),
# has rows in `bench kernels`,
# and is in `sweep --norms all` (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
TOY=${NORMBENCH_TOY_BIN:-$(dirname "$NB")/build/tests/normbench-toy}
if [ ! -x "$TOY" ]; then
    echo "1..1"; echo "not ok 1 - the test build $TOY is missing (make $TOY)"; exit 1
fi
check "the test build's run --help" 0 "$TOY" run --help
has "lists centre as a --norm choice" "$tmp/out" '^  --norm NAME .*\|centre\)$'
check "the product's run --help" 0 "$NB" run --help
if grep -q centre "$tmp/out"; then not_ok "the product has no centre"; else ok "the product has no centre"; fi
check "the product refuses --norm centre" 2 "$NB" run mnist --norm centre --dataset synthetic --steps 1

export NORMBENCH_DB=$tmp/t.db
check "run mnist --norm centre (30 steps)" 0 env OMP_NUM_THREADS=2 "$TOY" run mnist --norm centre --dataset synthetic --steps 30 --log-every 5 --quiet
first=$(sqlite3 "$tmp/t.db" "select value from metrics where run = 1 and name = 'train_loss' order by step limit 1")
last=$(sqlite3 "$tmp/t.db" "select value from metrics where run = 1 and name = 'train_loss' order by step desc limit 1")
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.5 * a) }'; then ok "mnist: the loss falls ($first to $last)"; else not_ok "mnist: the loss falls" "$first to $last"; fi
for pos in post pre; do
    check "run mt --model transformer --norm centre --norm-position $pos (30 steps)" 0 env OMP_NUM_THREADS=2 "$TOY" run mt --model transformer --norm centre --norm-position $pos --layers 1 --dim 32 --heads 2 --ffn 64 --dataset synthetic --steps 30 --quiet
done
check "run lm --norm centre (30 steps)" 0 env OMP_NUM_THREADS=2 "$TOY" run lm --norm centre --layers 2 --heads 2 --dim 32 --context 32 --eval-every 15 --eval-windows 8 --dataset synthetic --steps 30 --quiet
st=$(sqlite3 "$tmp/t.db" "select group_concat(task || ':' || status) from runs where norm = 'centre'")
if [ "$st" = mnist:finished,mt:finished,mt:finished,lm:finished ]; then ok "every run finished, recorded as norm centre"; else not_ok "every run finished" "$st"; fi
bad=$(sqlite3 "$tmp/t.db" "select count(*) from metrics where name = 'train_loss' and not (value = value and abs(value) < 1e6)")
if [ "$bad" = 0 ]; then ok "their losses are finite"; else not_ok "their losses are finite" "$bad"; fi
check "run order --norm centre (the GRU's unfused path, 20 steps)" 0 env OMP_NUM_THREADS=2 "$TOY" run order --norm centre --dim 32 --dim-word 16 --batch 16 --eval-every 10 --dataset synthetic --steps 20 --quiet
st=$(sqlite3 "$tmp/t.db" "select status from runs where norm = 'centre' and task = 'order'")
bad=$(sqlite3 "$tmp/t.db" "select count(*) from metrics m join runs r on r.id = m.run where r.task = 'order' and m.name = 'train_loss' and not (m.value = m.value and abs(m.value) < 1e6)")
if [ "$st" = finished ] && [ "$bad" = 0 ]; then ok "order: finished, finite losses"; else not_ok "order: finished, finite losses" "$st, $bad"; fi
check "run reader --norm centre (the LSTM's unfused path, 20 steps)" 0 env OMP_NUM_THREADS=2 "$TOY" run reader --norm centre --dim 32 --eval-every 10 --dataset synthetic --steps 20 --quiet
st=$(sqlite3 "$tmp/t.db" "select status from runs where norm = 'centre' and task = 'reader'")
bad=$(sqlite3 "$tmp/t.db" "select count(*) from metrics m join runs r on r.id = m.run where r.task = 'reader' and m.name = 'train_loss' and not (m.value = m.value and abs(m.value) < 1e6)")
if [ "$st" = finished ] && [ "$bad" = 0 ]; then ok "reader: finished, finite losses"; else not_ok "reader: finished, finite losses" "$st, $bad"; fi
check "run cifar --norm centre (the convolution's unfused path, 10 steps)" 0 env OMP_NUM_THREADS=2 "$TOY" run cifar --norm centre --width 0.125 --batch 16 --subset 64 --dataset synthetic --steps 10 --quiet
st=$(sqlite3 "$tmp/t.db" "select status from runs where norm = 'centre' and task = 'cifar'")
bad=$(sqlite3 "$tmp/t.db" "select count(*) from metrics m join runs r on r.id = m.run where r.task = 'cifar' and m.name = 'train_loss' and not (m.value = m.value and abs(m.value) < 1e6)")
if [ "$st" = finished ] && [ "$bad" = 0 ]; then ok "cifar: finished, finite losses"; else not_ok "cifar: finished, finite losses" "$st, $bad"; fi

# report: the norms in the table's order (the test norm, registered last, after dyt), not by name
check "run mnist --norm dyt (10 steps)" 0 env OMP_NUM_THREADS=2 "$TOY" run mnist --norm dyt --dataset synthetic --steps 10 --quiet
check "report --task mnist" 0 "$TOY" report --task mnist
order=$(awk '$1 == "dyt" || $1 == "centre" { printf "%s ", $1 }' "$tmp/out")
if [ "$order" = "dyt centre " ]; then ok "report: dyt, then centre (the table's order)"; else not_ok "report: the table's order" "$order"; fi
# the default shapes, but a smaller memory-bound one under AddressSanitizer (65536x1024 takes a minute there)
shapes=; [ "$asan" = 1 ] && shapes="--shapes 128x1000,4096x1024"
check "bench kernels --norms layer,centre" 0 env OMP_NUM_THREADS=1 "$TOY" bench kernels --norms layer,centre $shapes --format csv
if [ "$(grep -c ',centre,' "$tmp/out")" = 4 ]; then ok "centre: 4 rows (2 shapes, fwd and fwd+bwd)"; else not_ok "centre: 4 rows" "$(cat "$tmp/out")"; fi
check "sweep mnist --norms all --dry-run" 0 "$TOY" sweep mnist --norms all --seeds 1 --dry-run
has "all includes centre" "$tmp/out" '--norm centre --seed 1'
has "8 jobs: the seven norms and centre" "$tmp/err" '^8 jobs'
echo "1..$n"
[ "$fails" -eq 0 ]
