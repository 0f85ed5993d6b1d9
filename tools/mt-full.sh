#!/bin/bash
# The full comparisons on the real Multi30k of docs/results/mt-rnnsearch.md and mt-transformer.md (issues 16 and 17's quality bars), one script for
# both models: a queue of runs, JOBS at a time with THREADS threads each, then `report` and `plot`.
#
#   MODEL=rnnsearch (default): RNNSearch 256/512, 10 epochs (3,630 steps of batch 80), lr 5e-4,
#     word dropout 0.1 on both sides, validation once an epoch. Runs: none, layer, rms, prms with
#     seed 1, layer and rms with seed 2.
#   MODEL=transformer: the small preset (3+3 layers, d 256), 25 epochs of 219 batches of 133
#     sentences, noam schedule (lr 1, the preset's warm-up), clip 5, validation every 2 epochs.
#     Runs: post-norm none, layer, rms, prms with seed 1, pre-norm layer and rms with seed 1,
#     post-norm layer and rms with seed 2.
#
# Every run: val_bleu on the first 200 validation sentences (greedy), and at the end test BLEU on
# the whole of test 2016 and test 2017 (beam search) with the parameters of the lowest val_xent.
#
# Usage: tools/mt-full.sh DIR-WITH-THE-8-MULTI30K-GZ-FILES [OUT-DIR]
# Environment:
#   NB       the normbench binary (default ./normbench)
#   MODEL    rnnsearch or transformer
#   JOBS     runs at a time (default 2), THREADS threads each (default 1): the 2-core machine
#   RUNS     "norm seed[ position]" items separated by commas (position: post or pre, the
#            Transformer's --norm-position); the model's list above by default; empty: no runs,
#            only the report and plot of what OUT-DIR/mt.db holds
#   DROPOUT  RNNSearch's word dropout on both sides (default 0.1)
#   DIMS, LENGTH, TRAIN, EXTRA  the model's size, length and training options, and more options,
#            for a quick try of the script, e.g.
#            DIMS="--dim-word 16 --dim 32" LENGTH="--steps 4 --eval-every 2" EXTRA="--test-max 3"
# A run that was interrupted (Ctrl-C) continues with
#   normbench run --resume ID --db OUT-DIR/mt.db
# from its last epoch's checkpoint; then run this script with RUNS= for the report and plot.
set -u
[ $# -ge 1 ] || { echo "usage: $0 MULTI30K-DIR [OUT-DIR]" >&2; exit 2; }
SRC=$1
MODEL=${MODEL:-rnnsearch}
case $MODEL in
rnnsearch)
    DIMS=${DIMS:---dim-word 256 --dim 512}
    LENGTH=${LENGTH:---epochs 10 --eval-every 363}
    DROPOUT=${DROPOUT:-0.1}
    TRAIN=${TRAIN:---lr 5e-4 --dropout-source $DROPOUT --dropout-target $DROPOUT}
    RUNS=${RUNS-layer 1,rms 1,none 1,prms 1,layer 2,rms 2}
    ;;
transformer)
    DIMS=${DIMS:---preset small}
    LENGTH=${LENGTH:---epochs 25 --eval-every 436}
    TRAIN=${TRAIN:---batch 133 --lr 1 --clip 5}
    RUNS=${RUNS-none 1 post,layer 1 post,rms 1 post,prms 1 post,layer 1 pre,rms 1 pre,layer 2 post,rms 2 post}
    ;;
*)
    echo "$0: MODEL must be rnnsearch or transformer, not '$MODEL'" >&2
    exit 2
    ;;
esac
O=${2:-mt-$MODEL-full}
NB=${NB:-./normbench}
case $NB in */*) NB=$(cd "$(dirname "$NB")" && pwd)/$(basename "$NB") ;; esac # plot runs in OUT-DIR
JOBS=${JOBS:-2}
THREADS=${THREADS:-1}
mkdir -p "$O" || exit 1
D=$O/data
{ nproc; grep -m1 'model name' /proc/cpuinfo; uptime; "$NB" --version; } | tee -a "$O/log"
"$NB" fetch multi30k --from "$SRC" --data-dir "$D" 2>&1 | tail -1 | tee -a "$O/log"
common="mt --model $MODEL --data-dir $D $DIMS $TRAIN $LENGTH --val-bleu-max 200
        --threads $THREADS --db $O/mt.db --quiet ${EXTRA-}"
start=$(date +%s)
IFS=, read -r -a queue <<<"$RUNS"
running=0
for r in "${queue[@]}"; do
    # shellcheck disable=SC2086
    set -- $r
    [ $# -ge 2 ] || continue
    pos=()
    name="$1-$2"
    if [ $# -ge 3 ]; then
        pos=(--norm-position "$3")
        name="$3-$name"
    fi
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
    echo "$(date -u +%H:%M:%S) start $MODEL ${3:+$3-norm }$1 seed $2" | tee -a "$O/log"
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive "$NB" run $common --norm "$1" --seed "$2" \
        "${pos[@]}" >"$O/run-$name.out" 2>&1 &
    running=$((running + 1))
    sleep 1
done
wait
echo "runs took $(($(date +%s) - start)) s" | tee -a "$O/log"
"$NB" report --db "$O/mt.db" --task mt 2>&1 | tee -a "$O/log"
# the figures, in OUT-DIR under the names plot gives them: one per variant (the Transformer's
# post- and pre-norm runs are two), e.g. normbench-mt.png
(cd "$O" && "$NB" plot --task mt --db mt.db --metric train_loss,val_bleu) 2>&1 | tail -4
