#!/bin/bash
# `normbench sweep` runs each job in a child process that builds the run and executes it itself
# (run/job.h), not by running `normbench run` again from a command line it put together: the
# children carry the sweep's own command line; they still record every run, keep the job's
# "run N STATUS" line off the sweep's stdout, and stop at a signal (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
db=$tmp/sw.db
quick="--dataset synthetic --subset 1000 --batch 32 --threads 1"

"$NB" sweep mnist --norms rms,layer --seeds 1 $quick --epochs 3 --jobs 2 --db "$db" >"$tmp/sw.out" 2>"$tmp/sw.err" &
pid=$!
kids=""
for _ in $(seq 1 600); do
    kids=$(ps -o pid= --ppid $pid 2>/dev/null | tr -d ' ')
    [ -n "$kids" ] && break
    sleep 0.02
done
sleep 0.1
lines=""
for k in $kids; do lines="$lines$(tr '\0' ' ' <"/proc/$k/cmdline" 2>/dev/null)
"; done
wait $pid
rc=$?
[ -n "$kids" ] && ok "the sweep has children while its jobs run" || not_ok "the sweep has children"
echo "$lines" | grep -q ' sweep mnist ' && ! echo "$lines" | grep -q ' run ' \
    && ok "... each the sweep's own process, not a 'normbench run' started anew" \
    || not_ok "... each the sweep's own process" "$lines"
[ $rc = 0 ] && ok "the sweep finishes" || not_ok "the sweep finishes (exit $rc)" "$(tail -n 5 "$tmp/sw.err")"
has "... both jobs" "$tmp/sw.out" '^sweep: 2 jobs: 2 finished now, 0 finished before'
! grep -q '^run [0-9]' "$tmp/sw.out" && ok "the jobs' own result lines stay off its stdout" || not_ok "no job result lines on stdout" "$(cat "$tmp/sw.out")"
c=$(sqlite3 "$db" "select count(*) from runs where status = 'finished'")
[ "$c" = 2 ] && ok "two finished runs recorded" || not_ok "two finished runs ($c)"
c=$(sqlite3 "$db" "select count(*) from tags where key = 'sweep'")
[ "$c" = 2 ] && ok "each tagged with its sweep job" || not_ok "each tagged sweep=KEY ($c)"

# a signal: the jobs stop at their next step, recorded as interrupted; the sweep run again
# resumes them from their checkpoints
db2=$tmp/sw2.db
"$NB" sweep mnist --norms rms,layer --seeds 1 $quick --epochs 4 --jobs 2 --db "$db2" >"$tmp/sw.out" 2>"$tmp/sw.err" &
pid=$!
for _ in $(seq 1 2400); do [ "$(ls "$db2-checkpoints" 2>/dev/null | grep -c '\.ckpt$')" = 2 ] && break; sleep 0.05; done
kill -INT $pid
wait $pid
rc=$?
[ $rc = 1 ] && ok "an interrupted sweep exits 1" || not_ok "an interrupted sweep exits 1 (exit $rc)" "$(tail -n 5 "$tmp/sw.err")"
c=$(sqlite3 "$db2" "select count(*) from runs where status = 'interrupted'")
[ "$c" = 2 ] && ok "... its jobs recorded as interrupted" || not_ok "two interrupted runs ($c)" "$(sqlite3 "$db2" 'select id, status from runs')"
check "the sweep run again" 0 "$NB" sweep mnist --norms rms,layer --seeds 1 $quick --epochs 4 --jobs 2 --db "$db2"
c=$(grep -c 'resumed as run [12]: normbench run mnist' "$tmp/err")
[ "$c" = 2 ] && ok "... resumes both jobs" || not_ok "... resumes both jobs ($c)" "$(cat "$tmp/err")"
c=$(sqlite3 "$db2" "select count(*) from runs where status = 'finished'")
[ "$c" = 2 ] && ok "... and finishes them under their run ids" || not_ok "two finished runs ($c)"

echo "1..$n"
exit $((fails > 0))
