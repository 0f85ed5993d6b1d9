#!/bin/bash
# A data-parallel run's ranks agree before the first step (TAP, for prove): on the configuration
# (options given differently per rank under MPMD `mpirun -np 1 ... : -np 1 ...`) and on the data
# each rank loaded; a rank whose set-up fails stops every rank. Each case must end within
# seconds on every rank (no rank left waiting in a collective), name what differs, and record no
# run (options) or a failed run with the reason (data: rank 0 loaded its data and began the
# record before the ranks compared them).
set -u
. "$(dirname "$0")/lib.sh"

mpi_local
unset NORMBENCH_DB
q="--dataset synthetic --subset 200 --batch 32 --steps 4 --threads 1 --quiet"
# mpirun, bounded: a rank left waiting shows as exit 124
MPI="timeout 60 $MPIRUN"
runs() { sqlite3 "$1" "select count(*) from runs" 2>/dev/null || echo 0; }

# one option given differently on the two ranks: "OPTION VALUE0 VALUE1 KEY SHOWN0 SHOWN1"
for c in '--lr 1e-3 1e-2 lr 0.001 0.01' '--norm layer rms norm "layer" "rms"' '--seed 1 2 seed 1 2' \
    '--clip 1 2 clip_global 1 2'; do
    read -r opt v0 v1 key s0 s1 <<<"$c"
    db="$tmp/o$opt.db"
    t0=$(date +%s)
    check "$opt $v0 : $opt $v1 is refused" 2 $MPI -np 1 "$NB" run mnist $q --db "$db" $opt "$v0" : \
        -np 1 "$NB" run mnist $q --db "$db" $opt "$v1"
    [ $(($(date +%s) - t0)) -le 30 ] && ok "$opt: every rank ended within seconds" \
        || not_ok "$opt: every rank ended within seconds ($(($(date +%s) - t0)) s)"
    has "$opt: the message names the option and both values" "$tmp/err" \
        "^error: the ranks were given different options: $key is $s0 on rank 0 but $s1 on rank 1 \\($opt\\)"
    has "$opt: rank 1 says it stops" "$tmp/err" '^error: rank 1 stops: its options differ'
    [ "$(runs "$db")" = 0 ] && ok "$opt: no run recorded" || not_ok "$opt: no run recorded ($(runs "$db"))"
done

# three ranks, the last one different: every rank says why it stops
check "-np 2 --lr 1e-3 : -np 1 --lr 1e-2 is refused" 2 $MPI -np 2 "$NB" run mnist $q --db "$tmp/3.db" \
    --lr 1e-3 : -np 1 "$NB" run mnist $q --db "$tmp/3.db" --lr 1e-2
has "rank 0 names rank 2" "$tmp/err" '^error: the ranks were given different options: lr is 0.001 on rank 0 but 0.01 on rank 2'
has "rank 1 says rank 2 differs" "$tmp/err" "^error: rank 1 stops: rank 2's options differ from rank 0's"
has "rank 2 says it differs" "$tmp/err" "^error: rank 2 stops: its options differ from rank 0's"

# --bn-sync on one rank only: BatchNorm's statistics differ (the collectives too)
check "--bn-sync on one rank only is refused" 2 $MPI -np 1 "$NB" run mnist $q --norm batch \
    --db "$tmp/bn.db" --bn-sync : -np 1 "$NB" run mnist $q --norm batch --db "$tmp/bn.db"
has "it names --bn-sync" "$tmp/err" 'bn_statistics is "global" on rank 0 but "per-rank" on rank 1 \(--bn-sync\)'

# what may differ per rank: --threads (and --quiet, --db): the run trains
check "--threads 1 : --threads 2 trains" 0 $MPI -np 1 "$NB" run mnist --dataset synthetic --subset 200 \
    --batch 32 --steps 4 --threads 1 --quiet --db "$tmp/t.db" : -np 1 "$NB" run mnist \
    --dataset synthetic --subset 200 --batch 32 --steps 4 --threads 2 --db "$tmp/t.db"
[ "$(sqlite3 "$tmp/t.db" "select status from runs")" = finished ] && ok "and finishes" \
    || not_ok "the run finishes"

# a rank whose set-up fails (an option it cannot parse) stops every rank (it used to leave rank 0
# waiting for it forever)
check "a rank with a bad option stops every rank" 2 $MPI -np 1 "$NB" run mnist $q --db "$tmp/b.db" \
    --lr 1e-3 : -np 1 "$NB" run mnist $q --db "$tmp/b.db" --lr abc
