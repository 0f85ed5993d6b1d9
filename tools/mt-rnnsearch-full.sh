#!/bin/bash
# README's full RNNSearch comparison on the real Multi30k (issue 16's quality bar): RNNSearch
# 256/512, 10 epochs (3,630 steps of batch 80), lr 5e-4, word dropout 0.1 on both sides,
# validation once an epoch (val_bleu on 200 sentences), test BLEU on the whole of test 2016 and
# test 2017 (beam 5) with the parameters of the best validation point. Six runs: none, layer, rms,
# prms with seed 1, layer and rms with seed 2; JOBS of them at a time with THREADS threads each
# (default 2 at a time with 1 thread, the 2-core machine README's numbers come from).
# Usage: tools/mt-rnnsearch-full.sh DIR-WITH-THE-8-MULTI30K-GZ-FILES [OUT-DIR]
# Environment: NB (the normbench binary, default ./normbench), JOBS, THREADS, RUNS (a list of
# "norm seed" pairs separated by commas, default "layer 1,rms 1,none 1,prms 1,layer 2,rms 2"),
# DROPOUT (word dropout on both sides, default 0.1), FIG (the figure's name in OUT-DIR, default
# mt-rnnsearch-multi30k), and for a quick try of the script DIMS (default "--dim-word 256 --dim 512"), LENGTH (default
# "--epochs 10 --eval-every 363") and EXTRA (more options), e.g.
# DIMS="--dim-word 16 --dim 32" LENGTH="--steps 4 --eval-every 2" EXTRA="--test-max 3".
# A run that was interrupted (Ctrl-C) continues with
#   normbench run --resume ID --db OUT-DIR/mt.db
# from its last epoch's checkpoint; run this script again afterwards for the report and plot
# only with RUNS= (empty).
set -u
[ $# -ge 1 ] || { echo "usage: $0 MULTI30K-DIR [OUT-DIR]" >&2; exit 2; }
SRC=$1
O=${2:-mt-rnnsearch-full}
NB=${NB:-./normbench}
JOBS=${JOBS:-2}
THREADS=${THREADS:-1}
RUNS=${RUNS-layer 1,rms 1,none 1,prms 1,layer 2,rms 2}
mkdir -p "$O"
D=$O/data
{ nproc; grep -m1 'model name' /proc/cpuinfo; uptime; "$NB" --version; } | tee -a "$O/log"
"$NB" fetch multi30k --from "$SRC" --data-dir "$D" 2>&1 | tail -1 | tee -a "$O/log"
DIMS=${DIMS:---dim-word 256 --dim 512}
LENGTH=${LENGTH:---epochs 10 --eval-every 363}
DROPOUT=${DROPOUT:-0.1}
common="mt --model rnnsearch --data-dir $D $DIMS --lr 5e-4 $LENGTH
        --dropout-source $DROPOUT --dropout-target $DROPOUT --val-bleu-max 200
        --threads $THREADS --db $O/mt.db --quiet ${EXTRA-}"
start=$(date +%s)
IFS=, read -r -a queue <<<"$RUNS"
running=0
for r in "${queue[@]}"; do
    # shellcheck disable=SC2086
    set -- $r
    [ $# -eq 2 ] || continue
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
    echo "$(date -u +%H:%M:%S) start $1 seed $2" | tee -a "$O/log"
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive "$NB" run $common --norm "$1" --seed "$2" \
        >"$O/run-$1-$2.out" 2>&1 &
    running=$((running + 1))
    sleep 1
done
wait
echo "runs took $(($(date +%s) - start)) s" | tee -a "$O/log"
"$NB" report --db "$O/mt.db" --task mt 2>&1 | tee -a "$O/log"
"$NB" plot --task mt --db "$O/mt.db" --metric train_loss,val_bleu --out "$O/${FIG:-mt-rnnsearch-multi30k}" 2>&1 | tail -1
