#!/bin/bash
# `run --resume` builds the run from its stored configuration (read as JSON), not from its
# recorded command line: a run with no recorded command line resumes, a recorded command line
# that says otherwise changes nothing, and a configuration this normbench cannot make again
# (a key missing, unknown or rebuilt differently: a store of another version) is refused by
# name (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
db=$tmp/r.db
# one thread throughout: a run whose command line is gone resumes with the threads in force
export OMP_NUM_THREADS=1
metrics() { sqlite3 "$1" "select group_concat(name||':'||step||':'||value, ' ') from (select * from metrics where run = $2 and name not in ('ms_per_step', 'epoch_seconds') order by name, step)"; }
args="mnist --dataset synthetic --subset 1000 --batch 32 --epochs 4 --norm rms --log-every 7 --threads 1 --quiet"
check "an uninterrupted run" 0 "$NB" run $args --db "$db"
# run 2: the same, killed after its first checkpoint
"$NB" run $args --db "$db" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 2400); do [ -e "$db-checkpoints/run-2.ckpt" ] && break; sleep 0.05; done
sleep 0.3
kill -KILL $pid
wait $pid 2>/dev/null
ref=$(metrics "$db" 1)
# copy NAME: the store as the killed run left it
copy() { for x in "" -wal -shm; do [ -e "$db$x" ] && cp "$db$x" "$tmp/$1.db$x"; done; cp -r "$db-checkpoints" "$tmp/$1.db-checkpoints"; }

copy noargv
sqlite3 "$tmp/noargv.db" "delete from params where run = 2 and key = 'argv'"
check "a run with no recorded command line resumes" 0 "$NB" run --resume 2 --db "$tmp/noargv.db"
has "... and finishes" "$tmp/out" "^run 2 finished$"
b=$(metrics "$tmp/noargv.db" 2)
[ -n "$ref" ] && [ "$ref" = "$b" ] && ok "... recording what the uninterrupted run recorded" || not_ok "... the same metrics" "$ref
$b"

copy otherargv
sqlite3 "$tmp/otherargv.db" "update params set value = replace(value, '--norm' || char(31) || 'rms', '--norm' || char(31) || 'rms' || char(31) || '--lr' || char(31) || '0.5' || char(31) || '--seed' || char(31) || '7') where run = 2 and key = 'argv'"
grep -q -- "--lr.0.5" <(sqlite3 "$tmp/otherargv.db" "select value from params where run = 2 and key = 'argv'") && ok "the recorded command line now says --lr 0.5 --seed 7" || not_ok "the recorded command line was changed"
check "a run whose recorded command line says otherwise resumes" 0 "$NB" run --resume 2 --db "$tmp/otherargv.db"
b=$(metrics "$tmp/otherargv.db" 2)
[ -n "$ref" ] && [ "$ref" = "$b" ] && ok "... as its stored configuration says: the same metrics" || not_ok "... the same metrics" "$ref
$b"

# --from-scratch: no checkpoint (whose identity is the stored configuration's) to refuse it first
copy missing
sqlite3 "$tmp/missing.db" "update runs set config = json_remove(config, '$.adam_eps_on') where id = 2"
check "a stored configuration without a key is refused" 1 "$NB" run --resume 2 --from-scratch --db "$tmp/missing.db"
has "... naming it" "$tmp/err" "^error: run 2 cannot be resumed: its stored configuration has no 'adam_eps_on'$"
has "... saying what to do" "$tmp/err" "^hint: .*start it anew.*normbench show 2"
check "... and left as it was: runs shows it crashed, not claimed" 0 "$NB" runs --db "$tmp/missing.db"
has "... crashed" "$tmp/out" "^ *2 .* crashed "

copy unknown
sqlite3 "$tmp/unknown.db" "update runs set config = json_set(config, '$.future_option', 3) where id = 2"
check "a stored configuration with a key this normbench does not know is refused" 1 "$NB" run --resume 2 --from-scratch --db "$tmp/unknown.db"
has "... naming it" "$tmp/err" "its stored configuration has 'future_option', which this normbench does not know"

copy other
sqlite3 "$tmp/other.db" "update runs set config = json_set(config, '$.optimizer', 'sgd') where id = 2"
check "a stored configuration that does not make the same run again is refused" 1 "$NB" run --resume 2 --from-scratch --db "$tmp/other.db"
has "... naming what differs" "$tmp/err" "'optimizer' is sgd stored, adam rebuilt"

copy badnum
sqlite3 "$tmp/badnum.db" "update runs set config = json_set(config, '$.batch', 'many') where id = 2"
check "a stored value that is not valid is refused" 1 "$NB" run --resume 2 --from-scratch --db "$tmp/badnum.db"
has "... naming it" "$tmp/err" "its stored configuration's 'batch' is not a valid integer"

echo "1..$n"
exit $((fails > 0))
