#!/bin/bash
# Command-line tests of usage errors (strict numbers, options given twice, empty values),
# report's checks of --task and --target and its warning about runs that differ in more than the
# seed, sweep's duplicate values, the progress line before the first loss, and memory: buffers
# sized by the data and batches that cannot fit refused up front (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DB=$tmp/nb.db NORMBENCH_DATA=$tmp/data
S="--dataset synthetic --threads 1 --quiet --subset 300 --steps 2"

# Numbers are decimal: no hex, spaces, inf or nan.
for v in 0x10 " 5" "5 " inf nan -inf 1e; do
    check "--lr '$v' is a usage error" 2 "$NB" run mnist $S --lr "$v"
    has "--lr '$v' is named" "$tmp/err" "option '--lr' expects a number, not '$v' \(decimal"
done
for v in 0x10 " 5" "5 " 5.0; do
    check "--batch '$v' is a usage error" 2 "$NB" run mnist $S --batch "$v"
done
check "--lr 1e-3 is still a number" 0 "$NB" run mnist $S --lr 1e-3
check "--lr .5e-2 is still a number" 0 "$NB" run mnist $S --lr .5e-2
check "show ' 1' is a usage error" 2 "$NB" show " 1"
check "report --target with a hex level is a usage error" 2 "$NB" report --target "val_error<=0x1"
check "bench --batch ' 4' is a usage error" 2 "$NB" bench step mnist --batch " 4"
check "sweep --seeds ' 2' is a usage error" 2 "$NB" sweep mnist --norms layer --seeds " 2" --dry-run

# An option that takes a value, given twice, is a usage error naming it; a flag may repeat.
for o in "--norm rms --norm layer" "--tag a=1 --tag a=2" "--seed 1 --seed 2" "--variant a --variant b"; do
    check "run $o is a usage error" 2 "$NB" run mnist $S $o
    has "run $o names the option" "$tmp/err" "option '${o%% *}' is given twice"
done
has "the repeated option is said to be given twice" "$tmp/err" "is given twice"
check "a flag given twice is accepted" 0 "$NB" run mnist $S --quiet
check "report --task twice is a usage error" 2 "$NB" report --task mnist --task cifar
check "sweep --lr twice is a usage error" 2 "$NB" sweep mnist --norms layer --seeds 1 --lr 1e-3 --lr 2e-3 --dry-run
has "sweep names the option given twice" "$tmp/err" "option '--lr' is given twice"
check "sweep --seeds twice is a usage error" 2 "$NB" sweep mnist --norms layer --seeds 1 --seeds 2 --dry-run
check "sweep --tag is a usage error (sweep tags its jobs)" 2 "$NB" sweep mnist --norms layer --seeds 1 --tag x --dry-run

# Empty values are usage errors with a plain message.
for o in db data-dir; do
    check "run --$o '' is a usage error" 2 "$NB" run mnist $S --$o ""
    has "run --$o '' is explained" "$tmp/err" "option '--$o' needs a value: it is empty"
done
check "fetch --mirror '' is a usage error" 2 "$NB" fetch cnn-top4 --mirror ""
has "fetch --mirror '' is explained" "$tmp/err" "option '--mirror' needs a value: it is empty"
check "runs --db '' is a usage error" 2 "$NB" runs --db ""
check "datasets --data-dir '' is a usage error" 2 "$NB" datasets --data-dir ""
check "sweep --db '' is a usage error" 2 "$NB" sweep mnist --norms layer --seeds 1 --db ""

# run without a task lists every task of the task table.
check "run without a task is a usage error" 2 "$NB" run
has "run without a task lists every task" "$tmp/err" "mnist cifar order reader"

# report: an unknown task is a usage error listing the tasks; so is a --target metric no run has.
check "report --task nosuch is a usage error" 2 "$NB" report --task nosuch
has "report --task nosuch names it and lists the tasks" "$tmp/err" "unknown task 'nosuch'"
has "report --task nosuch hint lists the tasks" "$tmp/err" "hint: the tasks are: mnist cifar order reader"
check "report --target with an unknown metric is a usage error" 2 "$NB" report --target "nosuch<=1"
has "report --target names the metric" "$tmp/err" "recorded the metric 'nosuch'"
has "report --target lists the metrics there are" "$tmp/err" "hint: the metrics recorded are: .*val_error"
check "report --target with a known metric" 0 "$NB" report --target "val_error<=1"