has "rank 1 says what is wrong" "$tmp/err" "^error: option '--lr' expects a number, not 'abc'"
has "rank 0 says rank 1 could not set up" "$tmp/err" '^error: rank 1 could not set up the run'
[ "$(runs "$tmp/b.db")" = 0 ] && ok "no run recorded" || not_ok "no run recorded"

# --resume on one rank, a new run on the other
check "--resume on one rank only is refused" 2 $MPI -np 1 "$NB" run mnist $q --db "$tmp/t.db" : \
    -np 1 "$NB" run --resume 1 --db "$tmp/t.db"
has "it says how the ranks were started" "$tmp/err" \
    '^error: the ranks were started differently: rank 0 starts a new run, rank 1 resumes run 1'
[ "$(runs "$tmp/t.db")" = 1 ] && ok "no run recorded" || not_ok "no run recorded ($(runs "$tmp/t.db"))"

# The data: two directories of MNIST files (IDX, 5,100 training and 100 test images), A and a
# copy of it elsewhere (the same data: allowed), and B (other pixels).
mk() { # DIR SEED
    mkdir -p "$1/mnist"
    python3 - "$1/mnist" "$2" <<'PY'
import random, struct, sys
d, seed = sys.argv[1], int(sys.argv[2])
rnd = random.Random(seed)
def idx(name, n, image):
    with open(f"{d}/{name}", "wb") as f:
        if image:
            f.write(struct.pack(">IIII", 0x803, n, 28, 28))
            f.write(bytes(rnd.randrange(256) for _ in range(n * 784)))
        else:
            f.write(struct.pack(">II", 0x801, n))
            f.write(bytes(rnd.randrange(10) for _ in range(n)))
idx("train-images-idx3-ubyte", 5100, 1)
idx("train-labels-idx1-ubyte", 5100, 0)
idx("t10k-images-idx3-ubyte", 100, 1)
idx("t10k-labels-idx1-ubyte", 100, 0)
PY
}
if command -v python3 >/dev/null 2>&1; then
    mk "$tmp/A" 1 && mk "$tmp/B" 2 && cp -r "$tmp/A" "$tmp/A2"
    d="--dataset mnist --subset 100 --batch 32 --steps 4 --threads 1 --quiet --no-fetch"
    check "the same data under two --data-dirs trains" 0 $MPI -np 1 "$NB" run mnist $d \
        --data-dir "$tmp/A" --db "$tmp/d1.db" : -np 1 "$NB" run mnist $d --data-dir "$tmp/A2" \
        --db "$tmp/d1.db"
    [ "$(sqlite3 "$tmp/d1.db" "select status from runs")" = finished ] && ok "and finishes" \
        || not_ok "the run finishes"
    t0=$(date +%s)
    check "other data under the other --data-dir is refused" 1 $MPI -np 1 "$NB" run mnist $d \
        --data-dir "$tmp/A" --db "$tmp/d2.db" : -np 1 "$NB" run mnist $d --data-dir "$tmp/B" \
        --db "$tmp/d2.db"
    [ $(($(date +%s) - t0)) -le 30 ] && ok "every rank ended within seconds" \
        || not_ok "every rank ended within seconds"
    has "the message names the part of the data and both --data-dirs" "$tmp/err" \
        "^error: the ranks loaded different data \\(--data-dir $tmp/A on rank 0, $tmp/B on rank 1\\): rank 0 has train.x [0-9]+ [0-9a-f]{16}, rank 1 has train.x"
    has "rank 1 stops too, saying why" "$tmp/err" "^error: rank 1 stops: the ranks loaded different data \\(--data-dir"
    sqlite3 "$tmp/d2.db" "select status || ': ' || message from runs" >"$tmp/st" 2>&1
    has "the run is recorded as failed, with the reason" "$tmp/st" '^failed: the ranks loaded different data'
    t0=$(date +%s)
    check "a rank without data stops every rank" 1 $MPI -np 1 "$NB" run mnist $d \
        --data-dir "$tmp/A" --db "$tmp/d3.db" : -np 1 "$NB" run mnist $d --data-dir "$tmp/none" \
        --db "$tmp/d3.db"
    [ $(($(date +%s) - t0)) -le 30 ] && ok "every rank ended within seconds" \
        || not_ok "every rank ended within seconds"
    has "rank 1 names what it misses" "$tmp/err" "$tmp/none/mnist"
    has "rank 0 says rank 1 could not set up" "$tmp/err" '^error: rank 1 could not set up the run'
else
    ok "# skip python3 is missing: no IDX files to compare"
fi

echo "1..$n"
[ $fails -eq 0 ]
