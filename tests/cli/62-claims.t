#!/bin/bash
# Who a run belongs to and who holds it: checkpoints that name their store and run, one resumer
# per run, sweeps sharing a store, sweeps re-run after an interrupt or a crash, leftover
# checkpoint temporary files, and the signals that stop a run (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
S="--dataset synthetic --threads 1 --quiet"
ckpt() { echo "$1-checkpoints/run-$2.ckpt"; }
# wait_for DESC TENTHS CMD...: polls CMD every 0.05 s until it succeeds, at most TENTHS / 10 s
wait_for() {
    local i
    for i in $(seq 1 $(($2 * 2))); do
        "${@:3}" && return 0
        sleep 0.05
    done
    echo "# timed out waiting for $1"
    return 1
}
rows() { [ "$(sqlite3 "$1" "select count(*) from runs" 2>/dev/null || echo 0)" -ge "$2" ]; }
# resumable DB ID: run ID has its row and its recorded command line (what --resume rebuilds it
# from; written just after the row, so a run killed between the two cannot be resumed)
resumable() { [ "$(sqlite3 "$1" "select count(*) from params where run = $2 and key = 'argv'" 2>/dev/null || echo 0)" = 1 ]; }
# kill_at_checkpoint DB ID PID: kills PID (-9) once run ID of DB has written a checkpoint
kill_at_checkpoint() {
    wait_for "run $2's checkpoint" 300 test -e "$(ckpt "$1" "$2")"
    kill -KILL "$3"
    wait "$3" 2>/dev/null
}
dup_metrics() { sqlite3 "$1" "select count(*) from (select 1 from metrics where run = $2 group by name, step having count(*) > 1)"; }

# 1. A checkpoint left from a deleted store is not resumed into another run (the issue's
# commands): the checkpoint names its store, run, task, norm, seed and configuration.
db=$tmp/s.db
"$NB" run mnist $S --subset 2000 --epochs 20 --seed 9 --norm layer --db "$db" &
kill_at_checkpoint "$db" 1 $!
rm -f "$db" "$db-wal" "$db-shm"
"$NB" run mnist $S --subset 2000 --epochs 20 --seed 5 --norm rms --batch 4 --db "$db" &
pid=$!
wait_for "run 1's command line" 300 resumable "$db" 1
kill -KILL $pid
wait $pid 2>/dev/null
check "a foreign checkpoint is refused" 1 "$NB" run --resume 1 --db "$db"
has "the message names the checkpoint and what differs" "$tmp/err" "^error: checkpoint '.*s\.db-checkpoints/run-1\.ckpt' belongs to another run: it was written for store [0-9a-f]{32}, this store is [0-9a-f]{32}; norm layer, not rms; seed 9, not 5"
has "and says what to do" "$tmp/err" "^hint: .*move it aside"
c=$(sqlite3 "$db" "select count(*) from metrics where run = 1 and name = 'test_error'")
[ "$c" = 0 ] && ok "the refused resume recorded nothing" || not_ok "the refused resume recorded nothing ($c test_error)"

# A checkpoint of another run of the same store, and one in the old format, are refused too.
"$NB" run mnist $S --subset 2000 --epochs 6 --seed 2 --norm rms --db "$db" &
kill_at_checkpoint "$db" 2 $!
"$NB" run mnist $S --subset 2000 --epochs 20 --seed 2 --norm rms --batch 4 --db "$db" &
pid=$!
wait_for "run 3's command line" 300 resumable "$db" 3
kill -KILL $pid
wait $pid 2>/dev/null
cp "$(ckpt "$db" 2)" "$(ckpt "$db" 3)"
check "another run's checkpoint is refused" 1 "$NB" run --resume 3 --db "$db"
has "it names the run it belongs to" "$tmp/err" "run-3\.ckpt' belongs to another run: it belongs to run 2, not 3"
printf 'NBCKPT1\0%0100d' 0 >"$(ckpt "$db" 3)"
check "a checkpoint in the old format is refused" 1 "$NB" run --resume 3 --db "$db"
has "as written by an older normbench" "$tmp/err" "run-3\.ckpt' is from an older normbench \(format 1"

