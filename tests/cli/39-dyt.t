#!/bin/bash
# DyT (Dynamic Tanh, nn/norms/dyt.c): --norm dyt and --dyt-alpha in every task (mnist's MLP, mt's
# Transformer post- and pre-norm and RNNSearch's GRUs, order's GRU, reader's LSTMs, cifar's
# convolutions, lm's GPT pre- and post-norm), refused on CUDA; its rows in `bench kernels` (TAP, for prove). The
# kernels' own checks (the float tanh against libm, gradients, PyTorch reference) are
# tests/test_dyt.c; the MLP's gradients with dyt, tests/test_mlp.c.
set -u
. "$(dirname "$0")/lib.sh"

# one run (the 65536x1024 shape takes seconds; a minute under AddressSanitizer, which times a
# smaller memory-bound shape with --shapes): dyt's rows, after layer's
big=65536x1024; shapes=
[ "$asan" = 1 ] && big=4096x1024 && shapes="--shapes 128x1000,$big"
check "bench kernels --norms layer,dyt" 0 env OMP_NUM_THREADS=1 "$NB" bench kernels --norms layer,dyt $shapes --format csv
for row in '^128x1000,dyt,fwd,' '^128x1000,dyt,fwd\+bwd,' "^$big,dyt,fwd," "^$big,dyt,fwd\\+bwd,"; do
    has "a row $row" "$tmp/out" "$row"
done
if [ "$(grep -c ',dyt,' "$tmp/out")" = 4 ]; then ok "dyt: 4 rows"; else not_ok "dyt: 4 rows" "$(cat "$tmp/out")"; fi
if [ "$(sed -n 3p "$tmp/out" | cut -d, -f2)" = layer ] && [ "$(sed -n 4p "$tmp/out" | cut -d, -f2)" = dyt ]; then
    ok "each shape: layer's rows, then dyt's"
else
    not_ok "each shape: layer's rows, then dyt's" "$(cat "$tmp/out")"
fi
# --shapes: the shapes given, in order, and nothing else; bad lists are usage errors
check "bench kernels --shapes 64x100,1000x32" 0 env OMP_NUM_THREADS=1 "$NB" bench kernels --norms dyt --shapes 64x100,1000x32 --format csv
got=$(cut -d, -f1,2,3 "$tmp/out" | tail -n +2 | tr '\n' ' ')
if [ "$got" = "64x100,dyt,fwd 64x100,dyt,fwd+bwd 1000x32,dyt,fwd 1000x32,dyt,fwd+bwd " ]; then
    ok "--shapes: rows at the shapes given, in order"
else
    not_ok "--shapes: rows at the shapes given, in order" "$got"
fi
for bad in 0x5 12 5x 5x5,, 99999999x99 -4x4; do
    check "--shapes $bad is a usage error" 2 "$NB" bench kernels --norms dyt --shapes "$bad"
    has "it names --shapes '$bad'" "$tmp/err" "--shapes '$bad'"
done
check "--shapes with step is a usage error" 2 "$NB" bench step mnist --shapes 64x100
has "it says --shapes goes with kernels" "$tmp/err" "goes with 'bench kernels'"
check "dyt listed twice is a usage error" 2 "$NB" bench kernels --norms dyt,dyt
has "it says so" "$tmp/err" "norm 'dyt' is listed twice in 'dyt,dyt'"
check "dyt with --device cuda is a usage error" 2 "$NB" bench kernels --device cuda --norms dyt
has "it says DyT has no CUDA kernels" "$tmp/err" 'dyt has no CUDA kernels'
check "bench step mnist --norms layer,dyt" 0 "$NB" bench step mnist --norms layer,dyt --batch 4 --steps 6 --format csv
has "a dyt row" "$tmp/out" '^mnist,dyt,4,'

