#!/bin/bash
# How the process hosting a run is set up (run/job.h's nb_job_hosting: --db, --data-dir when
# given, --threads, --quiet, --no-fetch, --device, --bn-sync) travels as explicit fields: an MPI
# sweep hands each rank its job's hosting as JSON beside the configuration, and
# nb_job_from_config takes those fields, not an argument vector to parse (issue 32). Checked on
# the tree and by the runs: a --data-dir given is every rank's, and without one each rank's own
# default data directory (NORMBENCH_DATA per rank) is the one its runs record (TAP, for prove).
# (A run started over or resumed keeps the configuration stored first, data_dir included, so
# its hosting is not seen in the store; tools/same-metrics.sh covers those.)
set -u
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)

# ---- the tree ----------------------------------------------------------------------------------
grep -q 'put_str(&m, job->host);' "$root/run/mpi.c" && grep -q 'job.host = get_str(&m);' "$root/run/mpi.c" \
    && ok "the job's message carries its hosting" || not_ok "the job's message carries its hosting"
grep -q 'int nb_job_from_config(nb_job \*j, const char \*config, const nb_job_hosting \*h,' "$root/run/job.h" \
    && ok "nb_job_from_config takes the hosting's fields, no arguments" \
    || not_ok "nb_job_from_config takes the hosting's fields" "$(grep -n 'nb_job_from_config(' "$root/run/job.h")"
body=$(awk '/^static int rank_job\(/ { on = 1 } on { print } on && /^}/ { exit }' "$root/cmd/cmd_sweep.c")
echo "$body" | grep -q 'nb_run_job_from_config(mj->config, mj->host, &j)' \
    && ok "a rank builds its job from the configuration and the hosting" || not_ok "rank_job's hosting" "$body"

# ---- the runs ----------------------------------------------------------------------------------
mpi_local
unset NORMBENCH_DB
cd "$tmp" || exit 1
mkdir -p d0 d1 given
quick="--dataset synthetic --subset 300 --batch 16 --steps 4 --threads 1"
# each rank's default data directory is its own
perrank() { $MPIRUN -np 2 sh -c 'NORMBENCH_DATA="$PWD/d$OMPI_COMM_WORLD_RANK" exec "$0" "$@"' "$@"; }
# every "[K/N] started on rank R ...--norm X --seed Y" line: whether run (X, Y) recorded dR
ranks_match() { # DESC DB ERRFILE
    local bad="" cnt=0
    while read -r r norm seed; do
        cnt=$((cnt + 1))
        d=$(sqlite3 "$2" "select json_extract(config, '\$.data_dir') from runs where norm = '$norm' and seed = $seed")
        [ "$d" = "$tmp/d$r" ] || bad="$bad [$norm $seed on rank $r: $d]"
    done < <(sed -n 's/^\[[0-9]*\/[0-9]*\] \(started\) on rank \([0-9]\) .*--norm \([a-z]*\) --seed \([0-9]*\).*/\2 \3 \4/p' "$3")
    [ "$cnt" -gt 0 ] && [ -z "$bad" ] && ok "$1 ($cnt jobs)" || not_ok "$1" "jobs $cnt:$bad"
}
check "an MPI sweep without --data-dir, a data directory per rank" 0 perrank "$NB" sweep mnist --norms rms,layer \
    --seeds 2 $quick --db s.db
has "  rank 1 trained a job" "$tmp/err" 'started on rank 1 '
cp "$tmp/err" s.err
ranks_match "  each run records its rank's own data directory" s.db s.err

check "an MPI sweep with --data-dir" 0 perrank "$NB" sweep mnist --norms rms,layer --seeds 2 $quick \
    --data-dir "$tmp/given" --db g.db
has "  rank 1 trained a job" "$tmp/err" 'started on rank 1 '
d=$(sqlite3 g.db "select distinct json_extract(config, '\$.data_dir') from runs")
[ "$d" = "$tmp/given" ] && ok "  every run records the directory given" || not_ok "  the directory given" "$d"
echo "1..$n"
exit $((fails > 0))
