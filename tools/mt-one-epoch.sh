#!/bin/bash
# The one-epoch Multi30k comparison of docs/results/mt-rnnsearch.md: RNNSearch (256/512) on the real Multi30k, six runs side
# by side with 2 threads each (a 16-core machine): none, layer, rms, prms with seed 1, layer and
# rms with seed 2; one epoch, lr 5e-4, no dropout, validation twice, test BLEU on 200 sentences
# per test set. The full comparison's script with these settings.
# Usage: tools/mt-one-epoch.sh DIR-WITH-THE-8-MULTI30K-GZ-FILES [OUT-DIR]
# Environment: NB (the normbench binary, default ./normbench).
set -u
[ $# -ge 1 ] || { echo "usage: $0 MULTI30K-DIR [OUT-DIR]" >&2; exit 2; }
JOBS=6 THREADS=2 DROPOUT=0 LENGTH="--epochs 1 --eval-every 182" \
    EXTRA="--test-max 200 --log-every 10" \
    RUNS="none 1,layer 1,rms 1,prms 1,layer 2,rms 2" \
    MODEL=rnnsearch exec "$(dirname "$0")/mt-full.sh" "$1" "${2:-mt-one-epoch}"