# run: mnist trains with dyt; alpha recorded (the paper's 0.5 by default, or --dyt-alpha)
export NORMBENCH_DB=$tmp/t.db
check "run mnist --norm dyt (30 steps, synthetic)" 0 env OMP_NUM_THREADS=2 "$NB" run mnist --norm dyt --dataset synthetic --steps 30 --quiet
check "run mnist --norm dyt --dyt-alpha 1.5" 0 env OMP_NUM_THREADS=2 "$NB" run mnist --norm dyt --dyt-alpha 1.5 --dataset synthetic --steps 30 --quiet
a1=$(sqlite3 "$tmp/t.db" "select json_extract(config, '$.dyt_alpha') from runs where id = 1")
a2=$(sqlite3 "$tmp/t.db" "select json_extract(config, '$.dyt_alpha') from runs where id = 2")
if [ "$a1" = 0.5 ] && [ "$a2" = 1.5 ]; then ok "alpha recorded: 0.5 by default, 1.5 given"; else not_ok "alpha recorded" "got '$a1' '$a2'"; fi
st=$(sqlite3 "$tmp/t.db" "select group_concat(status) from runs where norm = 'dyt'")
if [ "$st" = finished,finished ]; then ok "both runs finished"; else not_ok "both runs finished" "$st"; fi
loss=$(sqlite3 "$tmp/t.db" "select count(*) from metrics where run = 1 and name = 'train_loss' and value = value and abs(value) < 1e6")
if [ "${loss:-0}" -gt 0 ]; then ok "the dyt run recorded finite training losses"; else not_ok "the dyt run recorded finite training losses" "$loss"; fi
l1=$(sqlite3 "$tmp/t.db" "select group_concat(value) from metrics where run = 1 and name = 'train_loss'")
l2=$(sqlite3 "$tmp/t.db" "select group_concat(value) from metrics where run = 2 and name = 'train_loss'")
if [ "$l1" != "$l2" ]; then ok "--dyt-alpha changes training"; else not_ok "--dyt-alpha changes training"; fi
check "a bad --dyt-alpha is a usage error" 2 "$NB" run mnist --norm dyt --dyt-alpha 0 --dataset synthetic --steps 1
check "--device cuda --norm dyt is refused" 2 "$NB" run mnist --norm dyt --device cuda --dataset synthetic --steps 1
has "it says there are no DyT CUDA kernels" "$tmp/err" 'no dyt kernels'
n_runs=$(sqlite3 "$tmp/t.db" "select count(*) from runs")
if [ "$n_runs" = 2 ]; then ok "refusals record no run"; else not_ok "refusals record no run" "$n_runs runs"; fi
# the Transformer, post-norm and pre-norm (DyT in the final norm too), a small model
for pos in post pre; do
    check "run mt --model transformer --norm dyt --norm-position $pos (30 steps)" 0 env OMP_NUM_THREADS=2 "$NB" run mt --model transformer --norm dyt --norm-position $pos --layers 1 --dim 32 --heads 2 --ffn 64 --dataset synthetic --steps 30 --quiet
