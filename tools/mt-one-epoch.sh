#!/bin/bash
# README's one-epoch Multi30k comparison: RNNSearch (256/512) on the real Multi30k, six runs side
# by side with 2 threads each (a 16-core machine): none, layer, rms, prms with seed 1, layer and
# rms with seed 2; one epoch, lr 5e-4, validation twice, test BLEU on 200 sentences per test set.
# Usage: tools/mt-one-epoch.sh DIR-WITH-THE-8-MULTI30K-GZ-FILES [OUT-DIR]
# Environment: NB (the normbench binary, default ./normbench).
set -u
[ $# -ge 1 ] || { echo "usage: $0 MULTI30K-DIR [OUT-DIR]" >&2; exit 2; }
SRC=$1
O=${2:-mt-one-epoch}
NB=${NB:-./normbench}
mkdir -p "$O"
D=$O/data
{ nproc; grep -m1 'model name' /proc/cpuinfo; uptime; "$NB" --version; } | tee "$O/log"
"$NB" fetch multi30k --from "$SRC" --data-dir "$D" 2>&1 | tail -1 | tee -a "$O/log"
common="mt --data-dir $D --dim-word 256 --dim 512 --lr 5e-4 --epochs 1 --eval-every 182 --val-bleu-max 200 --test-max 200 --log-every 10 --threads 2 --db $O/mt.db --quiet"
start=$(date +%s)
pids=""
for r in "none 1" "layer 1" "rms 1" "prms 1" "layer 2" "rms 2"; do
    set -- $r
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive "$NB" run $common --norm "$1" --seed "$2" \
        >"$O/run-$1-$2.out" 2>&1 &
    pids="$pids $!"
    sleep 1
done
wait $pids
echo "runs took $(($(date +%s) - start)) s" | tee -a "$O/log"
"$NB" report --db "$O/mt.db" --task mt 2>&1 | tee -a "$O/log"
"$NB" plot --task mt --db "$O/mt.db" --metric train_loss,val_bleu --out "$O/mt-multi30k" 2>&1 | tail -1
