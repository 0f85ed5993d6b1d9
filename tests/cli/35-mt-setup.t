#!/bin/bash
# Command-line tests of `run mt`'s set-up (issue 30, items 3 and 6): a model, batch or evaluation
# that cannot fit is refused by its estimate before anything of its size is allocated (under
# `ulimit -v`, skipped for an ASan build as in 15-usage.t), with the size and the options that
# shrink it; such a run is recorded as failed with its message; validation and test lines obey
# --max-len; --subset does not hide training files of different lengths (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DB=$tmp/setup.db
export NORMBENCH_DATA=$tmp/data
sql() { sqlite3 "$NORMBENCH_DB" "$1" 2>/dev/null; }
syn="--dataset synthetic --threads 1 --quiet --steps 1 --eval-every 1 --val-bleu-max 4 --test-max 4"
LIMIT=2500000 # KiB of address space

mt_mkdata "$tmp/d"
m30="--data-dir $tmp/d --no-fetch --bpe-merges 50 --dim-word 16 --dim 32 --batch 16 --threads 1 --quiet --steps 2 --eval-every 2"

# limited COMMAND...: runs COMMAND under ulimit -v $LIMIT, out/err in $tmp, its peak resident
# memory (KiB, GNU time where there is one, else 0) in $peak
limited() {
    local t=
    [ -x /usr/bin/time ] && t="/usr/bin/time -o $tmp/peak -f %M"
    echo 0 >"$tmp/peak"
    ( ulimit -v $LIMIT; exec $t "$@" ) >"$tmp/out" 2>"$tmp/err"
    rc=$?
    peak=$(tail -n 1 "$tmp/peak")
}
# refused DESC HINT_REGEX COMMAND...: refused (exit 1) by the estimate, before allocating: the
# message says what it needs, the hint names HINT_REGEX, and the process never held 400 MB
refused() {
    local desc=$1 hint=$2
    shift 2
    limited "$@"
    [ "$rc" = 1 ] && ok "$desc: refused" || not_ok "$desc: refused (exit $rc)" "$(cat "$tmp/err")"
    has "$desc: the size it needs, before it starts" "$tmp/err" "^error: mt needs about [0-9.]+ GiB before it starts, more than the .* left in the address-space limit \(ulimit -v\)"
    has "$desc: the options that shrink it" "$tmp/err" "^hint: .*$hint"
    [ "${peak:-0}" -lt 400000 ] && ok "$desc: nothing of that size was allocated (peak ${peak} KiB)" \
        || not_ok "$desc: nothing of that size was allocated (peak ${peak} KiB)"
}

if [ $asan = 1 ]; then
    for i in $(seq 1 22); do n=$((n + 1)); echo "ok $n # skip AddressSanitizer build: no ulimit -v"; done
