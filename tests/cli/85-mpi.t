#!/bin/bash
# normbench under Open MPI's mpirun on one machine (TAP, for prove): sweeps over ranks write the
# same runs as without MPI, rank 0 alone holds the store, an interrupted or killed MPI sweep
# resumes, and so does an interrupted data-parallel run. Every MPI command gets --threads 1, so
# that the runs compare with the plain ones.
set -u
. "$(dirname "$0")/lib.sh"

mpi_local
unset NORMBENCH_DB
# Under ASan (make asan) every rank runs ~10x slower and oversubscribes the cores: the data-
# parallel agreement checks run on 3 ranks only (2 ranks are checked in the optimized build)
# and the job killed on rank 1 trains 400 steps instead of 1,000; everything else is the same.
dpnp="2 3"
[ $asan = 1 ] && dpnp=3
quick="--dataset synthetic --subset 1000 --batch 32 --steps 12 --threads 1"

# The runs of a store as text, run by run (norm, seed): the configuration, then every metric
# except the timings (ms_per_step, epoch_seconds, allreduce_ms_per_step) and the wall clock.
dump() {
    sqlite3 "$1" "select norm, seed, config from runs order by norm, seed;
        select r.norm, r.seed, m.name, m.step, m.kind, quote(m.value) from metrics m
        join runs r on r.id = m.run where m.name not in ('ms_per_step', 'epoch_seconds',
        'allreduce_ms_per_step')
        order by r.norm, r.seed, m.name, m.step;"
}

check "the plain sweep" 0 "$NB" sweep mnist --norms rms,layer --seeds 2 $quick --db "$tmp/plain.db"
dump "$tmp/plain.db" >"$tmp/plain.txt"
for np in 1 2 3; do
    check "mpirun -np $np sweep exits 0" 0 $MPIRUN -np $np "$NB" sweep mnist --norms rms,layer \
        --seeds 2 $quick --db "$tmp/np$np.db"
    has "-np $np: every job finished" "$tmp/out" '^sweep: 4 jobs: 4 finished now, 0 finished before'
    [ "$np" -gt 1 ] && has "-np $np: rank 1 trained a job" "$tmp/err" 'started on rank 1 '
    [ "$np" -gt 1 ] && has "-np $np: rank 0 trained a job" "$tmp/err" 'started on rank 0 '
    dump "$tmp/np$np.db" >"$tmp/np$np.txt"
    if [ -s "$tmp/plain.txt" ] && cmp -s "$tmp/plain.txt" "$tmp/np$np.txt"; then
        ok "-np $np: the same runs as without MPI (configuration and every metric)"
    else
        not_ok "-np $np: the same runs as without MPI" "$(diff "$tmp/plain.txt" "$tmp/np$np.txt" | head -n 8)"
    fi
    c=$(sqlite3 "$tmp/np$np.db" "select count(distinct pid) from runs")
    [ "$c" = 1 ] && ok "-np $np: rank 0 is every run's process (the claimant)" \
        || not_ok "-np $np: one process holds every run ($c)"
done
ls "$tmp"/np3.db* >"$tmp/files" 2>&1
[ "$(grep -c . "$tmp/files")" -le 3 ] && ok "no store but rank 0's was made" || not_ok "stray stores" "$(cat "$tmp/files")"
c=$(sqlite3 "$tmp/np3.db" "select count(*) from runs where provenance like '%\"omp_max_threads\":1,%'")
[ "$c" = 4 ] && ok "every run's provenance is its rank's (threads 1)" || not_ok "the ranks' provenance ($c of 4)"

check "the same MPI sweep again skips everything" 0 $MPIRUN -np 2 "$NB" sweep mnist --norms rms,layer \
    --seeds 2 $quick --db "$tmp/np2.db"
has "nothing ran again" "$tmp/out" '^sweep: 4 jobs: 0 finished now, 4 finished before'
check "--jobs under MPI is a usage error" 2 $MPIRUN -np 1 "$NB" sweep mnist --norms rms --seeds 1 \
    --jobs 2 $quick --db "$tmp/u.db"
has "it says to start more ranks" "$tmp/err" 'mpirun -np N'

check "mpirun -np 1 run" 0 $MPIRUN -np 1 "$NB" run mnist --norm rms $quick --db "$tmp/r1.db" --quiet
check "the same run without MPI" 0 "$NB" run mnist --norm rms $quick --db "$tmp/r0.db" --quiet
if cmp -s <(dump "$tmp/r0.db") <(dump "$tmp/r1.db"); then ok "one rank: identical to a plain run"
else not_ok "one rank: identical to a plain run" "$(diff <(dump "$tmp/r0.db") <(dump "$tmp/r1.db") | head)"; fi

