#!/bin/bash
# An MPI sweep hands each job to a rank as its configuration (the JSON the store records for a
# run, which the rank builds the job from: run/job.h's nb_job_from_config), not as a `run`
# argument vector that the rank parses again (issue 32); checked on the tree, and by the runs:
# over two ranks a sweep records what the same sweep records without MPI (configuration,
# recorded arguments, tags, every metric), new runs and a run it starts over under its id
# (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)

# ---- the tree: no rank rebuilds an argument vector -----------------------------------------
hits=$(grep -n 'x1f' "$root/run/mpi.c")
[ -z "$hits" ] && ok "run/mpi.c splits no job into arguments" || not_ok "run/mpi.c splits no job into arguments" "$hits"
grep -q 'typedef int (\*nb_mpi_job_fn)(const nb_mpi_job \*job,' "$root/run/mpi.h" \
    && ok "a rank's job function takes the job, no argc/argv" \
    || not_ok "nb_mpi_job_fn takes no argument vector" "$(grep -n -A1 'nb_mpi_job_fn)' "$root/run/mpi.h")"
body=$(awk '/^static int rank_job\(/ { on = 1 } on { print } on && /^}/ { exit }' "$root/cmd/cmd_sweep.c")
if [ -n "$body" ] && echo "$body" | grep -q 'nb_run_job_from_config' \
    && ! echo "$body" | grep -q 'nb_run_job_build\|nb_run_parse\|argv'; then
    ok "a rank builds every job from its configuration"
else
    not_ok "a rank builds every job from its configuration" "$body"
fi
grep -q 'char \*config;' "$root/run/mpi.h" && grep -q 'put_str(&m, job->config);' "$root/run/mpi.c" \
    && ok "the job's message carries its configuration" || not_ok "the job's message carries its configuration"

# ---- the runs: the same as without MPI -------------------------------------------------------
mpi_local
unset NORMBENCH_DB
quick="--dataset synthetic --subset 600 --batch 16,32 --steps 8 --threads 1"
# per run (norm, batch from the configuration, seed): configuration, tags, recorded arguments
# with the store's name taken out, status, then every metric but the timings
dump() {
    sqlite3 "$1" "select norm, seed, status, config from runs order by norm, config, seed;
        select r.norm, r.seed, t.key, t.value from tags t join runs r on r.id = t.run
        order by r.norm, r.config, r.seed, t.key;
        select r.norm, r.seed, replace(p.value, '$2', 'DB') from params p join runs r on r.id = p.run
        where p.key = 'argv' order by r.norm, r.config, r.seed;
        select r.norm, r.seed, m.name, m.step, m.kind, quote(m.value) from metrics m
        join runs r on r.id = m.run where m.name not in ('ms_per_step', 'epoch_seconds',
        'allreduce_ms_per_step') order by r.norm, r.config, r.seed, m.name, m.step;"
}
same() { # DESC A B
    if [ -s "$2" ] && cmp -s "$2" "$3"; then ok "$1"; else not_ok "$1" "$(diff "$2" "$3" | head -n 8)"; fi
}
cd "$tmp" || exit 1
check "the plain sweep" 0 "$NB" sweep mnist --norms rms,layer --seeds 1 $quick --db plain.db
check "the same sweep over 2 ranks" 0 $MPIRUN -np 2 "$NB" sweep mnist --norms rms,layer --seeds 1 $quick --db mpi.db
has "  rank 1 trained a job" "$tmp/err" 'started on rank 1 '
has "  rank 0 trained a job" "$tmp/err" 'started on rank 0 '
dump plain.db plain.db >plain.txt
dump mpi.db mpi.db >mpi.txt
grep -q 'variant|--batch 16' mpi.txt && grep -q 'sweep|mnist --norm rms' mpi.txt \
    && ok "  the runs carry their sweep tag and variant" || not_ok "  the sweep tag and variant" "$(head -n 12 mpi.txt)"
same "  the same runs as without MPI: configuration, tags, arguments, metrics" plain.txt mpi.txt

# the user's own --variant (no list of values): on every rank's runs, as without MPI
check "a plain sweep with --variant" 0 "$NB" sweep mnist --norms rms,layer --seeds 1 --variant mylabel \
    --dataset synthetic --subset 600 --batch 16 --steps 8 --threads 1 --db plainv.db
check "the same over 2 ranks" 0 $MPIRUN -np 2 "$NB" sweep mnist --norms rms,layer --seeds 1 --variant mylabel \
    --dataset synthetic --subset 600 --batch 16 --steps 8 --threads 1 --db mpiv.db
has "  rank 1 trained a job" "$tmp/err" 'started on rank 1 '
c=$(sqlite3 mpiv.db "select count(*) from tags where key = 'variant' and value = 'mylabel'")
[ "$c" = 2 ] && ok "  both runs carry the variant" || not_ok "  both runs carry the variant ($c)"
dump plainv.db plainv.db >plainv.txt
dump mpiv.db mpiv.db >mpiv.txt
same "  the same runs as without MPI" plainv.txt mpiv.txt

# a job whose run did not finish is started over under its id (no checkpoint): built on its rank
# from the configuration stored with it
sqlite3 mpi.db "update runs set status = 'interrupted'"
check "the MPI sweep again" 0 $MPIRUN -np 2 "$NB" sweep mnist --norms rms,layer --seeds 1 $quick --db mpi.db
has "  every job ran again under its run id" "$tmp/out" '^sweep: 4 jobs: 4 finished now, 0 finished before'
has "  rank 1 took one" "$tmp/err" 'resumed on rank 1 '
c=$(sqlite3 mpi.db "select count(*) from runs where status = 'finished'")
[ "$c" = 4 ] && ok "  the four runs, finished" || not_ok "  four runs, finished ($c)"
dump mpi.db mpi.db >again.txt
same "  and they recorded what they did the first time" plain.txt again.txt

echo "1..$n"
exit $((fails > 0))