else
    refused "a Transformer of 64 layers of 8192 wide" "lower --dim, --ffn or --layers" \
        "$NB" run mt $syn --model transformer --layers 64 --dim 8192 --ffn 65536 --heads 256
    refused "RNNSearch --dim 8192 --dim-word 8192" "lower --dim or --dim-word" \
        "$NB" run mt $syn --dim 8192 --dim-word 8192
    refused "token batches of 10,000,000 (every pair at once)" "lower --batch-tokens" \
        "$NB" run mt $syn --subset 2000 --model transformer --batch-tokens 10000000
    # a failed set-up leaves its record: the run, failed, with the message
    c=$(sql "select count(*) from runs where status = 'failed' and message like 'mt needs about % GiB before it starts%'")
    [ "$c" = 3 ] && ok "the three refused runs are recorded as failed, with the message" \
        || not_ok "the three refused runs are recorded as failed, with the message ($c)" "$(sql 'select id, status, message from runs')"
    c=$(sql "select count(*) from params where key = 'data_source'")
    [ "$c" = 3 ] && ok "with where their data came from" || not_ok "with where their data came from ($c)"

    # a batch larger than the data is refused before the model is built, and recorded
    limited "$NB" run mt $syn --subset 300 --batch 1000000 --eval-batch 1000000
    [ "$rc" = 1 ] && ok "--batch 1000000 on 300 pairs is refused" || not_ok "--batch 1000000 on 300 pairs is refused (exit $rc)" "$(cat "$tmp/err")"
    has "it says why" "$tmp/err" "^error: batch size 1000000 is larger than the 300 training pairs"
    [ "$(sql "select status from runs order by id desc limit 1")" = failed ] && ok "recorded as failed" || not_ok "recorded as failed"
    # the evaluation batch is sized by the data
    limited "$NB" run mt $syn --subset 300 --batch 16 --dim-word 16 --dim 32 --eval-batch 1000000
    [ "$rc" = 0 ] && ok "--eval-batch 1000000 on 300 pairs runs under ulimit -v" || not_ok "--eval-batch 1000000 on 300 pairs runs under ulimit -v (exit $rc)" "$(cat "$tmp/err")"

    # a validation line of 20,000 words: left out of val_xent, its source cut for val_bleu
    cp -r "$tmp/d" "$tmp/long"
    for side in en:dog de:dogx; do
        f=$tmp/long/multi30k/val.${side%%:*}.gz
        { gzip -dc "$f"; yes "${side#*:}" | head -n 20000 | tr '\n' ' '; echo .; } | gzip -n >"$f.new"
        mv "$f.new" "$f"
    done
    limited "$NB" run mt ${m30/$tmp\/d/$tmp/long}
    [ "$rc" = 0 ] && ok "a 20,000-word validation line runs under ulimit -v" || not_ok "a 20,000-word validation line runs under ulimit -v (exit $rc)" "$(cat "$tmp/err")"
    [ "${peak:-0}" -lt 400000 ] && ok "in little memory (peak ${peak} KiB)" || not_ok "in little memory (peak ${peak} KiB)"
    v=$(sql "select value from params where key = 'eval_pairs' order by run desc limit 1")
    case "$v" in
    "val 41 pairs: 40 within --max-len 80 in val_xent, 1 over it left out; 1 sources cut to 80 pieces for val_bleu;"*)
        ok "the run records what became of it" ;;
    *) not_ok "the run records what became of it" "$v" ;;
    esac
    c=$(sql "select count(*) from metrics where name in ('val_xent', 'val_bleu', 'test_bleu') and run = (select max(id) from runs)")
    [ "$c" = 3 ] && ok "val_xent, val_bleu and test_bleu recorded" || not_ok "val_xent, val_bleu and test_bleu recorded ($c)"
fi

# --subset compares the whole files: one English line short is refused, whatever --subset keeps
cp -r "$tmp/d" "$tmp/mis"
gzip -dc "$tmp/d/multi30k/train.en.gz" | sed 1d | gzip -n >"$tmp/mis/multi30k/train.en.gz"
runs() { local c; c=$(sql "select count(*) from runs"); echo "${c:-0}"; }
before=$(runs)
check "--subset 100 with 299 English and 300 German lines is refused" 1 "$NB" run mt ${m30/$tmp\/d/$tmp/mis} --subset 100
has "it names both files and their lengths" "$tmp/err" "^error: '.*/mis/multi30k/train.en.gz' has 299 lines but '.*/mis/multi30k/train.de.gz' has 300: not parallel text"
[ "$(runs)" = "$before" ] && ok "a run whose data cannot be read leaves no record" || not_ok "a run whose data cannot be read leaves no record"
cp "$tmp/d/multi30k/train.en.gz" "$tmp/mis/multi30k/"
gzip -dc "$tmp/d/multi30k/val.de.gz" | sed 1d | gzip -n >"$tmp/mis/multi30k/val.de.gz"
check "so is a validation set a line short under --subset" 1 "$NB" run mt ${m30/$tmp\/d/$tmp/mis} --subset 20
has "naming it" "$tmp/err" "^error: '.*/mis/multi30k/val.en.gz' has 40 lines but '.*/mis/multi30k/val.de.gz' has 39"
check "the same files whole run" 0 "$NB" run mt $m30 --subset 100

echo "1..$n"
[ "$fails" -eq 0 ]
