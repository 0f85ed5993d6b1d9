#!/bin/bash
# report keeps runs made with mt's former behaviours (--src-eos off, --beam-rules simple,
# --decode-cap longest, --batch-order target) apart from the authors' defaults: the options not at
# their default name the model ("rnnsearch --src-eos off --beam-rules simple"), and runs at the
# defaults keep the label they had before these options existed.
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DB=$tmp/mt.db
export NORMBENCH_DATA=$tmp/data
mt_mkdata "$tmp/data"
tiny="--batch 20 --steps 4 --eval-every 4 --val-bleu-max 4 --test-max 4 --bpe-merges 1000 --threads 2 --quiet"
rs="--dim-word 16 --dim 16"
label() { sqlite3 "$NORMBENCH_DB" "select value from tags where run = $1 and key = 'model'"; }

check "RNNSearch at the defaults" 0 "$NB" run mt $rs $tiny
check "RNNSearch with two former behaviours" 0 "$NB" run mt $rs $tiny --src-eos off --beam-rules simple
check "the Transformer with the former cap and order" 0 "$NB" run mt $tiny --model transformer --dim 16 --layers 1 --heads 2 --ffn 32 --decode-cap longest --batch-order target
check "the defaults given on the command line" 0 "$NB" run mt $rs $tiny --src-eos on --beam-rules nematus
[ "$(label 1)" = "rnnsearch" ] && ok "the defaults: the label as before" || not_ok "label of run 1" "$(label 1)"
[ "$(label 2)" = "rnnsearch --src-eos off --beam-rules simple" ] && ok "former behaviours named in the label" || not_ok "label of run 2" "$(label 2)"
[ "$(label 3)" = "transformer small post --decode-cap longest --batch-order target" ] && ok "the Transformer's too" || not_ok "label of run 3" "$(label 3)"
[ "$(label 4)" = "rnnsearch" ] && ok "defaults given explicitly: no name" || not_ok "label of run 4" "$(label 4)"
check "report" 0 "$NB" report
has "the defaults' group" "$tmp/out" '^mt / multi30k \[rnnsearch\]$'
has "the former behaviours' own group" "$tmp/out" '^mt / multi30k \[rnnsearch --src-eos off --beam-rules simple\]$'
echo "1..$n"
[ "$fails" -eq 0 ]