# 2. Two resumes of one run at once: exactly one proceeds, and every metric is recorded once.
"$NB" run --resume 2 --db "$db" --quiet >"$tmp/r1" 2>&1 &
p1=$!
"$NB" run --resume 2 --db "$db" --quiet >"$tmp/r2" 2>&1 &
p2=$!
wait $p1
rc1=$?
wait $p2
rc2=$?
[ $((rc1 + rc2)) = 1 ] && ok "exactly one of two concurrent resumes proceeds ($rc1, $rc2)" \
    || not_ok "exactly one of two concurrent resumes proceeds ($rc1, $rc2)" "$(cat "$tmp/r1" "$tmp/r2")"
cat "$tmp/r1" "$tmp/r2" >"$tmp/both"
has "the other is refused, naming the holder" "$tmp/both" "^error: run 2 (is running in process [0-9]+ on |finished already)"
[ "$(sqlite3 "$db" "select status from runs where id = 2")" = finished ] && ok "run 2 finished" || not_ok "run 2 finished"
c=$(dup_metrics "$db" 2)
[ "$c" = 0 ] && ok "every metric of run 2 recorded once" || not_ok "every metric of run 2 recorded once ($c twice)"
c=$(sqlite3 "$db" "select count(*) from metrics where run = 2 and name = 'epoch'")
[ "$c" = 6 ] && ok "6 epochs recorded for a 6-epoch run" || not_ok "6 epochs recorded ($c)"

# 3. A crashed run whose pid now belongs to another process (here: this shell, started at
# another time) shows as crashed, and can be resumed; --from-scratch starts a stopped run over
# under its id, checkpoint or not.
"$NB" run mnist $S --subset 300 --batch 4 --epochs 6 --db "$db" >/dev/null 2>&1 &
pid=$!
wait_for "run 4's command line" 300 resumable "$db" 4
kill -INT $pid
wait $pid
sqlite3 "$db" "update runs set status = 'running', pid = $$ where id = 4"
sqlite3 "$db" "update runs set pid_start = 1 where id = 4" 2>/dev/null
check "runs" 0 "$NB" runs --db "$db"
has "a reused pid does not keep a crashed run running" "$tmp/out" "^ *4 .* crashed "
check "--from-scratch starts it over under its id" 0 "$NB" run --resume 4 --db "$db" --from-scratch
has "it finishes run 4" "$tmp/out" "^run 4 finished$"
c=$(sqlite3 "$db" "select count(*) from runs")
[ "$c" = 4 ] && ok "no run was added" || not_ok "no run was added ($c runs)"
c=$(sqlite3 "$db" "select count(*) from metrics where run = 4 and name = 'epoch'")
[ "$c" = 6 ] && [ "$(dup_metrics "$db" 4)" = 0 ] && ok "its 6 epochs recorded once" || not_ok "its 6 epochs recorded once ($c)"

# 4. Leftover checkpoint temporary files: a dead writer's is removed by the next run on the
# store, a live one's is kept.
touch "$db-checkpoints/run-7.ckpt.tmp.2147483646" "$db-checkpoints/run-8.ckpt.tmp.$$"
check "a short run" 0 "$NB" run mnist $S --subset 300 --steps 2 --db "$db"
[ ! -e "$db-checkpoints/run-7.ckpt.tmp.2147483646" ] && ok "a dead writer's temporary checkpoint is removed" \
    || not_ok "a dead writer's temporary checkpoint is removed"
[ -e "$db-checkpoints/run-8.ckpt.tmp.$$" ] && ok "a live writer's is kept" || not_ok "a live writer's is kept"

# 5. SIGHUP (a closed terminal) stops a run as Ctrl-C does.
"$NB" run mnist $S --subset 2000 --batch 4 --epochs 5 --db "$db" >/dev/null 2>&1 &
pid=$!
n0=$(sqlite3 "$db" "select count(*) from runs")
wait_for "the run row" 300 rows "$db" $((n0 + 1))
kill -HUP $pid
wait $pid
rc=$?
[ $rc = 1 ] && ok "SIGHUP: the run exits 1" || not_ok "SIGHUP: the run exits 1 (got $rc)"
s=$(sqlite3 "$db" "select status from runs where id = $((n0 + 1))")
[ "$s" = interrupted ] && ok "SIGHUP: recorded as interrupted" || not_ok "SIGHUP: recorded as interrupted ($s)"