# Interrupted: SIGINT to mpirun once two runs have a checkpoint (rank 0's and another rank's),
# then the same sweep again: every job finishes once, under its run id, and the runs are those
# of a sweep that was never interrupted (resumed bit-exactly, also on the other ranks).
long="--dataset synthetic --subset 1000 --batch 32 --steps 150 --threads 1"
check "the plain sweep (long)" 0 "$NB" sweep mnist --norms none,layer,rms --seeds 1 $long --db "$tmp/lp.db"
NORMBENCH_SWEEP_SUMMARY=0.2 $MPIRUN -np 3 "$NB" sweep mnist --norms none,layer,rms --seeds 1 $long \
    --db "$tmp/li.db" >"$tmp/i1" 2>&1 &
pid=$!
for _ in $(seq 1 900); do
    sleep 0.1
    c=$(sqlite3 "$tmp/li.db" "select count(distinct run) from metrics where name='epoch'" 2>/dev/null)
    [ "${c:-0}" -ge 2 ] && break
done
kill -INT $pid
wait $pid
rc=$?
[ $rc -ne 0 ] && ok "the interrupted MPI sweep exits non-zero" || not_ok "interrupted sweep exit ($rc)"
has "rank 0 prints a periodic summary (jobs, where they run)" "$tmp/i1" '^sweep: [0-9]+ of 3 jobs ended \([0-9]+ finished\), [0-9]+ running: .*on rank'
c=$(sqlite3 "$tmp/li.db" "select count(*) from runs where status='finished'")
[ "${c:-0}" -lt 3 ] && ok "not every job finished before the interrupt" || not_ok "the interrupt came too late ($c)"
c=$(ls "$tmp/li.db-checkpoints" 2>/dev/null | grep -c '\.ckpt$')
[ "$c" -ge 1 ] && ok "rank 0 keeps the checkpoints beside the store ($c)" || not_ok "no checkpoint beside the store"
check "the interrupted MPI sweep run again" 0 $MPIRUN -np 3 "$NB" sweep mnist --norms none,layer,rms \
    --seeds 1 $long --db "$tmp/li.db"
has "it resumed runs" "$tmp/err" 'resumed on rank'
c=$(sqlite3 "$tmp/li.db" "select count(*) from runs")
[ "$c" = 3 ] && ok "three jobs, three runs: each resumed under its id" || not_ok "three runs ($c)"
c=$(sqlite3 "$tmp/li.db" "select count(*) from runs where status='finished'")
[ "$c" = 3 ] && ok "every job finished once" || not_ok "every job finished once ($c)"
if cmp -s <(dump "$tmp/lp.db") <(dump "$tmp/li.db"); then ok "the resumed runs equal the uninterrupted ones"
else not_ok "the resumed runs equal the uninterrupted ones" "$(diff <(dump "$tmp/lp.db") <(dump "$tmp/li.db") | head)"; fi
ls "$tmp/li.db-checkpoints" | grep -q . && not_ok "finished runs leave no checkpoint" \
    || ok "finished runs leave no checkpoint"

# kill -9 of a rank other than 0 while jobs run: Open MPI aborts the job; the store stays whole,
# the jobs that were running are not finished, and the sweep run again finishes them.
# jobs long enough that rank 1 is still training when it is killed, also on a fast machine
ksteps=1000
[ $asan = 1 ] && ksteps=400
klong="--dataset synthetic --subset 1000 --batch 32 --steps $ksteps --threads 1"
$MPIRUN -np 3 "$NB" sweep mnist --norms none,layer,rms --seeds 1 $klong --db "$tmp/k.db" \
    >"$tmp/k1" 2>&1 &
