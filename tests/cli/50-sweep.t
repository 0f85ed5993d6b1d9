#!/bin/bash
# Command-line tests of `normbench sweep` (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
db=$tmp/sw.db
export NORMBENCH_DB=$db
quick="--dataset synthetic --subset 1000 --batch 32 --steps 10"

check "sweep --help exits 0" 0 "$NB" sweep --help
has "sweep --help shows the usage" "$tmp/out" '^usage: normbench sweep TASK'
check "sweep without --norms is a usage error" 2 "$NB" sweep mnist --seeds 2
check "sweep with --norm is a usage error" 2 "$NB" sweep mnist --norm rms --norms rms --seeds 1
has "sweep --norm says to use --norms" "$tmp/err" "use --norms"
check "sweep with a bad norm is a usage error" 2 "$NB" sweep mnist --norms rms,nope --seeds 1
check "a bad value inside a list is a usage error" 2 "$NB" sweep mnist --norms rms --seeds 1 --batch 4,abc
has "the bad value is named" "$tmp/err" "'abc'"
check "an unknown run option is a usage error" 2 "$NB" sweep mnist --norms rms --seeds 1 --bogus 3

check "dry run exits 0" 0 "$NB" sweep mnist --norms all --seeds 2 --batch 128,4 --dataset synthetic --dry-run
c=$(grep -c 'normbench run mnist' "$tmp/out")
[ "$c" = 28 ] && ok "dry run lists 7 norms (all: the table's) x 2 seeds x 2 batches = 28 jobs" || not_ok "dry run lists 28 jobs (got $c)"
has "jobs are numbered" "$tmp/out" '^ +28  normbench run mnist --norm dyt --seed 2 --batch 4 --dataset synthetic$'
order=$(sed -n 's/^ *\([0-9]*\)  normbench run mnist --norm \([a-z]*\) --seed \([0-9]\) --batch \([0-9]*\).*/\2 \3 \4/p' "$tmp/out" | head -n 8 | tr '\n' ,)
[ "$order" = "none 1 128,batch 1 128,weight 1 128,layer 1 128,rms 1 128,prms 1 128,dyt 1 128,none 1 4," ] \
    && ok "the norms run next to each other, seed by seed" || not_ok "norms interleaved" "$order"
[ ! -e "$db" ] && ok "a dry run creates no store" || not_ok "a dry run creates no store"
# 'all' is the norms the task takes: lm refuses batch, so its 'all' is the other six
check "sweep lm --norms all" 0 "$NB" sweep lm --norms all --seeds 1 --dataset synthetic --dry-run
c=$(grep -c 'normbench run lm' "$tmp/out")
[ "$c" = 6 ] && ok "lm's all: 6 jobs" || not_ok "lm's all: 6 jobs (got $c)"
if grep -q -- '--norm batch' "$tmp/out"; then not_ok "no batch job for lm"; else ok "no batch job for lm"; fi

check "a small sweep runs" 0 "$NB" sweep mnist --norms rms,layer --seeds 2 --jobs 2 $quick
has "sweep summary on stdout" "$tmp/out" '^sweep: 4 jobs: 4 finished now, 0 finished before'
c=$(sqlite3 "$db" "select count(*) from runs where status='finished'")
[ "$c" = 4 ] && ok "four finished runs" || not_ok "four finished runs (got $c)"
c=$(sqlite3 "$db" "select count(distinct seed) from runs where norm='rms'")
[ "$c" = 2 ] && ok "each norm on seeds 1 and 2" || not_ok "each norm on both seeds ($c)"
check "the same sweep again" 0 "$NB" sweep mnist --norms rms,layer --seeds 2 $quick
has "everything is skipped" "$tmp/out" '^sweep: 4 jobs: 0 finished now, 4 finished before'
# --quiet changes nothing a job records (jobs run quietly anyway): the same jobs, skipped
check "the same sweep with --quiet" 0 "$NB" sweep mnist --norms rms,layer --seeds 2 --quiet $quick
has "everything is skipped with --quiet too" "$tmp/out" '^sweep: 4 jobs: 0 finished now, 4 finished before'
c=$(sqlite3 "$db" "select count(*) from runs")
[ "$c" = 4 ] && ok "no run was repeated" || not_ok "no run was repeated ($c runs)"

check "a sweep over an option list" 0 "$NB" sweep mnist --norms rms,layer --seeds 1 --dataset synthetic --subset 1000 --batch 16,24 --steps 10
check "report on the option-list sweep" 0 "$NB" report
has "report separates the variants (batch 16)" "$tmp/out" '^mnist / synthetic \[--batch 16\]$'
has "report separates the variants (batch 24)" "$tmp/out" '^mnist / synthetic \[--batch 24\]$'

check "report with a target every run reaches" 0 "$NB" report --target 'val_error<=0.99' --format md
has "steps to the target: the one evaluation, at step 10, in 2 of 2 runs" "$tmp/out" '^\| rms \| 2 \| .* \| 10 ± 0 \(2/2\) \|'
check "report with a target no run reaches" 0 "$NB" report --target 'val_error<=0' --format md
has "nobody reached it" "$tmp/out" '^\| rms \| 2 \| .* \| - \(0/2\) \| - \|'
check "an invalid target is a usage error" 2 "$NB" report --target 'val_error=3'
check "report --paper" 0 "$NB" report --paper
has "report --paper says what the paper reports" "$tmp/out" '^  paper: LN paper'
has "and cites the project's own paper notes" "$tmp/out" 'docs/papers\.md#mnist'
has "and says the He-normal initialization is normbench's choice" "$tmp/out" "He-normal.*normbench's choice"

# Interrupt a sweep (as Ctrl-C does: the whole process group), then resume it.
db2=$tmp/int.db
long="--dataset synthetic --subset 2000 --batch 32 --steps 400"
setsid "$NB" sweep mnist --norms none,layer,rms --seeds 2 --db "$db2" $long >"$tmp/s1" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    sleep 0.2
    c=$(sqlite3 "$db2" "select count(*) from runs where status='finished'" 2>/dev/null || echo 0)
    [ "${c:-0}" -ge 1 ] && break
done
kill -INT -- -"$pid"
wait "$pid"
rc=$?
[ $rc -eq 1 ] && ok "interrupted sweep exits 1" || not_ok "interrupted sweep exits 1 (got $rc)" "$(cat "$tmp/s1")"
before=$(sqlite3 "$db2" "select count(*) from runs where status='finished'")
[ "$before" -ge 1 ] && [ "$before" -lt 6 ] && ok "some jobs finished before the interrupt ($before)" || not_ok "some jobs finished before the interrupt ($before)"
c=$(sqlite3 "$db2" "select count(*) from runs where status='interrupted'")
[ "$c" -le 1 ] && ok "at most the running job was interrupted ($c)" || not_ok "at most one interrupted ($c)"
check "the interrupted sweep resumes" 0 "$NB" sweep mnist --norms none,layer,rms --seeds 2 --db "$db2" $long
has "only the missing jobs ran" "$tmp/out" "^sweep: 6 jobs: $((6 - before)) finished now, $before finished before, 0 did not finish"
c=$(sqlite3 "$db2" "select count(*) from runs where status='finished'")
[ "$c" = 6 ] && ok "all six finished after resuming" || not_ok "all six finished after resuming ($c)"
c=$(sqlite3 "$db2" "select count(*) from (select t.value from tags t join runs r on r.id = t.run where t.key='sweep' and r.status='finished' group by t.value having count(*) > 1)")
[ "$c" = 0 ] && ok "no job finished twice" || not_ok "no job finished twice ($c)"

echo "1..$n"
[ $fails -eq 0 ]
