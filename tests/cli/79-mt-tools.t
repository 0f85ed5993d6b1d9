#!/bin/bash
# The README's full Multi30k comparisons are scripts (tools/mt-full.sh, for RNNSearch and the
# Transformer): run each at toy sizes on the real Multi30k text (NB_TEST_MULTI30K; skipped
# without it, and in the ASan build), and check that every queued run finished into one store,
# that report groups them, and that the figures are drawn (one per Transformer variant).
set -u
. "$(dirname "$0")/lib.sh"
unset NORMBENCH_DB NORMBENCH_DATA NORMBENCH_MIRROR
m30k=${NB_TEST_MULTI30K:-}
if [ -z "$m30k" ] || [ ! -r "$m30k/train.en.gz" ]; then
    echo "1..0 # SKIP the Multi30k files are not here (set NB_TEST_MULTI30K)"
    exit 0
fi
if [ $asan = 1 ]; then
    echo "1..0 # SKIP an ASan build (76-mt.t covers mt's code there)"
    exit 0
fi
script=$(cd "$(dirname "$0")/../.." && pwd)/tools/mt-full.sh
toy_len="--steps 4 --eval-every 2"

o=$tmp/rnn
check "mt-full.sh: RNNSearch, two runs" 0 env NB="$NB" DIMS="--dim-word 16 --dim 32" \
    LENGTH="$toy_len" EXTRA="--test-max 3" RUNS="layer 1,rms 2" bash "$script" "$m30k" "$o"
runs=$(sqlite3 "$o/mt.db" "select group_concat(norm || ':' || seed || ':' || status, ' ') from (select norm, seed, status from runs order by norm)")
[ "$runs" = "layer:1:finished rms:2:finished" ] && ok "both runs finished in one store ($runs)" \
    || not_ok "both runs finished in one store ($runs)"
has "report groups them as rnnsearch" "$o/log" '^mt / multi30k \[rnnsearch\]$'
has "report has test_bleu" "$o/log" 'test_bleu'
[ -s "$o/normbench-mt.png" ] && [ -s "$o/normbench-mt.gp" ] \
    && ok "the figure and its script" || not_ok "the figure and its script" "$(ls "$o")"

o=$tmp/tf
check "mt-full.sh: the Transformer, post- and pre-norm" 0 env NB="$NB" MODEL=transformer \
    DIMS="--layers 1 --dim 16 --heads 2 --ffn 32" LENGTH="$toy_len" EXTRA="--test-max 3" \
    RUNS="layer 1 post,rms 1 pre" bash "$script" "$m30k" "$o"
# the two runs start a second apart and either may register first: pair each norm with its model
pos=$(sqlite3 "$o/mt.db" "select group_concat(x, ', ') from (select r.norm || ': ' || t.value as x from tags t join runs r on r.id = t.run where t.key = 'model' order by r.norm)")
[ "$pos" = "layer: transformer small post, rms: transformer small pre" ] && ok "the runs' positions ($pos)" \
    || not_ok "the runs' positions ($pos)"
for v in post pre; do
    [ -s "$o/normbench-mt-multi30k-transformer_small_$v.png" ] && ok "a figure for $v" || not_ok "a figure for $v" "$(ls "$o")"
done

check "an unknown MODEL is refused" 2 env NB="$NB" MODEL=lstm bash "$script" "$m30k" "$tmp/x"
has "and named" "$tmp/err" "MODEL must be rnnsearch or transformer, not 'lstm'"
check "no directory is a usage error" 2 bash "$script"
echo "1..$n"
[ "$fails" -eq 0 ]