# 6. Two sweeps on one store: every job runs once, in one of them; both wait for the whole.
db=$tmp/sw.db
quick="--dataset synthetic --subset 1000 --batch 32 --steps 60 --threads 1"
"$NB" sweep mnist --norms layer,rms --seeds 3 --db "$db" $quick >"$tmp/a.out" 2>"$tmp/a.err" &
pa=$!
wait_for "the first sweep's first run" 300 rows "$db" 1
"$NB" sweep mnist --norms layer,rms --seeds 3 --db "$db" $quick >"$tmp/b.out" 2>"$tmp/b.err" &
pb=$!
wait $pa
ra=$?
wait $pb
rb=$?
[ $ra = 0 ] && [ $rb = 0 ] && ok "both sweeps exit 0" || not_ok "both sweeps exit 0 ($ra, $rb)" "$(cat "$tmp/a.err" "$tmp/b.err")"
c=$(sqlite3 "$db" "select count(*) from runs")
[ "$c" = 6 ] && ok "6 jobs, 6 runs" || not_ok "6 jobs, 6 runs (got $c)"
c=$(sqlite3 "$db" "select count(*) from runs where status = 'finished'")
[ "$c" = 6 ] && ok "all finished" || not_ok "all finished ($c)"
c=$(sqlite3 "$db" "select count(*) || ' ' || count(distinct value) from tags where key = 'sweep'")
[ "$c" = "6 6" ] && ok "each job once" || not_ok "each job once (runs, jobs: $c)"
c=$(sqlite3 "$db" "select count(*) from claims")
[ "$c" = 0 ] && ok "no claim is left behind" || not_ok "no claim is left behind ($c)"
has "the second sweep says what the first did" "$tmp/b.out" "finished by another process|[1-9][0-9]* finished before"

# 7. A sweep stopped by SIGTERM (to the sweep alone) stops its job at its next step; run again,
# it resumes that job's run from its checkpoint.
db=$tmp/int.db
long="--dataset synthetic --subset 2000 --epochs 4 --threads 1"
"$NB" sweep mnist --norms layer,rms --seeds 1 --db "$db" $long >"$tmp/s1" 2>&1 &
pid=$!
wait_for "run 1's checkpoint" 300 test -e "$(ckpt "$db" 1)"
kill -TERM $pid
wait $pid
rc=$?
[ $rc = 1 ] && ok "a stopped sweep exits 1" || not_ok "a stopped sweep exits 1 (got $rc)" "$(cat "$tmp/s1")"
s=$(sqlite3 "$db" "select status from runs where id = 1")
[ "$s" = interrupted ] && ok "its running job stopped as interrupted" || not_ok "its running job stopped as interrupted ($s)"
check "the sweep run again" 0 "$NB" sweep mnist --norms layer,rms --seeds 1 --db "$db" $long
has "it resumes the interrupted job" "$tmp/err" "resumed as run 1: normbench run mnist --norm layer"
c=$(sqlite3 "$db" "select count(*) from runs")
[ "$c" = 2 ] && ok "no run was added for the resumed job (2 runs)" || not_ok "no run was added ($c runs)"
c=$(sqlite3 "$db" "select count(*) from runs where status = 'finished'")
[ "$c" = 2 ] && ok "both finished" || not_ok "both finished ($c)"
c=$(sqlite3 "$db" "select count(*) from metrics where run = 1 and name = 'epoch'")
[ "$c" = 4 ] && [ "$(dup_metrics "$db" 1)" = 0 ] && ok "the resumed run has its 4 epochs once" || not_ok "the resumed run has its 4 epochs once ($c)"

# 8. A sweep killed outright (the sweep and its job: a crash) leaves a claim and a crashed run;
# the sweep run again takes the claim over and resumes the run.
db=$tmp/crash.db
setsid "$NB" sweep mnist --norms layer --seeds 2 --db "$db" $long >"$tmp/s2" 2>&1 &
pid=$!
wait_for "run 1's checkpoint" 300 test -e "$(ckpt "$db" 1)"
kill -KILL -- -$pid
wait $pid 2>/dev/null
c=$(sqlite3 "$db" "select count(*) from claims")
[ "$c" = 1 ] && ok "the killed sweep left its claim" || not_ok "the killed sweep left its claim ($c)"
check "the crashed sweep run again" 0 "$NB" sweep mnist --norms layer --seeds 2 --db "$db" $long
has "it resumes the crashed job" "$tmp/err" "resumed as run 1: "
c=$(sqlite3 "$db" "select count(*) from runs")
[ "$c" = 2 ] && ok "2 jobs, 2 runs" || not_ok "2 jobs, 2 runs ($c)"
[ "$(dup_metrics "$db" 1)" = 0 ] && ok "the resumed run's metrics are recorded once" || not_ok "the resumed run's metrics are recorded once"

echo "1..$n"
[ $fails -eq 0 ]