pid=$!
# wait until rank 1 trains: its job started (rank 0 prints which) and has recorded a metric
victim="" knorm=""
for _ in $(seq 1 900); do
    sleep 0.1
    knorm=$(sed -n 's/^\[[0-9]*\/3\] started on rank 1 .* --norm \([a-z]*\) .*/\1/p' "$tmp/k1")
    [ -n "$knorm" ] || continue
    c=$(sqlite3 "$tmp/k.db" "select count(*) from metrics join runs on runs.id = metrics.run
        where runs.norm = '$knorm' and runs.status = 'running'" 2>/dev/null)
    [ "${c:-0}" -ge 1 ] && break
done
for p in $(pgrep -P $pid); do
    grep -q '^OMPI_COMM_WORLD_RANK=1$' <(tr '\0' '\n' <"/proc/$p/environ") 2>/dev/null && victim=$p
done
[ -n "$victim" ] && [ -n "$knorm" ] && ok "rank 1 found (pid $victim, training $knorm)" \
    || not_ok "rank 1 and its job found"
running=$(sqlite3 "$tmp/k.db" "select group_concat(id) from runs where status = 'running'")
kill -9 $victim
wait $pid
rc=$?
[ $rc -ne 0 ] && ok "the MPI sweep with a killed rank exits non-zero" || not_ok "killed rank: exit $rc"
# mpirun returns before every rank is gone: wait (bounded) until no run shows as running
for _ in $(seq 1 40); do
    "$NB" runs --db "$tmp/k.db" 2>/dev/null | grep -q ' running ' || break
    sleep 0.25
done
c=$(sqlite3 "$tmp/k.db" "pragma integrity_check")
[ "$c" = ok ] && ok "the store passes integrity_check" || not_ok "integrity_check" "$c"
# the killed rank's job must not show finished; a job of another rank may have finished before
# Open MPI stopped it, and every run shown finished must then have all its steps
c=$(sqlite3 "$tmp/k.db" "select status from runs where norm = '$knorm'")
[ -n "$c" ] && [ "$c" != finished ] && ok "the killed rank's job is not shown finished ($c)" \
    || not_ok "the killed rank's job shows '$c'"
c=$(sqlite3 "$tmp/k.db" "select count(*) from runs where status = 'finished' and id in (${running:-0})")
[ "$c" = 0 ] && ok "no job that was running at the kill is shown finished (runs $running)" \
    || not_ok "finished runs after the kill ($c of $running)"
c=$(sqlite3 "$tmp/k.db" "select count(*) from runs where status = 'finished' and
    (select max(step) from metrics where run = runs.id and name = 'train_loss') < $ksteps")
[ "$c" = 0 ] && ok "every run shown finished has all its steps" || not_ok "finished runs short of their steps ($c)"
check "runs lists them" 0 "$NB" runs --db "$tmp/k.db"
has "as crashed or interrupted" "$tmp/out" '(crashed|interrupted)'
check "the killed MPI sweep run again" 0 $MPIRUN -np 2 "$NB" sweep mnist --norms none,layer,rms \
    --seeds 1 $klong --db "$tmp/k.db"
c=$(sqlite3 "$tmp/k.db" "select count(*) from runs where status='finished'")
[ "$c" = 3 ] && ok "every job finished" || not_ok "every job finished ($c)"
c=$(sqlite3 "$tmp/k.db" "select count(*) from runs")
[ "$c" = 3 ] && ok "each under its first run id" || not_ok "three runs ($c)"

# ---- data-parallel runs: one run over the ranks -------------------------------------------------
# Agreement with the single-process run: every recorded training loss to 1e-4 relative, the
# final parameters (NORMBENCH_DUMP_PARAMS) to 1e-4 of their largest magnitude.
agree() { # DESC A.db B.db A.bin B.bin [TOLERANCE, relative; 1e-4]
    python3 - "$2" "$3" "$4" "$5" "${6:-1e-4}" <<'PY' >"$tmp/agree" 2>&1
import array, sqlite3, sys
def losses(db):
    c = sqlite3.connect(db)
    return dict(c.execute("select step, value from metrics where name='train_loss'"))
a, b = losses(sys.argv[1]), losses(sys.argv[2])
bad = [] if a and a.keys() == b.keys() else ["steps differ: %d vs %d" % (len(a), len(b))]
tol = float(sys.argv[5])
worst = max((abs(a[k] - b[k]) / abs(a[k]) for k in a if k in b), default=1)
if worst > tol: bad.append("train_loss differs by %.3g relative" % worst)
p = array.array('f', open(sys.argv[3], 'rb').read())
q = array.array('f', open(sys.argv[4], 'rb').read())
if len(p) != len(q) or not p: bad.append("parameter counts differ")
else:
    d = (sum((x - y) ** 2 for x, y in zip(p, q)) / sum(x * x for x in p)) ** 0.5
    if d > tol: bad.append("parameters differ by %.3g (relative L2)" % d)
print("; ".join(bad) if bad else "train_loss within %.2g, parameters %.2g" % (worst, d))
sys.exit(1 if bad else 0)
PY
    if [ $? -eq 0 ]; then ok "$1 ($(cat "$tmp/agree"))"; else not_ok "$1" "$(cat "$tmp/agree")"; fi
}
agrees() { # A.db B.db A.bin B.bin: agree without a test line
    local n0=$n f0=$fails
    agree x "$@" >/dev/null
    local r=$((fails - f0))
    n=$n0
    fails=$f0
    return $r
}
# same_metrics DESC A.db B.db QUERY MIN: the two stores give QUERY's rows alike, at least MIN of
# them (a split evaluation against one process's)
same_metrics() {
    local a b
    a=$(sqlite3 "$2" "$4")
    b=$(sqlite3 "$3" "$4")
    if [ "$(printf '%s\n' "$a" | grep -c .)" -ge "$5" ] && [ "$a" = "$b" ]; then
        ok "$1"
    else
        not_ok "$1" "$(diff <(printf '%s\n' "$a") <(printf '%s\n' "$b") | head -5)"
    fi
}
# 100 steps at lr 1e-4: 1, 2 and 3 ranks agree to ~1e-7 (seeds 1-3). At the default lr 1e-3 the
# rounding of sums split differently is amplified by Adam in some seeds (seed 1: 1.3e-3 at step
# 96 on 2 ranks), as much as 1 against 2 threads in one process: README, "What agrees".
dp="--dataset synthetic --subset 600 --batch 30 --steps 100 --lr 1e-4 --log-every 1 --threads 1 --quiet"
NORMBENCH_DUMP_PARAMS=$tmp/m1.bin "$NB" run mnist --norm batch $dp --db "$tmp/m1.db" >/dev/null
for np in $dpnp; do
    check "mnist --bn-sync on $np ranks" 0 env NORMBENCH_DUMP_PARAMS=$tmp/m$np.bin $MPIRUN -np $np \
        "$NB" run mnist --norm batch --bn-sync $dp --db "$tmp/m$np.db"
    agree "mnist --bn-sync: $np ranks agree with one process for 100 steps" "$tmp/m1.db" "$tmp/m$np.db" "$tmp/m1.bin" "$tmp/m$np.bin"
done
cmp -s "$tmp/m3.bin" "$tmp/m3.bin.rank1" && cmp -s "$tmp/m3.bin" "$tmp/m3.bin.rank2" \
    && ok "every rank holds the same parameters, bit for bit" || not_ok "the ranks' parameters differ"
c=$(sqlite3 "$tmp/m3.db" "select count(*) from runs"); [ "$c" = 1 ] && ok "one run recorded, by rank 0" || not_ok "one run ($c)"
has "run prints its result once" "$tmp/out" '^run 1 finished$'
[ "$(grep -c '^run ' "$tmp/out")" = 1 ] && ok "and only once" || not_ok "result lines" "$(cat "$tmp/out")"
c=$(sqlite3 "$tmp/m3.db" "select json_extract(config, '\$.ranks') || ' ' || json_array_length(config, '\$.hosts') || ' ' || json_extract(config, '\$.bn_statistics') from runs")
[ "$c" = "3 3 global" ] && ok "the configuration records ranks, hosts and the BN statistics" || not_ok "ranks/hosts in the config ($c)"
c=$(sqlite3 "$tmp/m3.db" "select value from tags where key='variant'")
[ "$c" = "--bn-sync" ] && ok "sync BN is its own variant in report" || not_ok "variant ($c)"
check "mnist with per-rank BN on 3 ranks" 0 env NORMBENCH_DUMP_PARAMS=$tmp/mp.bin $MPIRUN -np 3 \
    "$NB" run mnist --norm batch $dp --db "$tmp/mp.db"
agrees "$tmp/m1.db" "$tmp/mp.db" "$tmp/m1.bin" "$tmp/mp.bin" \
    && not_ok "per-rank BN differs from sync BN" "$(cat "$tmp/agree")" \
    || ok "per-rank BN differs from sync BN: the option is real ($(cat "$tmp/agree"))"
c=$(sqlite3 "$tmp/mp.db" "select json_extract(config, '\$.bn_statistics') from runs")
[ "$c" = per-rank ] && ok "per-rank BN is recorded" || not_ok "per-rank BN recorded ($c)"
uneven="--dataset synthetic --subset 600 --batch 10 --steps 100 --lr 1e-4 --log-every 1 --threads 1 --quiet"
NORMBENCH_DUMP_PARAMS=$tmp/u1.bin "$NB" run mnist --norm batch $uneven --db "$tmp/u1.db" >/dev/null
check "batch 10 on 3 ranks (4, 3, 3 rows)" 0 env NORMBENCH_DUMP_PARAMS=$tmp/u3.bin $MPIRUN -np 3 \
    "$NB" run mnist --norm batch --bn-sync $uneven --db "$tmp/u3.db"
# Batch 10 with BN over 4, 3 and 3 rows: the last-bit differences of the split sums grow with
# the steps (Adam divides by small second moments). On an Intel Xeon (family 6 model 207,
# OpenBLAS's SkylakeX kernels) they reached 3.4e-4 relative by step 97 (the AMD machines of
# earlier stops passed a 1e-4 bound), so this check allows 1e-3, still far below what a real
# difference in the statistics gives (per-rank BN against sync BN above: 0.8).
agree "an uneven split agrees too" "$tmp/u1.db" "$tmp/u3.db" "$tmp/u1.bin" "$tmp/u3.bin" 1e-3
# cifar: the ConvPool-CNN-C at width 0.125 with noise, dropout and max-pooling, 100 steps at its
# own learning rate (3e-3). Its dropout and noise are drawn per example (the stream of the
# example's row in the whole batch), one gemm per image and the gradients summed image by image in
# double (--grad-sums example, the default), so the ranks compute what one process computes: the
# parameters agree bit for bit (README, "What agrees"); with float gemms over groups of images
# (--grad-sums batch) max-pool and leaky-ReLU switches amplify last-bit differences to ~1e-3.
cf="--dataset synthetic --width 0.125 --subset 300 --batch 30 --steps 100 --log-every 1 --threads 1 --quiet"
NORMBENCH_DUMP_PARAMS=$tmp/c1.bin "$NB" run cifar --norm batch $cf --db "$tmp/c1.db" >/dev/null
for np in $dpnp; do
    check "cifar --bn-sync on $np ranks" 0 env NORMBENCH_DUMP_PARAMS=$tmp/c$np.bin $MPIRUN -np $np \
        "$NB" run cifar --norm batch --bn-sync $cf --db "$tmp/c$np.db"
    agree "cifar --bn-sync: $np ranks agree with one process for 100 steps" "$tmp/c1.db" "$tmp/c$np.db" "$tmp/c1.bin" "$tmp/c$np.bin"
    cmp -s "$tmp/c1.bin" "$tmp/c$np.bin" && ok "cifar on $np ranks: the parameters are those of one process, bit for bit" \
        || not_ok "cifar on $np ranks: parameters bit for bit"
done
cu="--dataset synthetic --width 0.125 --subset 300 --batch 10 --steps 100 --log-every 1 --threads 1 --quiet"
NORMBENCH_DUMP_PARAMS=$tmp/cu1.bin "$NB" run cifar --norm layer $cu --db "$tmp/cu1.db" >/dev/null
check "cifar, batch 10 on 3 ranks (4, 3, 3 images)" 0 env NORMBENCH_DUMP_PARAMS=$tmp/cu3.bin $MPIRUN -np 3 \
    "$NB" run cifar --norm layer $cu --db "$tmp/cu3.db"
agree "cifar: an uneven split agrees too" "$tmp/cu1.db" "$tmp/cu3.db" "$tmp/cu1.bin" "$tmp/cu3.bin"
cmp -s "$tmp/cu1.bin" "$tmp/cu3.bin" && ok "cifar uneven split: parameters bit for bit" \
    || not_ok "cifar uneven split: parameters bit for bit"
# reader: the attentive reader's dropout masks come from per-row streams and each rank pads its
# rows to its own longest passage; float gemms of other shapes round differently (no exact sums
# here), so the agreement is to rounding, not bit for bit
rd="--dataset synthetic --subset 600 --batch 30 --steps 60 --log-every 1 --threads 1 --quiet"
NORMBENCH_DUMP_PARAMS=$tmp/r1.bin "$NB" run reader --norm layer $rd --db "$tmp/r1.db" >/dev/null
for np in $dpnp; do
    check "reader on $np ranks" 0 env NORMBENCH_DUMP_PARAMS=$tmp/r$np.bin $MPIRUN -np $np \
        "$NB" run reader --norm layer $rd --db "$tmp/r$np.db"
    agree "reader: $np ranks agree with one process for 60 steps" "$tmp/r1.db" "$tmp/r$np.db" "$tmp/r1.bin" "$tmp/r$np.bin"
done
check "reader refuses --bn-sync" 1 $MPIRUN -np 2 "$NB" run reader --norm batch --bn-sync $rd --db "$tmp/rb.db"
grep -q "reader cannot take BatchNorm statistics over the ranks" "$tmp/err" \
    && ok "reader --bn-sync: the message says why" || not_ok "reader --bn-sync message" "$(head -3 "$tmp/err")"
# order: every rank embeds its rows, the sums over the ranks of zero-filled buffers gather the
# whole batch's embeddings (exactly), and each rank backpropagates the whole batch's contrastive
# loss through its own rows. The gradients are summed in float, so the runs agree to rounding
# (~1e-6 over 15 steps, the loss from 84 to 16); later, as the loss nears zero, its hinges switch
# on last-bit differences and the runs part (README, "What agrees": 1e-4 from step 21 under
# ASan, step 30 in the optimized build). A 50% error in one caption's gradient on rank 1 shows
# here as 9e-3.
ord="--dataset synthetic --subset 600 --batch 30 --steps 15 --lr 1e-4 --eval-batch 64 --log-every 1 --threads 1 --quiet"
NORMBENCH_DUMP_PARAMS=$tmp/o1.bin "$NB" run order --norm layer $ord --db "$tmp/o1.db" >/dev/null
for np in $dpnp; do
    check "order on $np ranks" 0 env NORMBENCH_DUMP_PARAMS=$tmp/o$np.bin $MPIRUN -np $np \
        "$NB" run order --norm layer $ord --db "$tmp/o$np.db"
    agree "order: $np ranks agree with one process for 15 steps" "$tmp/o1.db" "$tmp/o$np.db" "$tmp/o1.bin" "$tmp/o$np.bin"
done
cmp -s "$tmp/o3.bin" "$tmp/o3.bin.rank2" && ok "order: every rank holds the same parameters" \
    || not_ok "order: the ranks' parameters differ"
# evaluation is split over the ranks by whole chunks of --eval-batch rows: with parameters that
# do not move (lr 1e-12), every validation and test metric is one process's
oz="--dataset synthetic --subset 600 --batch 30 --steps 2 --lr 1e-12 --eval-batch 64 --threads 1 --quiet"
"$NB" run order --norm rms $oz --db "$tmp/oz1.db" >/dev/null
check "order evaluated on 3 ranks" 0 $MPIRUN -np 3 "$NB" run order --norm rms $oz --db "$tmp/oz3.db"
same_metrics "order: the split evaluation gives one process's metrics" "$tmp/oz1.db" "$tmp/oz3.db" \
    "select name, quote(value) from metrics where name like 'val%' or name like 'test%' order by name" 20
check "order refuses --bn-sync" 1 $MPIRUN -np 2 "$NB" run order --norm batch --bn-sync $ord --db "$tmp/ob.db"
grep -q "order cannot take BatchNorm statistics over the ranks" "$tmp/err" \
    && ok "order --bn-sync: the message says why" || not_ok "order --bn-sync message" "$(head -3 "$tmp/err")"
# mt: the batcher draws the same batch everywhere, each rank trains on its share of the batch's
# sentences (each padded to its own longest) with their own dropout streams, and the loss is
# divided by the whole batch's sentences. RNNSearch with word dropout; the Transformer with its
# dropout (0.3) and token batches (a varying number of sentences per batch).
mtr="--dataset synthetic --subset 600 --dim-word 32 --dim 64 --batch 30 --steps 30 --lr 1e-4 --dropout-source 0.2 --dropout-target 0.2 --eval-every 30 --val-bleu-max 40 --test-max 40 --eval-batch 16 --log-every 1 --threads 1 --quiet"
mtt="--model transformer --dataset synthetic --subset 600 --layers 2 --dim 32 --heads 2 --ffn 64 --batch-tokens 300 --steps 30 --lr 0.5 --eval-every 30 --val-bleu-max 40 --test-max 40 --eval-batch 16 --log-every 1 --threads 1 --quiet"
for m in r t; do
    a=$mtr; [ $m = t ] && a=$mtt
    name=rnnsearch; [ $m = t ] && name=transformer
    NORMBENCH_DUMP_PARAMS=$tmp/mt${m}1.bin "$NB" run mt --norm layer $a --db "$tmp/mt${m}1.db" >/dev/null
    for np in $dpnp; do
        check "mt $name on $np ranks" 0 env NORMBENCH_DUMP_PARAMS=$tmp/mt$m$np.bin $MPIRUN -np $np \
            "$NB" run mt --norm layer $a --db "$tmp/mt$m$np.db"
        agree "mt $name: $np ranks agree with one process for 30 steps" "$tmp/mt${m}1.db" "$tmp/mt$m$np.db" "$tmp/mt${m}1.bin" "$tmp/mt$m$np.bin"
    done
done
c=$(sqlite3 "$tmp/mtt3.db" "select value from params where key = 'dropout_streams'")
[ "$c" = per-sentence ] && ok "mt records its per-sentence dropout streams" || not_ok "dropout_streams recorded ($c)"
# evaluation is split over the ranks (val_xent, and BLEU from the sums of its statistics): with
# parameters that do not move, every metric is one process's
mz="--dataset synthetic --subset 600 --dim-word 32 --dim 64 --batch 30 --steps 2 --lr 1e-12 --eval-every 2 --val-bleu-max 40 --test-max 40 --eval-batch 8 --threads 1 --quiet"
"$NB" run mt --norm rms $mz --db "$tmp/mz1.db" >/dev/null
check "mt evaluated on 3 ranks" 0 $MPIRUN -np 3 "$NB" run mt --norm rms $mz --db "$tmp/mz3.db"
same_metrics "mt: the split evaluation gives one process's metrics" "$tmp/mz1.db" "$tmp/mz3.db" \
    "select name, printf('%.9g', value) from metrics where name like '%bleu' or name = 'val_xent' order by name, step" 3
check "mt refuses --bn-sync" 1 $MPIRUN -np 2 "$NB" run mt --norm batch --bn-sync $mtr --db "$tmp/mb.db"
grep -q "mt cannot take BatchNorm statistics over the ranks" "$tmp/err" \
    && ok "mt --bn-sync: the message says why" || not_ok "mt --bn-sync message" "$(head -3 "$tmp/err")"
c=$(sqlite3 "$tmp/c3.db" "select json_extract(config, '\$.grad_sums') from runs")
[ "$c" = example ] && ok "cifar records how its gradients were summed" || not_ok "grad_sums recorded ($c)"
# ---- a data-parallel run interrupted, then resumed ------------------------------------------------
# Ctrl-C on mpirun: Open MPI sends the ranks SIGCONT, SIGTERM odls_base_sigkill_timeout (1 s)
# later, and SIGKILL as long after that; a rank stops at its next step on SIGTERM and rank 0
# records the run as interrupted. So that the interrupt comes at a known point on any machine, the
# ranks are frozen (SIGSTOP) once the first checkpoint exists and given the SIGTERM mpirun would
# send; SIGINT to mpirun then wakes them (its SIGCONT), and a longer kill timeout (10 s) leaves a
# slow machine the time to record. (mpirun waits out both timeouts even when the ranks are gone:
# 60 s cost this file 4 minutes.) The resumed run must record what the uninterrupted one does.
rdp="--dataset synthetic --subset 150 --batch 30 --steps 60 --lr 1e-4 --log-every 1 --threads 1 --quiet"
check "the uninterrupted data-parallel run (2 ranks)" 0 env NORMBENCH_DUMP_PARAMS=$tmp/ru.bin \
    $MPIRUN -np 2 "$NB" run mnist --norm batch --bn-sync $rdp --db "$tmp/ru.db"
env OMPI_MCA_odls_base_sigkill_timeout=10 $MPIRUN -np 2 "$NB" run mnist --norm batch --bn-sync $rdp \
    --db "$tmp/ri.db" >"$tmp/ri.out" 2>"$tmp/ri.err" &
pid=$!
for _ in $(seq 1 2400); do [ -e "$tmp/ri.db-checkpoints/run-1.ckpt" ] && break; sleep 0.05; done
ranks=$(pgrep -P $pid)
kill -STOP $ranks
c=$(sqlite3 "$tmp/ri.db" "select status from runs")
[ "$c" = running ] && [ -e "$tmp/ri.db-checkpoints/run-1.ckpt" ] \
    && ok "a checkpoint exists and the run is still running ($(echo $ranks | wc -w) ranks frozen)" \
    || not_ok "the run is running with a checkpoint ($c)"
kill -TERM $ranks
kill -INT $pid
wait $pid
rc=$?
[ $rc -ne 0 ] && ok "the interrupted data-parallel run exits non-zero" || not_ok "interrupted run exit ($rc)"
# mpirun may return before every rank is gone: wait (bounded) until none is left
for _ in $(seq 1 400); do kill -0 $ranks 2>/dev/null || break; sleep 0.05; done
c=$(sqlite3 "$tmp/ri.db" "select status || ' ' || (select max(step) from metrics where name = 'train_loss') from runs")
[ "${c% *}" = interrupted ] && [ "${c#* }" -lt 60 ] && ok "it is recorded interrupted (at step ${c#* })" \
    || not_ok "recorded interrupted ($c)" "$(tail -n 5 "$tmp/ri.err")"
[ -e "$tmp/ri.db-checkpoints/run-1.ckpt" ] && ok "its checkpoint is kept" || not_ok "its checkpoint is kept"
for k in 2 3 1; do # copies of the interrupted store: resumed on 2 and 3 ranks, and in one process
    cp "$tmp/ri.db" "$tmp/ri$k.db"
    cp -r "$tmp/ri.db-checkpoints" "$tmp/ri$k.db-checkpoints"
done
# the other ranks take the checkpoint from rank 0 over MPI, into a private copy under TMPDIR
mkdir "$tmp/rtmp"
check "--resume on 2 ranks" 0 env TMPDIR=$tmp/rtmp NORMBENCH_DUMP_PARAMS=$tmp/r2.bin $MPIRUN -np 2 \
    "$NB" run --resume 1 --db "$tmp/ri2.db"
has "it finishes the same run" "$tmp/out" '^run 1 finished$'
[ "$(grep -c '^run ' "$tmp/out")" = 1 ] && ok "rank 0 alone prints the result" || not_ok "result lines" "$(cat "$tmp/out")"
c=$(sqlite3 "$tmp/ri2.db" "select count(*) || ' ' || count(distinct step) || ' ' || min(step) || ' ' || max(step)
    from metrics where name = 'train_loss'")
[ "$c" = "60 60 1 60" ] && ok "every step recorded once" || not_ok "every step recorded once ($c)"
c=$(sqlite3 "$tmp/ri2.db" "select count(*) || ' ' || status || ' ' || json_extract(config, '\$.ranks') from runs")
[ "$c" = "1 finished 2" ] && ok "one run, finished, its configuration kept" || not_ok "one finished run ($c)"
if cmp -s <(dump "$tmp/ru.db") <(dump "$tmp/ri2.db"); then ok "the resumed run recorded what the uninterrupted one did"
else not_ok "the resumed run recorded what the uninterrupted one did" "$(diff <(dump "$tmp/ru.db") <(dump "$tmp/ri2.db") | head)"; fi
cmp -s "$tmp/ru.bin" "$tmp/r2.bin" && cmp -s "$tmp/r2.bin" "$tmp/r2.bin.rank1" \
    && ok "its final parameters are the uninterrupted run's, bit for bit, on every rank" \
    || not_ok "the resumed run's final parameters"
ls "$tmp/ri2.db-checkpoints" | grep -q . && not_ok "the finished run leaves no checkpoint" \
    || ok "the finished run leaves no checkpoint"
[ -z "$(ls "$tmp/rtmp")" ] && ok "rank 1 removed its copy of the checkpoint" || not_ok "copies left" "$(ls -R "$tmp/rtmp")"
# the update does not depend on the ranks with --bn-sync: another count continues the same model
check "--resume on 3 ranks" 0 env NORMBENCH_DUMP_PARAMS=$tmp/r3.bin $MPIRUN -np 3 "$NB" run \
    --resume 1 --db "$tmp/ri3.db"
agree "resumed on 3 ranks, it agrees with the uninterrupted run" "$tmp/ru.db" "$tmp/ri3.db" "$tmp/ru.bin" "$tmp/r3.bin"
c=$(sqlite3 "$tmp/ri3.db" "select value from params where key = 'resumed_on_ranks'")
[[ "$c" =~ ^3\ from\ step\ [0-9]+$ ]] && ok "the other rank count is recorded ($c)" || not_ok "resumed_on_ranks ($c)"
check "--resume in one process" 0 env NORMBENCH_DUMP_PARAMS=$tmp/r1.bin "$NB" run --resume 1 --db "$tmp/ri1.db" --quiet
agree "resumed in one process, it agrees with the uninterrupted run" "$tmp/ru.db" "$tmp/ri1.db" "$tmp/ru.bin" "$tmp/r1.bin"

# wait_rows DB SQL: waits (at most 2 minutes) until the count SQL returns is at least 1
wait_rows() {
    for _ in $(seq 1 2400); do
        c=$(sqlite3 "$1" "$2" 2>/dev/null)
        [ "${c:-0}" -ge 1 ] && return 0
        sleep 0.05
    done
    return 1
}
# per-rank BatchNorm is another model on another number of ranks: such a resume is refused
# (--from-scratch: the refusal comes before any checkpoint is needed)
env OMPI_MCA_odls_base_sigkill_timeout=10 $MPIRUN -np 2 "$NB" run mnist --norm batch --dataset synthetic \
    --subset 150 --batch 30 --steps 100000 --threads 1 --quiet --db "$tmp/pr.db" >/dev/null 2>&1 &
pid=$!
wait_rows "$tmp/pr.db" "select count(*) from metrics"
ranks=$(pgrep -P $pid)
kill -TERM $ranks
wait $pid
for _ in $(seq 1 400); do kill -0 $ranks 2>/dev/null || break; sleep 0.05; done
check "per-rank BN of 2 ranks resumed on 3 is refused" 2 $MPIRUN -np 3 "$NB" run --resume 1 --from-scratch --db "$tmp/pr.db"
has "it says why" "$tmp/err" '^error: run 1 took its BatchNorm statistics per rank over 2 ranks'
has "and how to resume it" "$tmp/err" "^hint: resume it on 2 ranks: 'mpirun -np 2 normbench run --resume 1'"
[ "$(grep -c '^error' "$tmp/err")" = 1 ] && ok "one rank says it" || not_ok "errors" "$(cat "$tmp/err")"
check "... and in one process too" 2 "$NB" run --resume 1 --from-scratch --db "$tmp/pr.db"
"$NB" run mnist --norm batch --dataset synthetic --subset 150 --batch 30 --steps 100000 --threads 1 \
    --quiet --db "$tmp/pr.db" >/dev/null 2>&1 &
pid=$!
wait_rows "$tmp/pr.db" "select count(*) from metrics where run = 2"
kill -INT $pid
wait $pid
check "BN over the whole batch of one process, resumed on 2 ranks (per rank) is refused" 2 \
    $MPIRUN -np 2 "$NB" run --resume 2 --from-scratch --db "$tmp/pr.db"
has "it says why" "$tmp/err" '^error: run 2 took its BatchNorm statistics over the whole batch'

check "a batch smaller than the ranks is a usage error" 2 $MPIRUN -np 3 "$NB" run mnist --batch 2 \
    --dataset synthetic --subset 100 --steps 2 --threads 1 --db "$tmp/x.db"
has "it says so" "$tmp/err" 'smaller than the number of ranks'

# a rank that fails alone (rank 0: the store cannot be made) stops every rank, which would
# otherwise wait for it in a collective (timeout: what a hang gets)
check "rank 0 failing alone stops the run" 1 timeout 120 $MPIRUN -np 2 "$NB" run mnist \
    --dataset synthetic --subset 100 --steps 2 --threads 1 --db "$tmp/no/such/dir/x.db"
has "it says why" "$tmp/err" "^error: cannot create results store"

echo "1..$n"
[ $fails -eq 0 ]
