#!/bin/bash
# `run --resume` of task lm: a run stopped by Ctrl-C (SIGINT) anywhere — within its first
# evaluation interval and first epoch, or later, past an evaluation and an epoch's end, and twice
# — keeps a checkpoint at the step it stopped, and resumed it records exactly the losses of an
# uninterrupted run (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
db=$tmp/r.db
export NORMBENCH_DB=$db
# 300 steps of 32 windows of 32 characters: an epoch of the synthetic text's 180,000 training
# characters is 175 steps; evaluations at 100, 200, 300
args="lm --dataset synthetic --layers 1 --dim 16 --heads 2 --context 32 --batch 32 --eval-windows 16 --threads 1 --quiet --steps 300 --eval-every 100 --log-every 5"
q() { sqlite3 "$db" "$1"; }
# every metric but the timings, in order
metrics() { q "select group_concat(name||':'||step||':'||value, ' ') from (select * from metrics where run = $1 and name not in ('ms_per_step', 'epoch_seconds', 'tokens_per_s') order by name, step)"; }
last_step() { q "select coalesce(max(step), 0) from metrics where run = $1"; }
# stop RUN-ID AT CMD...: starts CMD, sends SIGINT once run RUN-ID has recorded step AT, waits
stop_at() {
    local id=$1 at=$2
    shift 2
    "$@" >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 1 3000); do
        [ "$(last_step "$id" 2>/dev/null || echo 0)" -ge "$at" ] && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.01
    done
    kill -INT $pid 2>/dev/null
    wait $pid 2>/dev/null
}

check "an uninterrupted run" 0 "$NB" run $args
ref=$(q "select max(id) from runs")
[ ! -e "$db-checkpoints/run-$ref.ckpt" ] && ok "a finished run leaves no checkpoint" || not_ok "a finished run leaves no checkpoint"

# within the first evaluation interval (and the first epoch)
id=$((ref + 1))
stop_at $id 10 "$NB" run $args
s=$(q "select status from runs where id = $id")
at=$(last_step $id)
[ "$s" = interrupted ] && ok "SIGINT stops it (at step $at)" || not_ok "SIGINT stops it (status $s, step $at)"
[ "$at" -lt 100 ] && ok "within the first evaluation interval" || not_ok "within the first evaluation interval (step $at)"
[ -e "$db-checkpoints/run-$id.ckpt" ] && ok "it keeps a checkpoint" || not_ok "it keeps a checkpoint"
check "resume it" 0 "$NB" run --resume $id --quiet
has "it finishes the same run" "$tmp/out" "^run $id finished$"
a=$(metrics "$ref")
b=$(metrics "$id")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "it recorded the losses of the uninterrupted run" \
    || not_ok "it recorded the losses of the uninterrupted run" "$(diff <(echo "$a" | tr ' ' '\n') <(echo "$b" | tr ' ' '\n') | head -n 6)"

# twice: in the first epoch, then resumed and stopped again past an evaluation and an epoch's end
id=$((ref + 2))
stop_at $id 20 "$NB" run $args
at1=$(last_step $id)
stop_at $id 190 "$NB" run --resume $id --quiet
s=$(q "select status from runs where id = $id")
at2=$(last_step $id)
[ "$s" = interrupted ] && [ "$at2" -gt 175 ] && [ "$at2" -lt 300 ] && ok "stopped twice (steps $at1 and $at2)" \
    || not_ok "stopped twice (status $s, steps $at1 and $at2)"
check "resume it again" 0 "$NB" run --resume $id --quiet
b=$(metrics "$id")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "it recorded the losses of the uninterrupted run" \
    || not_ok "it recorded the losses of the uninterrupted run" "$(diff <(echo "$a" | tr ' ' '\n') <(echo "$b" | tr ' ' '\n') | head -n 6)"
check "sample the resumed run" 0 "$NB" sample $id --tokens 20 --seed 1
check "sample the uninterrupted run" 0 "$NB" sample $ref --tokens 20 --seed 1
cp "$tmp/out" "$tmp/s1"
"$NB" sample $id --tokens 20 --seed 1 >"$tmp/s2" 2>/dev/null
cmp -s "$tmp/s1" "$tmp/s2" && ok "both kept the same model" || not_ok "both kept the same model"

echo "1..$n"
[ $fails -eq 0 ]
