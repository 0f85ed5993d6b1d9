#!/bin/bash
# `mpirun -np N normbench bench step TASK` (TAP, for prove): the data-parallel step timed over the
# ranks; rank 0 alone prints, with the allreduce's share of the step and the bytes it sums, which
# must be the model's parameters x 4 (counted here from the layer sizes, not asked of normbench).
set -u
. "$(dirname "$0")/lib.sh"

mpi_local

# The bytes a model's gradients take in the fused buffer: every tensor's floats, each tensor
# starting at a multiple of 16 floats (64 bytes, the parameter layout's alignment), x 4.
# mnist: the MLP 784-1000-1000-10, per layer W and b, and with layer/rms a gain on the hidden
# layers (batch: a gain and the running mean and variance on every layer).
# cifar --width 0.125: ConvPool-CNN-C with 12 and 24 channels, per conv W, gain and bias (batch:
# and the running mean and variance), summed in double (its exact sums, --grad-sums example):
# 8 bytes a value, and none/weight add their W_eff gradients (the W's size again).
cat >"$tmp/expect.py" <<'PY'
import sys
def layout(ns):
    total = 0
    for n in ns:
        total = ((total + 15) // 16) * 16 + n
    return total * 4
def mnist(norm):
    dims, ns = [784, 1000, 1000, 10], []
    for l in range(3):
        hidden = l < 2
        ns += [dims[l] * dims[l + 1], dims[l + 1]]
        if norm == "batch" or (hidden and norm in ("layer", "rms")):
            ns.append(dims[l + 1])
        if norm == "batch":
            ns += [dims[l + 1], dims[l + 1]]
    return layout(ns)
def cifar(norm):
    convs = [(3, 12, 3), (12, 12, 3), (12, 12, 3), (12, 24, 3), (24, 24, 3), (24, 24, 3),
             (24, 24, 3), (24, 24, 1), (24, 24, 1), (24, 10, 1)]
    ns = []
    for c, oc, k in convs:
        ns += [oc * c * k * k, oc, oc]
        if norm == "batch":
            ns += [oc, oc]
    raw = sum(oc * c * k * k for c, oc, k in convs) if norm in ("none", "weight") else 0
    return layout(ns) * 2 + raw * 8
print({"mnist": mnist, "cifar": cifar}[sys.argv[1]](sys.argv[2]))
PY
# checks the JSON of `bench step` under mpirun: one document (rank 0's), ranks, threads, the
# hosts, BLAS in the settings, and per norm an allreduce share in (0, 1) and the expected bytes
cat >"$tmp/check.py" <<'PY'
import json, subprocess, sys
out, task, ranks, bn = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
d = json.load(open(out))  # fails if another rank printed a second document
bad = []
if d.get("ranks") != ranks: bad.append("ranks %r" % d.get("ranks"))
if d.get("threads") != 1: bad.append("threads %r" % d.get("threads"))
if len(d.get("hosts") or []) != ranks: bad.append("hosts %r" % d.get("hosts"))
if d.get("bn_statistics") != bn: bad.append("bn_statistics %r" % d.get("bn_statistics"))
s = d.get("settings", "")
if "ranks=%d" % ranks not in s or "blas=" not in s or "threads=1" not in s:
    bad.append("settings %r" % s)
if not d["results"]: bad.append("no results")
for r in d["results"]:
    want = int(subprocess.check_output([sys.executable, sys.argv[5], task, r["norm"]]))
    share = r.get("allreduce_share")
    if not (isinstance(share, float) and 0 < share < 1):
        bad.append("%s: allreduce_share %r" % (r["norm"], share))
    if not (isinstance(r.get("allreduce_ms"), float) and 0 < r["allreduce_ms"] < r["ms_per_step"]):
        bad.append("%s: allreduce_ms %r" % (r["norm"], r.get("allreduce_ms")))
    if r.get("allreduce_bytes") != want:
        bad.append("%s: allreduce_bytes %r, want %d" % (r["norm"], r.get("allreduce_bytes"), want))
print("; ".join(bad) if bad else "%d rows" % len(d["results"]))
sys.exit(1 if bad else 0)
PY
json_ok() { # DESC TASK RANKS BN
    if python3 "$tmp/check.py" "$tmp/out" "$2" "$3" "$4" "$tmp/expect.py" >"$tmp/why" 2>&1; then
        ok "$1 ($(cat "$tmp/why"))"
    else
        not_ok "$1" "$(cat "$tmp/why"; head -c 600 "$tmp/out")"
    fi
}

quick="--steps 3 --threads 1"
check "mpirun -np 2 bench step mnist (json)" 0 $MPIRUN -np 2 "$NB" bench step mnist \
    --norms layer,none,batch --batch 16 $quick --format json
json_ok "mnist, 2 ranks: one document, ranks/threads/hosts/BLAS, share in (0,1), bytes = params x 4" mnist 2 per-rank
check "mpirun -np 3 bench step cifar --bn-sync, an uneven split (json)" 0 $MPIRUN -np 3 "$NB" \
    bench step cifar --width 0.125 --norms batch,rms --batch 20 --bn-sync $quick --format json
json_ok "cifar, 3 ranks with --bn-sync: the same, BN statistics global" cifar 3 global

check "mpirun -np 2 bench step mnist (csv)" 0 $MPIRUN -np 2 "$NB" bench step mnist --norms layer \
    --batch 16 $quick --format csv
[ "$(grep -c '^task,' "$tmp/out")" = 1 ] && ok "csv: one header (rank 0's)" || not_ok "csv headers" "$(cat "$tmp/out")"
has "csv: the header ends with the data-parallel columns" "$tmp/out" \
    '^task,norm,.*,vs_layer_hi,ranks,allreduce_share,allreduce_ms,allreduce_bytes,machine,date$'
want=$(python3 "$tmp/expect.py" mnist layer)
has "csv: ranks 2, a share in (0,1), the bytes" "$tmp/out" "^mnist,layer,16,.*,2,0\.[0-9]*[1-9][0-9]*,[0-9.]+,$want,(\"[^\"]*\"|[^,]*),[^,]*\$"

check "mpirun -np 2 bench step mnist (table)" 0 $MPIRUN -np 2 "$NB" bench step mnist --norms layer,batch \
    --batch 2 $quick
[ "$(grep -c '^task ' "$tmp/out")" = 1 ] && ok "table: one header (rank 0's)" || not_ok "table headers" "$(cat "$tmp/out")"
has "table: says ranks and threads per rank" "$tmp/out" '^# data-parallel over 2 ranks, 1 threads each'
has "table: the allreduce columns" "$tmp/out" '^task .* allreduce_share +allreduce_ms +allreduce_MB$'
has "table: per-rank BN at 1 row per rank is left out, saying why" "$tmp/out" \
    '^mnist +batch +2 .*per-rank batch norm needs 2 rows per rank, or --bn-sync'

# --against threads: rank 0 alone, with the ranks' threads together, between the rounds
check "mpirun -np 2 bench step mnist --against threads (json)" 0 $MPIRUN -np 2 "$NB" bench step \
    mnist --norms rms --batch 8 $quick --against threads --format json
python3 - "$tmp/out" >"$tmp/why" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"][0]
ok = d.get("one_process_threads") == 2 and r["one_process_ms"] > 0 and \
    abs(r["vs_one_process"] - r["ms_per_step"] / r["one_process_ms"]) < 1e-3 * r["vs_one_process"]
print(d.get("one_process_threads"), r.get("one_process_ms"), r.get("vs_one_process"))
sys.exit(0 if ok else 1)
PY
[ $? -eq 0 ] && ok "--against threads: one process with 2 threads timed, and the ratio" \
    || not_ok "--against threads" "$(cat "$tmp/why"; head -c 600 "$tmp/out")"
check "--against threads without mpirun is a usage error" 2 "$NB" bench step mnist --against threads $quick
has "it says to start it with mpirun" "$tmp/err" 'start it with mpirun'

check "without mpirun: one process (json)" 0 "$NB" bench step mnist --norms layer --batch 4 $quick --format json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d["ranks"] == 1 and "allreduce_share" not in d["results"][0]))' "$tmp/out" \
    && ok "without mpirun: ranks 1, no allreduce fields" || not_ok "one process json" "$(cat "$tmp/out")"

