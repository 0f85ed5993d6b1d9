#!/bin/bash
# A store locked by another process while a run trains (TAP, for prove): the run's writes wait
# for the lock (NORMBENCH_STORE_WAIT seconds in all, 120 by default) instead of failing after
# SQLite's 10 s; past the wait the run fails with a message that names `normbench run --resume
# ID --db PATH`, the run is left resumable, and --resume then completes it.
set -u
. "$(dirname "$0")/lib.sh"

unset NORMBENCH_DB NORMBENCH_STORE_WAIT
if ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # skip python3 is missing (it holds the lock)"
    exit 0
fi
# the run: long enough that the lock comes while it trains, on a loaded machine too
r="run mnist --dataset synthetic --subset 1000 --batch 32 --steps 400 --log-every 5 --threads 1 --quiet"

# lock DB SECONDS READY WHEN: once the store's first run has recorded a training loss (WHEN
# 'loss') or written its first checkpoint (WHEN 'ckpt'), holds the store's write lock (BEGIN
# EXCLUSIVE) for SECONDS, writing READY when it holds it
lock() {
    python3 - "$1" "$2" "$3" "$4" <<'PY'
import os, sqlite3, sys, time
db, hold, ready, when = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
for _ in range(1200):
    try:
        c = sqlite3.connect(db, timeout=0.05, isolation_level=None)
        if (os.path.exists(db + "-checkpoints/run-1.ckpt") if when == "ckpt" else
                c.execute("select count(*) from metrics").fetchone()[0] > 0):
            break
        c.close()
    except sqlite3.Error:
        pass
    time.sleep(0.05)
c.execute("BEGIN EXCLUSIVE")
open(ready, "w").close()
time.sleep(hold)
c.execute("ROLLBACK")
PY
}

# 1. locked for 12 s, more than SQLite's busy timeout of 10 s the writes used to fail after: the
# run waits and finishes
lock "$tmp/a.db" 12 "$tmp/a.ready" loss &
lp=$!
t0=$(date +%s)
check "a store locked for 12 s: the run waits and finishes" 0 "$NB" $r --db "$tmp/a.db"
wait $lp
[ -e "$tmp/a.ready" ] && ok "the lock was taken while the run trained" \
    || not_ok "the lock was taken while the run trained"
[ $(($(date +%s) - t0)) -ge 12 ] && ok "the run waited for it" || not_ok "the run waited ($(($(date +%s) - t0)) s)"
c=$(sqlite3 "$tmp/a.db" "select status from runs")
[ "$c" = finished ] && ok "recorded as finished" || not_ok "recorded as finished ($c)"

# 2. locked past the wait (3 s here): the run fails, naming --resume with the run and the store;
# the run is left resumable, and --resume completes it once the store is free
lock "$tmp/b.db" 8 "$tmp/b.ready" ckpt &
lp=$!
check "a store locked past the wait: the run fails" 1 env NORMBENCH_STORE_WAIT=3 "$NB" $r --db "$tmp/b.db"
has "the error says the store is locked" "$tmp/err" "^error: cannot .* in results store '$tmp/b.db': database is locked"
has "the hint names --resume with the run and the store" "$tmp/err" \
    "^hint: the run is kept with its last checkpoint: .*'normbench run --resume 1 --db $tmp/b.db'"
wait $lp
[ -e "$tmp/b.ready" ] && ok "the lock was taken while the run trained" \
    || not_ok "the lock was taken while the run trained"
cmd=$(sed -n "s/^hint: .*'\(normbench run --resume [^']*\)'.*/\1/p" "$tmp/err" | head -n 1)
check "the hint's command completes the run" 0 "$NB" ${cmd#normbench } --quiet
c=$(sqlite3 "$tmp/b.db" "select status from runs")
[ "$c" = finished ] && ok "recorded as finished, under the same id" || not_ok "finished under the same id ($c)"
c=$(sqlite3 "$tmp/b.db" "select count(*) from runs")
[ "$c" = 1 ] && ok "one run" || not_ok "one run ($c)"

# 3. the same before the run's first checkpoint: the hint says to start it over under its id
lock "$tmp/c.db" 4 "$tmp/c.ready" loss &
lp=$!
check "locked before the first checkpoint: the run fails" 1 env NORMBENCH_STORE_WAIT=1 "$NB" $r \
    --db "$tmp/c.db"
has "the hint names --resume --from-scratch" "$tmp/err" \
    "^hint: the run is kept: .*'normbench run --resume 1 --from-scratch --db $tmp/c.db'"
wait $lp
cmd=$(sed -n "s/^hint: .*'\(normbench run --resume [^']*\)'.*/\1/p" "$tmp/err" | head -n 1)
check "the hint's command completes the run" 0 "$NB" ${cmd#normbench } --quiet
c=$(sqlite3 "$tmp/c.db" "select group_concat(id || ' ' || status) from runs")
[ "$c" = "1 finished" ] && ok "recorded as finished, under the same id" || not_ok "finished under the same id ($c)"

echo "1..$n"
[ $fails -eq 0 ]
