#!/bin/bash
# A run records how the process hosting it was set up (issue 32): param "hosting", run/job.h's
# nb_job_hosting as JSON (--db, --data-dir when given, --threads, --quiet, --no-fetch, --device,
# --bn-sync). `run --resume`, sample/translate's model loading, an MPI sweep's resumed jobs and a
# data-parallel resume read it from there through util/json.h's reader, not from the recorded
# command line (param "argv", shown only): a run whose recorded command line was changed resumes
# as it was hosted, bit-exactly. A legacy store's run (recorded before "hosting" was) falls back
# to its recorded command line (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
unset NORMBENCH_DB
# the default data directory holds nothing: a run that loses its --data-dir cannot load its data
export NORMBENCH_DATA=$tmp/empty
mt_mkdata "$tmp/d" # lib.sh
m30="mt --data-dir $tmp/d --no-fetch --bpe-merges 50 --dim-word 16 --dim 32 --batch 16 --threads 1 --quiet --steps 4 --eval-every 2"
db=$tmp/m.db
param() { sqlite3 "$1" "select value from params where run = $2 and key = '$3'"; }
# every metric of run $2 but the timings, in order
metrics() { sqlite3 "$1" "select group_concat(name||':'||step||':'||quote(value), ' ') from (select * from metrics where run = $2 and name not in ('ms_per_step', 'epoch_seconds', 'tokens_per_s', 'allreduce_ms_per_step') order by name, step)"; }
# copy FROM TO: a store with its WAL and checkpoints
copy() {
    for x in "" -wal -shm; do [ -e "$1$x" ] && cp "$1$x" "$2$x"; done
    [ -d "$1-checkpoints" ] && cp -r "$1-checkpoints" "$2-checkpoints"
    return 0
}
# tamper DB RUN: the recorded command line loses its --data-dir and --quiet, and its --threads
# says garbage (--data-dir DIR: $3)
tamper() {
    sqlite3 "$1" "update params set value = replace(replace(replace(value, char(31) || '--data-dir' || char(31) || '$3', ''), char(31) || '--quiet', ''), '--threads' || char(31) || '1', '--threads' || char(31) || 'garbage') where run = $2 and key = 'argv'"
    [ "$(sqlite3 "$1" "select instr(value, char(31) || '--data-dir' || char(31)) = 0 and instr(value, char(31) || '--quiet') = 0 and instr(value, '--threads' || char(31) || 'garbage') > 0 from params where run = $2 and key = 'argv'")" = 1 ]
}
# what a resumed run found in its hosting (python): the JSON of param "hosting" of run $2
hosting_is() { python3 -c "import json, sys; h = json.loads(sys.argv[1]); $2" "$1"; }

# ---- recorded ------------------------------------------------------------------------------------
check "a run with --data-dir, --no-fetch, --threads 1, --quiet" 0 "$NB" run $m30 --db "$db"
h=$(param "$db" 1 hosting)
hosting_is "$h" "assert h == {'db': '$db', 'data_dir': '$tmp/d', 'threads': 1, 'quiet': 1, 'no_fetch': 1, 'device': 'cpu', 'bn_sync': 0}, h" \
    && ok "... records its hosting as JSON" || not_ok "... records its hosting as JSON" "$h"
check "show lists it" 0 "$NB" show 1 --db "$db"
has "... among the params" "$tmp/out" '^  hosting = {"db": '
check "a run without --data-dir or --threads" 0 "$NB" run mnist --dataset synthetic --subset 300 --batch 16 --steps 2 --db "$tmp/n.db"
h=$(param "$tmp/n.db" 1 hosting)
hosting_is "$h" "assert 'data_dir' not in h and h['threads'] == 0 and h['quiet'] == 0, h" \
    && ok "... records none (the default of the process that resumes it)" || not_ok "... records none" "$h"
ref=$(metrics "$db" 1)