# every task's step benchmark runs over ranks: order (its embeddings gathered), the reader, and
# mt's two models (each rank's sentences as a shard of the batch)
for t in "order --dim 64 --dim-word 32 --batch 8" "reader --dim 32 --batch 8" \
    "mt --dim 64 --dim-word 32 --batch 8" "mt --model transformer --layers 1 --dim 32 --heads 2 --ffn 64 --batch 8"; do
    name=${t%% --batch*}
    check "mpirun -np 2 bench step $name" 0 $MPIRUN -np 2 "$NB" bench step $t --norms layer $quick
    mb=$(awk '$1 != "task" && $2 == "layer" && $3 == 8 {print $NF}' "$tmp/out")
    python3 -c 'import sys; sys.exit(not float(sys.argv[1]) > 0)' "${mb:-0}" 2>/dev/null \
        && ok "$name: the allreduce's bytes ($mb MB)" || not_ok "$name: the allreduce's bytes" "$(cat "$tmp/out" "$tmp/err")"
done
check "bench step mt --bn-sync over ranks is refused" 1 $MPIRUN -np 2 "$NB" bench step mt --norms batch --bn-sync --dim 64 --dim-word 32 --batch 8 $quick
has "it says why" "$tmp/err" 'mt cannot take BatchNorm statistics over the ranks'
check "bench kernels under mpirun is a usage error" 2 $MPIRUN -np 2 "$NB" bench kernels --threads 1
has "it says to run it without mpirun" "$tmp/err" 'without mpirun'
check "a batch smaller than the ranks is a usage error" 2 $MPIRUN -np 3 "$NB" bench step mnist --batch 2 $quick
has "it says so" "$tmp/err" 'smaller than the number of ranks'
check "--bn-sync without mpirun is a usage error" 2 "$NB" bench step mnist --bn-sync $quick

echo "1..$n"
[ $fails -eq 0 ]
