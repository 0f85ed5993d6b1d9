#!/bin/bash
# Files replaced whole (util/file.h): a writer killed in the middle of a write leaves the old file
# (or none), never a mix of old and new, and the next writer removes the temporary it left.
# NORMBENCH_FAULT_KILL_WRITE=NAME[:N] is the test hook: the Nth write of a file named NAME cuts
# its temporary to half of what was written and kills the process (SIGKILL) just before the
# rename, as a crash or `kill -9` in the middle of the write would (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
case $NB in /*) ;; *) NB=$PWD/$NB ;; esac
unset NORMBENCH_DB NORMBENCH_FAULT_KILL_WRITE
cd "$tmp" || exit 1
S="--dataset synthetic --threads 1 --quiet --subset 300"
# the temporaries in a directory: util/file.h's (.NAME.tmp.normbench.PID) and earlier ones (NAME.tmp.PID)
temps() { ls -a "$1" | grep -E '\.tmp\.' || true; }

# 1. A report written with --out: killed, the old report is left whole.
"$NB" run mnist $S --steps 4 --log-every 2 --db s.db --norm layer >/dev/null 2>&1 || not_ok "a run"
check "a report" 0 "$NB" report --db s.db --format html --out r.html
cp r.html r.old
"$NB" run mnist $S --steps 4 --log-every 2 --db s.db --norm rms >/dev/null 2>&1 || not_ok "another run"
check "the next report, killed in the middle of its write" 137 env NORMBENCH_FAULT_KILL_WRITE=r.html "$NB" report --db s.db --format html --out r.html
cmp -s r.html r.old && ok "the old report is left whole" || not_ok "the old report is left whole"
t=$(temps . | grep -E '^\.r\.html\.tmp\.normbench\.[0-9]+$')
[ -n "$t" ] && [ -s "$t" ] && ok "the killed writer's temporary is there, part-written ($t)" \
    || not_ok "the killed writer's temporary is there" "$(ls -a)"
[ -n "$t" ] && cp "$t" half
# a live writer's temporary (this shell's) is another writer at work: kept; a dead one's removed
: >".r.html.tmp.normbench.$$"
: >".r.html.tmp.normbench.2147483646"
check "the report again" 0 "$NB" report --db s.db --format html --out r.html
cmp -s r.html r.old && not_ok "the new report is written" || ok "the new report is written"
[ -e half ] && head -c "$(stat -c %s half)" r.html | cmp -s - half \
    && ok "what the killed writer had written was the start of the new report, never in place" \
    || not_ok "the killed writer's bytes were the start of the new report"
left=$(temps . | grep -v "\.$$\$")
[ -z "$left" ] && ok "no temporary is left by the killed writer" || not_ok "no temporary is left by the killed writer" "$left"
[ -e ".r.html.tmp.normbench.$$" ] && ok "a live writer's temporary is kept" || not_ok "a live writer's temporary is kept"
rm -f ".r.html.tmp.normbench.$$"

# 2. A checkpoint: the run killed while writing its second one resumes from its first, whole,
# and records what an uninterrupted run records; no temporary is left after the resumed run.
export NORMBENCH_DB=$tmp/c.db
metrics() { sqlite3 "$NORMBENCH_DB" "select group_concat(name||':'||step||':'||value, ' ') from (select * from metrics where run = $1 and name not in ('ms_per_step', 'epoch_seconds') order by name, step)"; }
args="mnist $S --batch 32 --epochs 4 --norm batch --log-every 3"
check "an uninterrupted run" 0 "$NB" run $args
ck=$NORMBENCH_DB-checkpoints
check "the same run, killed in the middle of writing its second checkpoint" 137 env NORMBENCH_FAULT_KILL_WRITE=run-2.ckpt:2 "$NB" run $args
[ -s "$ck/run-2.ckpt" ] && ok "its first checkpoint is in place" || not_ok "its first checkpoint is in place" "$(ls -a "$ck")"
t=$(temps "$ck")
[ -n "$t" ] && ok "the killed writer's temporary is there ($t)" || not_ok "the killed writer's temporary is there" "$(ls -a "$ck")"
check "resume" 0 "$NB" run --resume 2 --quiet
has "the run finishes" "$tmp/out" "^run 2 finished$"
a=$(metrics 1)
b=$(metrics 2)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "it records what the uninterrupted run recorded" \
    || not_ok "it records what the uninterrupted run recorded" "$a
$b"
[ -z "$(temps "$ck")" ] && ok "no temporary checkpoint is left" || not_ok "no temporary checkpoint is left" "$(ls -a "$ck")"

echo "1..$n"
exit $((fails > 0))