done
st=$(sqlite3 "$tmp/t.db" "select group_concat(status) from runs where task = 'mt'")
if [ "$st" = finished,finished ]; then ok "both Transformer runs finished"; else not_ok "both Transformer runs finished" "$st"; fi
bad=$(sqlite3 "$tmp/t.db" "select count(*) from metrics m join runs r on r.id = m.run where r.task = 'mt' and m.name = 'train_loss' and not (m.value = m.value and abs(m.value) < 1e6)")
nl=$(sqlite3 "$tmp/t.db" "select count(*) from metrics m join runs r on r.id = m.run where r.task = 'mt' and m.name = 'train_loss'")
if [ "$bad" = 0 ] && [ "${nl:-0}" -gt 1 ]; then ok "their training losses are finite"; else not_ok "their training losses are finite" "$bad bad of $nl"; fi
# the GRUs (unfused: the norm's kernels on both sides of each GRU, nn/gru.h): order's and
# RNNSearch's; the LSTMs (unfused at N1, N2, N3, nn/lstm.h): reader's; the convolutions (unfused,
# per channel, nn/cnn.h): cifar's; small models
check "run order --norm dyt (30 steps)" 0 env OMP_NUM_THREADS=2 "$NB" run order --norm dyt --dim 32 --dim-word 16 --batch 16 --eval-every 15 --dataset synthetic --steps 30 --quiet
check "run mt --model rnnsearch --norm dyt (30 steps)" 0 env OMP_NUM_THREADS=2 "$NB" run mt --model rnnsearch --norm dyt --dim-word 16 --dim 24 --eval-every 15 --val-bleu-max 8 --test-max 8 --beam 2 --dataset synthetic --steps 30 --quiet
check "run cifar --norm dyt (30 steps)" 0 env OMP_NUM_THREADS=2 "$NB" run cifar --norm dyt --width 0.125 --batch 16 --subset 320 --dataset synthetic --steps 30 --quiet
check "run reader --norm dyt (30 steps)" 0 env OMP_NUM_THREADS=2 "$NB" run reader --norm dyt --dim 32 --eval-every 15 --dataset synthetic --steps 30 --quiet
for tk in order mt reader cifar; do
    st=$(sqlite3 "$tmp/t.db" "select status from runs where task = '$tk' and norm = 'dyt' order by id desc limit 1")
    bad=$(sqlite3 "$tmp/t.db" "select count(*) from metrics m where m.run = (select max(id) from runs where task = '$tk') and m.name like '%loss%' and not (m.value = m.value and abs(m.value) < 1e6)")
    nl=$(sqlite3 "$tmp/t.db" "select count(*) from metrics m where m.run = (select max(id) from runs where task = '$tk') and m.name = 'train_loss'")
    if [ "$st" = finished ] && [ "$bad" = 0 ] && [ "${nl:-0}" -ge 1 ]; then ok "$tk's run finished, finite losses"; else not_ok "$tk's run finished, finite losses" "$st, $bad bad of $nl"; fi
done
# lm's GPT, pre-norm (DyT in the final norm too, as the DyT paper) and post-norm, a small model
for pos in pre post; do
    check "run lm --norm dyt --norm-position $pos (30 steps)" 0 env OMP_NUM_THREADS=2 "$NB" run lm --norm dyt --norm-position $pos --layers 2 --heads 2 --dim 32 --context 32 --eval-every 15 --eval-windows 8 --dataset synthetic --steps 30 --quiet
done
st=$(sqlite3 "$tmp/t.db" "select group_concat(status) from runs where task = 'lm' and norm = 'dyt'")
if [ "$st" = finished,finished ]; then ok "both lm runs finished"; else not_ok "both lm runs finished" "$st"; fi
bad=$(sqlite3 "$tmp/t.db" "select count(*) from metrics m join runs r on r.id = m.run where r.task = 'lm' and m.name in ('train_loss', 'val_loss') and not (m.value = m.value and abs(m.value) < 1e6)")
nl=$(sqlite3 "$tmp/t.db" "select count(*) from metrics m join runs r on r.id = m.run where r.task = 'lm' and m.name = 'val_loss'")
if [ "$bad" = 0 ] && [ "${nl:-0}" -ge 2 ]; then ok "their losses are finite, validated"; else not_ok "their losses are finite, validated" "$bad bad, $nl val_loss"; fi
a3=$(sqlite3 "$tmp/t.db" "select json_extract(config, '$.dyt_alpha') from runs where task = 'lm' limit 1")
if [ "$a3" = 0.5 ]; then ok "lm: alpha recorded"; else not_ok "lm: alpha recorded" "got '$a3'"; fi
check "sweep mnist --norms dyt,layer --dry-run" 0 "$NB" sweep mnist --norms dyt,layer --seeds 1 --dry-run
has "the sweep has a dyt job" "$tmp/out" '--norm dyt'
echo "1..$n"
[ "$fails" -eq 0 ]
