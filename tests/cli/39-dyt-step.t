#!/bin/bash
# `bench step TASK` with its default norm list ('all': the table's norms the task takes) times
# dyt in every task, with its per-step ratio against layer and that ratio's 95% interval; lm's
# default leaves out batch, which lm refuses, instead of failing (TAP). Tiny models, 2 steps.
set -u
. "$(dirname "$0")/lib.sh"
unset OPENBLAS_CORETYPE
num='[0-9]+(\.[0-9]+)?'
while IFS='|' read -r task opts; do
    # shellcheck disable=SC2086
    check "bench step $task, default norms" 0 env OMP_NUM_THREADS=1 "$NB" bench step $task $opts --steps 2 --format csv
    has "$task: csv with vs_layer and its interval" "$tmp/out" '^task,norm,batch,ms_per_step,.*,vs_layer,.*,vs_layer_lo,vs_layer_hi,machine,date$'
    has "$task: a dyt row with a ratio to layer and its interval" "$tmp/out" "^[a-z]+,dyt,[0-9]+,$num,.*,$num,$num,(\"[^\"]*\"|[^,]*),[^,]*\$"
    has "$task: a layer row" "$tmp/out" '^[a-z]+,layer,'
done <<'TASKS'
mnist|--batch 4
cifar|--width 0.125 --batch 4
order|--dim 16 --dim-word 8 --batch 4
reader|--dim 16 --batch 4
mt|--model rnnsearch --dim 16 --dim-word 8 --batch 4
mt|--model transformer --layers 1 --dim 16 --heads 2 --ffn 32 --batch 4
lm|--layers 1 --heads 2 --dim 16 --context 8 --batch 2
TASKS
if ! grep -q '^lm,batch,' "$tmp/out"; then ok "lm: no batch row"; else not_ok "lm: no batch row"; fi
n_rows=$(grep -c '^lm,' "$tmp/out")
if [ "$n_rows" = 6 ]; then ok "lm: the six norms it takes"; else not_ok "lm: the six norms it takes" "$(cat "$tmp/out")"; fi
# a list given by name is kept as given: lm still refuses batch there
check "bench step lm --norms batch still refused" 1 env OMP_NUM_THREADS=1 "$NB" bench step lm --norms batch --layers 1 --heads 2 --dim 16 --context 8 --batch 2 --steps 2
echo "1..$n"
[ "$fails" -eq 0 ]
