#!/bin/bash
# `normbench run --resume`: a run killed after an epoch continues from its checkpoint and
# records exactly what an uninterrupted run records (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
db=$tmp/r.db
export NORMBENCH_DB=$db
# every metric but the timings, in order
metrics() { sqlite3 "$db" "select group_concat(name||':'||step||':'||value, ' ') from (select * from metrics where run = $1 and name not in ('ms_per_step', 'epoch_seconds') order by name, step)"; }
ckpt() { echo "$db-checkpoints/run-$1.ckpt"; }

# Under ASan (make asan, ~10x slower) the runs are shorter: killed after their first epoch's
# checkpoint either way, they resume for the rest (mnist 8 epochs, 3 under ASan; cifar 3, 2 under ASan).
me=8 ce=3
[ $asan = 1 ] && me=3 ce=2
for norm in weight batch rms; do
    args="mnist --dataset synthetic --subset 4000 --batch 32 --epochs $me --norm $norm --log-every 7 --quiet"
    check "$norm: uninterrupted run" 0 "$NB" run $args
    ref=$(sqlite3 "$db" "select max(id) from runs")
    [ ! -e "$(ckpt "$ref")" ] && ok "$norm: a finished run leaves no checkpoint" || not_ok "$norm: a finished run leaves no checkpoint"
    "$NB" run $args >/dev/null 2>&1 &
    pid=$!
    id=$((ref + 1))
    for _ in $(seq 1 2400); do [ -e "$(ckpt $id)" ] && break; sleep 0.05; done
    sleep 0.3
    kill -KILL $pid
    wait $pid 2>/dev/null
    s=$(sqlite3 "$db" "select status from runs where id = $id")
    [ "$s" = running ] && ok "$norm: a killed run is left 'running' in the store" || not_ok "$norm: killed run status ($s)"
    check "$norm: runs shows it as crashed" 0 "$NB" runs
    has "$norm: crashed" "$tmp/out" "^ *$id .* crashed "
    check "$norm: resume" 0 "$NB" run --resume $id --quiet
    has "$norm: resume finishes the same run" "$tmp/out" "^run $id finished$"
    a=$(metrics "$ref")
    b=$(metrics "$id")
    [ -n "$a" ] && [ "$a" = "$b" ] && ok "$norm: resumed run recorded the same metrics as the uninterrupted one" \
        || not_ok "$norm: resumed run recorded the same metrics" "$a
$b"
done

# The cifar task (a narrow ConvPool-CNN-C on synthetic images): noise, dropout, BN running
# averages and the schedule's position all come back.
for norm in weight batch; do
    args="cifar --dataset synthetic --subset 400 --width 0.125 --epochs $ce --norm $norm --log-every 3 --quiet"
    check "cifar $norm: uninterrupted run" 0 "$NB" run $args
    ref=$(sqlite3 "$db" "select max(id) from runs")
    "$NB" run $args >/dev/null 2>&1 &
    pid=$!
    id=$((ref + 1))
    for _ in $(seq 1 2400); do [ -e "$(ckpt $id)" ] && break; sleep 0.05; done
    sleep 0.1
    kill -KILL $pid
    wait $pid 2>/dev/null
    check "cifar $norm: resume" 0 "$NB" run --resume $id --quiet
    a=$(metrics "$ref")
    b=$(metrics "$id")
    [ -n "$a" ] && [ "$a" = "$b" ] && ok "cifar $norm: resumed run recorded the same metrics as the uninterrupted one" \
        || not_ok "cifar $norm: resumed run recorded the same metrics" "$a
$b"
done

check "resuming a finished run fails" 1 "$NB" run --resume 1
has "it says the run finished" "$tmp/err" "finished already"
check "resume with other options is a usage error" 2 "$NB" run --resume 1 --norm rms
check "resuming an unknown run fails" 1 "$NB" run --resume 999

# A run stopped inside its first epoch has no checkpoint.
"$NB" run mnist --dataset synthetic --subset 4000 --batch 4 --epochs 2 --quiet >/dev/null 2>&1 &
pid=$!
sleep 0.7
kill -INT $pid
wait $pid
id=$(sqlite3 "$db" "select max(id) from runs")
check "resuming a run without a checkpoint fails" 1 "$NB" run --resume "$id"
has "it says there is no checkpoint" "$tmp/err" "has no checkpoint"
has "and why" "$tmp/err" "^hint: checkpoints are written at the end of each epoch"

# A damaged checkpoint is refused.
"$NB" run mnist --dataset synthetic --subset 2000 --batch 32 --epochs 20 --quiet >/dev/null 2>&1 &
pid=$!
id=$(( $(sqlite3 "$db" "select max(id) from runs") + 1 ))
for _ in $(seq 1 2400); do [ -e "$(ckpt $id)" ] && break; sleep 0.05; done
sleep 0.2
kill -KILL $pid
wait $pid 2>/dev/null
printf 'XXXX' | dd of="$(ckpt $id)" bs=1 seek=100 conv=notrunc 2>/dev/null
check "a damaged checkpoint is refused" 1 "$NB" run --resume "$id"
has "as damaged" "$tmp/err" "is damaged"

echo "1..$n"
[ $fails -eq 0 ]
