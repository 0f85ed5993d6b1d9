#!/bin/bash
# Command-line tests of the order task (order-embeddings): a short synthetic run that learns,
# every norm end to end, its options' usage errors, missing data, report, and a bit-exact
# resume (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
db=$tmp/o.db
export NORMBENCH_DB=$db
# (each option once: a valued option given twice is a usage error)
common="--dataset synthetic --dim 32 --dim-word 16 --quiet"
small="$common --subset 512 --batch 64"
last() { sqlite3 "$db" "select value from metrics where run = $1 and name = '$2' order by step desc limit 1"; }

# It learns: 96 steps lift image retrieval R@10 on 512 test images (chance 2%) far above chance.
for norm in layer prms; do
    check "$norm: a short synthetic run" 0 "$NB" run order $small --steps 96 --eval-every 48 --norm $norm
    id=$(sqlite3 "$db" "select max(id) from runs")
    r10=$(last "$id" test_img_r10)
    c10=$(last "$id" test_cap_r10)
    awk -v r="$r10" -v c="$c10" 'BEGIN { exit !(r >= 30 && c >= 30) }' \
        && ok "$norm: it learns (test R@10 image $r10, caption $c10; chance 2)" \
        || not_ok "$norm: it learns (test R@10 image $r10, caption $c10; chance 2)"
    best=$(last "$id" best_val_img_rsum)
    [ -n "$best" ] && ok "$norm: the best validation R-sum is recorded ($best)" || not_ok "$norm: best_val_img_rsum recorded"
done
for m in test_cap_r1 test_cap_r5 test_cap_r10 test_cap_medr test_cap_meanr test_img_r1 test_img_r5 \
         test_img_r10 test_img_medr test_img_meanr val_img_rsum; do
    [ -n "$(last "$id" $m)" ] && ok "records $m" || not_ok "records $m"
done
check "the run records its options" 0 "$NB" show "$id" --format json
has "dim in the configuration" "$tmp/out" '"dim": 32'
has "the code's Adam by default" "$tmp/out" '"adam_bias_correction": "kiros"'
has "the vocabulary size" "$tmp/out" 'vocabulary'

# Every norm runs end to end.
for norm in none batch weight rms; do
    check "$norm: a few steps" 0 "$NB" run order $small --steps 8 --eval-every 8 --norm $norm
done
check "--adam-fix" 0 "$NB" run order $small --steps 4 --adam-fix
check "--adam-fix is recorded" 0 "$NB" show "$(sqlite3 "$db" "select max(id) from runs")" --format json
has "as standard bias correction" "$tmp/out" '"adam_bias_correction": "standard"'

# report: the task's test metrics, and the papers' numbers.
check "report --task order" 0 "$NB" report --task order
has "report shows image R@10" "$tmp/out" 'test_img_r10'
has "report shows caption mean rank" "$tmp/out" 'test_cap_meanr'
check "report --paper" 0 "$NB" report --task order --paper
has "the papers' Table 7" "$tmp/out" 'OE\+RMSNorm'
has "the papers' step times, marked as other hardware" "$tmp/out" 'TITAN X'
has "citing the project's own paper notes" "$tmp/out" 'docs/papers\.md#order-reported'

# Usage errors.
check "--dim 0 is a usage error" 2 "$NB" run order --dim 0
check "an order option on mnist is a usage error" 2 "$NB" run mnist --dim 64
has "it says whose option it is" "$tmp/err" 'option of the task\(s\) order,reader,mt(,[a-z]+)*, not of .mnist.'
check "--adam-fix with --adam-bias is a usage error" 2 "$NB" run order --adam-fix --adam-bias none
check "an unknown dataset is a usage error" 2 "$NB" run order --dataset cifar10
check "--margin -1 is a usage error" 2 "$NB" run order --margin -1
check "a batch larger than the training set fails" 1 "$NB" run order $common --subset 512 --batch 1000
has "and says so" "$tmp/err" "larger than the 512 training images"

# Missing data.
mkdir -p "$tmp/empty"
check "coco-oe without its files fails" 1 "$NB" run order --data-dir "$tmp/empty" --no-fetch --quiet
has "it names the file" "$tmp/err" "$tmp/empty/coco-oe/train.txt"
has "it hints the fetch" "$tmp/err" "^hint: .*normbench fetch coco-oe"

# Resume: a run killed after an epoch and resumed records what an uninterrupted one records.
metrics() { sqlite3 "$db" "select group_concat(name||':'||step||':'||value, ' ') from (select * from metrics where run = $1 and name not in ('ms_per_step', 'epoch_seconds') order by name, step)"; }
ckpt() { echo "$db-checkpoints/run-$1.ckpt"; }
for norm in batch prms; do
    args="order $common --batch 64 --subset 256 --epochs 40 --eval-every 40 --log-every 5 --norm $norm"
    check "$norm: uninterrupted run" 0 "$NB" run $args
    ref=$(sqlite3 "$db" "select max(id) from runs")
    "$NB" run $args >/dev/null 2>&1 &
    pid=$!
    id=$((ref + 1))
    for _ in $(seq 1 2400); do [ -e "$(ckpt $id)" ] && break; sleep 0.05; done
    sleep 0.2
    kill -KILL $pid
    wait $pid 2>/dev/null
    s=$(sqlite3 "$db" "select status from runs where id = $id")
    [ "$s" = running ] && ok "$norm: killed mid-run" || not_ok "$norm: killed mid-run (status $s)"
    check "$norm: resume" 0 "$NB" run --resume $id --quiet
    a=$(metrics "$ref")
    b=$(metrics "$id")
    [ -n "$a" ] && [ "$a" = "$b" ] && ok "$norm: the resumed run recorded the same metrics" \
        || not_ok "$norm: the resumed run recorded the same metrics" "$a
$b"
done

echo "1..$n"
[ $fails -eq 0 ]