# ---- resume reads it, not the recorded command line ----------------------------------------------
# a run of the store taken as stopped (interrupted): --from-scratch starts it over under its id
copy "$db" "$tmp/t.db"
sqlite3 "$tmp/t.db" "update runs set status = 'interrupted' where id = 1"
tamper "$tmp/t.db" 1 "$tmp/d" && ok "the recorded command line lost --data-dir and --quiet, --threads says garbage" \
    || not_ok "the recorded command line was changed" "$(param "$tmp/t.db" 1 argv)"
check "a run whose recorded command line was changed resumes (--from-scratch)" 0 "$NB" run --resume 1 --from-scratch --db "$tmp/t.db"
has "... and finishes" "$tmp/out" "^run 1 finished$"
not_has() { if grep -q "$3" "$2"; then not_ok "$1" "$(grep "$3" "$2" | head -n 3)"; else ok "$1"; fi; }
not_has "... quietly, as it was hosted" "$tmp/err" "starting over"
b=$(metrics "$tmp/t.db" 1)
[ -n "$ref" ] && [ "$ref" = "$b" ] && ok "... on its own data: the metrics of the run as it was" || not_ok "... the same metrics" "$ref
$b"

# a legacy store: no "hosting"; its recorded command line says how it was hosted
copy "$db" "$tmp/l.db"
sqlite3 "$tmp/l.db" "update runs set status = 'interrupted' where id = 1; delete from params where run = 1 and key = 'hosting'"
check "a legacy store's run resumes from its recorded command line" 0 "$NB" run --resume 1 --from-scratch --db "$tmp/l.db"
b=$(metrics "$tmp/l.db" 1)
[ -n "$ref" ] && [ "$ref" = "$b" ] && ok "... with its data directory: the same metrics" || not_ok "... the same metrics" "$ref
$b"
not_has "... quietly" "$tmp/err" "starting over"
copy "$db" "$tmp/lt.db"
sqlite3 "$tmp/lt.db" "update runs set status = 'interrupted' where id = 1; delete from params where run = 1 and key = 'hosting'"
tamper "$tmp/lt.db" 1 "$tmp/d" || not_ok "the legacy store's command line was changed"
check "... whose recorded command line lost its --data-dir looks in the default one" 1 "$NB" run --resume 1 --from-scratch --db "$tmp/lt.db"
has "... and says so" "$tmp/err" "cannot open '$tmp/empty/multi30k/"
has "... not quietly (the command line is what it read)" "$tmp/err" "starting over"

# a hosting that is not valid is refused by name, not read around
copy "$db" "$tmp/bad.db"
sqlite3 "$tmp/bad.db" "update runs set status = 'interrupted' where id = 1; update params set value = '{\"threads\": \"many\"}' where run = 1 and key = 'hosting'"
check "a stored hosting that is not valid is refused" 1 "$NB" run --resume 1 --from-scratch --db "$tmp/bad.db"
has "... naming it" "$tmp/err" "^error: run 1 cannot be resumed: its hosting lacks a member or has one not valid"

# ---- resume from a checkpoint: bit-exact, as hosted ----------------------------------------------
k=$tmp/k.db
args="mnist --dataset synthetic --subset 1000 --batch 32 --epochs 4 --norm rms --log-every 7 --threads 1 --quiet"
check "an uninterrupted run" 0 "$NB" run $args --db "$k"
"$NB" run $args --db "$k" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 2400); do [ -e "$k-checkpoints/run-2.ckpt" ] && break; sleep 0.05; done
sleep 0.3
kill -KILL $pid
wait $pid 2>/dev/null
kref=$(metrics "$k" 1)
copy "$k" "$tmp/kt.db"
tamper "$tmp/kt.db" 2 none || not_ok "the killed run's command line was changed"
check "a run killed after a checkpoint, its command line changed, resumes" 0 "$NB" run --resume 2 --db "$tmp/kt.db"
has "... and finishes" "$tmp/out" "^run 2 finished$"
not_has "... quietly, as it was hosted" "$tmp/err" "resuming from its checkpoint"
b=$(metrics "$tmp/kt.db" 2)
[ -n "$kref" ] && [ "$kref" = "$b" ] && ok "... recording what the uninterrupted run recorded" || not_ok "... the same metrics" "$kref
$b"
copy "$k" "$tmp/kl.db"
sqlite3 "$tmp/kl.db" "delete from params where run = 2 and key = 'hosting'"
check "the same run of a legacy store resumes" 0 "$NB" run --resume 2 --db "$tmp/kl.db"
b=$(metrics "$tmp/kl.db" 2)
[ -n "$kref" ] && [ "$kref" = "$b" ] && ok "... recording what the uninterrupted run recorded" || not_ok "... the same metrics" "$kref
$b"