# report warns about runs averaged together that differ in more than the seed.
db2=$tmp/mix.db
"$NB" run mnist $S --db "$db2" --seed 1 --lr 1e-3 >/dev/null 2>&1
"$NB" run mnist $S --db "$db2" --seed 2 --lr 1e-3 --eval-batch 100 >/dev/null 2>&1
check "report on runs differing in seed and eval batch only" 0 "$NB" report --db "$db2"
if grep -q warning "$tmp/err"; then not_ok "no warning for seed and eval_batch" "$(cat "$tmp/err")"; else ok "no warning for seed and eval_batch"; fi
"$NB" run mnist $S --db "$db2" --seed 3 --lr 3e-3 >/dev/null 2>&1
check "report on runs differing in lr" 0 "$NB" report --db "$db2"
has "report warns naming the differing key and its values" "$tmp/err" "^warning: .*mnist / synthetic, norm layer, differ in 'lr' \(0.001,0.003\)"
has "report's hint says to use --variant" "$tmp/err" "^hint: .*--variant"

# sweep refuses a list with the same value twice, also written differently.
check "sweep --lr 1e-3,0.001 is a usage error" 2 "$NB" sweep mnist --norms layer --seeds 1 --lr 1e-3,0.001 --dry-run
has "sweep names both spellings" "$tmp/err" "same value twice \('1e-3' and '0.001'\)"
check "sweep --batch 16,16 is a usage error" 2 "$NB" sweep mnist --norms layer --seeds 1 --batch 16,16 --dry-run
check "sweep --lr 1e-3,2e-3 is fine" 0 "$NB" sweep mnist --norms layer --seeds 1 --lr 1e-3,2e-3 --dry-run --db "$tmp/sw.db"
check "sweep --variant with a list is a usage error" 2 "$NB" sweep mnist --norms layer --seeds 1 --lr 1e-3,2e-3 --variant x --dry-run

# The progress line says "loss -" before the first logged loss, not "loss nan".
check "a run whose first evaluation comes before its first logged loss" 0 "$NB" run mnist \
    --dataset synthetic --threads 1 --subset 300 --batch 100 --epochs 2 --log-every 1000 --db "$tmp/p.db"
if grep -q "loss nan" "$tmp/err"; then not_ok "no 'loss nan' in the progress" "$(cat "$tmp/err")"; else ok "no 'loss nan' in the progress"; fi
has "the progress says 'loss -' before the first loss" "$tmp/err" "^epoch 1/2 .* loss -  "

# Memory: the evaluation batch is sized by the data, and a batch that cannot fit is refused up
# front with the size it needs. Under `ulimit -v`; AddressSanitizer cannot start under that
# limit, so these are skipped for an ASan build.
if [ $asan = 1 ]; then
    for i in 1 2 3 4 5; do n=$((n + 1)); echo "ok $n # skip AddressSanitizer build: no ulimit -v"; done
else
    ( ulimit -v 2500000; exec "$NB" run mnist $S --eval-batch 1000000 --db "$tmp/mem.db" ) >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" = 0 ] && ok "--eval-batch 1000000 on 300 examples runs under ulimit -v 2.5 GB" || not_ok "--eval-batch 1000000 on 300 examples runs under ulimit -v 2.5 GB (exit $rc)" "$(cat "$tmp/err")"
    ( ulimit -v 2500000; exec "$NB" bench step mnist --batch 1000000 --norms layer --steps 1 ) >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" = 1 ] && ok "bench step --batch 1000000 is refused under ulimit -v" || not_ok "bench step --batch 1000000 is refused under ulimit -v (exit $rc)" "$(cat "$tmp/err")"
    has "the refusal names the option and the size it needs" "$tmp/err" "^error: --batch 1000000 needs about [0-9.]+ GiB .*ulimit -v"
    ( ulimit -v 2500000; exec "$NB" run cifar --dataset synthetic --threads 1 --quiet --subset 3000 --batch 3000 --steps 1 --width 1 --db "$tmp/mem.db" ) >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" = 1 ] && ok "run cifar --batch 3000 is refused under ulimit -v" || not_ok "run cifar --batch 3000 is refused under ulimit -v (exit $rc)" "$(cat "$tmp/err")"
    has "the run's refusal names its options" "$tmp/err" "^error: --batch 3000 with --eval-batch 100 needs about"
fi

echo "1..$n"
[ "$fails" -eq 0 ]