# ---- translate loads the model as hosted -----------------------------------------------------------
echo "the dog runs ." >"$tmp/src"
check "translate a finished run" 0 "$NB" translate 1 --db "$db" <"$tmp/src"
cp "$tmp/out" "$tmp/tr.ref"
copy "$db" "$tmp/tr.db"
tamper "$tmp/tr.db" 1 "$tmp/d" || not_ok "the translated run's command line was changed"
check "... the same run, its command line changed" 0 "$NB" translate 1 --db "$tmp/tr.db" <"$tmp/src"
cmp -s "$tmp/out" "$tmp/tr.ref" && ok "... translates the same" || not_ok "... translates the same"
sqlite3 "$tmp/tr.db" "update params set value = 'not json' where run = 1 and key = 'hosting'"
check "... its stored hosting not valid: refused" 2 "$NB" translate 1 --db "$tmp/tr.db" <"$tmp/src"
has "... naming it" "$tmp/err" "its hosting is not a JSON object"

# ---- under MPI: a sweep's resumed job, a data-parallel resume -------------------------------------
if ! command -v mpirun >/dev/null 2>&1; then
    n=$((n + 1))
    echo "ok $n # skip mpirun is not installed"
    echo "1..$n"
    exit $((fails > 0))
fi
mpi_local
cd "$tmp" || exit 1
sw="mt --norms layer --seeds 1 --data-dir $tmp/d --no-fetch --bpe-merges 50 --dim-word 16 --dim 32 --batch 16 --threads 1 --steps 4 --eval-every 2"
check "a plain sweep" 0 "$NB" sweep $sw --db sw.db
check "the same sweep over 2 ranks" 0 $MPIRUN -np 2 "$NB" sweep $sw --db msw.db
a=$(param sw.db 1 hosting | sed 's/sw\.db/DB/')
b=$(param msw.db 1 hosting | sed 's/msw\.db/DB/')
[ -n "$a" ] && [ "$a" = "$b" ] && ok "... records the hosting the plain sweep records" || not_ok "... the same hosting" "$a
$b"
swref=$(metrics msw.db 1)
sqlite3 msw.db "update runs set status = 'interrupted' where id = 1"
tamper msw.db 1 "$tmp/d" || not_ok "the sweep's run's command line was changed"
check "the MPI sweep again resumes its run, its command line changed" 0 $MPIRUN -np 2 "$NB" sweep $sw --db msw.db
[ "$(sqlite3 msw.db "select status from runs where id = 1")" = finished ] && ok "... and finishes it" || not_ok "... and finishes it" "$(tail -n 5 "$tmp/err")"
b=$(metrics msw.db 1)
[ -n "$swref" ] && [ "$swref" = "$b" ] && ok "... on its own data: the same metrics" || not_ok "... the same metrics" "$swref
$b"

check "a data-parallel run (2 ranks)" 0 $MPIRUN -np 2 "$NB" run $m30 --db dp.db
dpref=$(metrics dp.db 1)
sqlite3 dp.db "update runs set status = 'interrupted' where id = 1"
tamper dp.db 1 "$tmp/d" || not_ok "the data-parallel run's command line was changed"
check "its data-parallel resume, its command line changed" 0 $MPIRUN -np 2 "$NB" run --resume 1 --from-scratch --db dp.db
has "... finishes" "$tmp/out" "^run 1 finished$"
b=$(metrics dp.db 1)
[ -n "$dpref" ] && [ "$dpref" = "$b" ] && ok "... on its own data: the same metrics" || not_ok "... the same metrics" "$dpref
$b"

echo "1..$n"
exit $((fails > 0))
