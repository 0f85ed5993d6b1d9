#!/bin/bash
# The speed cells of the README's answer table, measured again and kept (issue 33): for mt
# (RNNSearch 256/512 and the Transformer's small preset, at the sizes of their results pages),
# cifar, order and reader, `normbench bench step TASK` over every norm the task takes, with the
# options of the pages' historical speed sections, its --format csv output kept as
# docs/results/<task>-bench-<cpu>.csv (rows end with the machine and the date), then shown
# through `normbench bench --from` to check it. A results page makes the file a generated block
# with `<!-- generated: normbench bench --from docs/results/<task>-bench-<cpu>.csv --format md -->`.
#
# Run it on a quiet machine (nothing else running: the ratios are medians over interleaved steps,
# but a busy machine widens their intervals), from the repository's root, after `make`.
#
# Usage: tools/speed-cells.sh [-n] [TASK...]   (TASK: mt-rnnsearch mt-transformer cifar order
#        reader; default all, in that order; -n: print the commands, run nothing)
# Environment: NB (the binary, ./normbench), OUT (where the CSVs go, docs/results), CPU (the
#   file names' <cpu>, default from /proc/cpuinfo's model name: xeon, epyc, ...), THREADS (2, as
#   the historical runs), STEPS (timed steps per norm for every task; default each task's
#   historical count, below), STEPS_<TASK> (one task's, e.g. STEPS_CIFAR=10).
#
# Expected time, from the historical per-step times on a 2-vCPU AMD EPYC (warm-up: at least 5
# steps and 0.3 s per norm; then the GEMM floor, a few seconds), 7 norms each:
#   mt-rnnsearch   30 steps, 0.6-1.0 s a step     2.5-4 min
#   mt-transformer 15 steps, 0.6-1.25 s a step    1.5-3 min
#   cifar           3 steps, 1.0-1.5 s a step     1-1.5 min
#   order          10 steps, 0.2-0.33 s a step    0.5 min
#   reader         80 steps, 0.34-0.5 s a step    3.5-5 min
# about 9-14 minutes in all. Tried with STEPS=2 on the 2-core Intel Xeon of this project, 2026-11-28
# 04:38-05:26 UTC under a load average of 14-20 (other sessions' builds and benchmarks): every
# command ran and its CSV showed through `bench --from`, in 605 s (mt-rnnsearch), 425 s
# (mt-transformer), 1,548 s (cifar), 207-440 s (order) and 470 s (reader), steps 5-30 s each:
# under such a load the times say nothing; run it quiet.
set -u
dry=0
if [ "${1:-}" = "-n" ]; then dry=1; shift; fi
NB=${NB:-./normbench}
OUT=${OUT:-docs/results}
THREADS=${THREADS:-2}
norms=none,batch,weight,layer,rms,prms,dyt
if [ -z "${CPU:-}" ]; then
    model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1 | tr '[:upper:]' '[:lower:]')
    case "$model" in
    *epyc*) CPU=epyc ;;
    *xeon*) CPU=xeon ;;
    *ryzen*) CPU=ryzen ;;
    *core*) CPU=core ;;
    *) CPU=$(printf '%s' "$model" | sed 's/([^)]*)//g; s/[^a-z0-9]\+/-/g; s/^-//; s/-.*//') ;;
    esac
    [ -n "$CPU" ] || CPU=cpu
fi
case "$CPU" in *[!a-z0-9-]*) echo "$0: CPU '$CPU': letters, digits and - only" >&2; exit 2 ;; esac

# task -> the bench step arguments after TASK, and the historical steps
args_of() {
    case "$1" in
    mt-rnnsearch) echo "mt --model rnnsearch --dim-word 256 --dim 512" ;;
    mt-transformer) echo "mt --model transformer --preset small --batch 133" ;;
    cifar) echo "cifar" ;;
    order) echo "order" ;;
    reader) echo "reader" ;;
    *) return 1 ;;
    esac
}
steps_of() {
    local def var
    case "$1" in
    mt-rnnsearch) def=30 var=STEPS_MT_RNNSEARCH ;;
    mt-transformer) def=15 var=STEPS_MT_TRANSFORMER ;;
    cifar) def=3 var=STEPS_CIFAR ;;
    order) def=10 var=STEPS_ORDER ;;
    reader) def=80 var=STEPS_READER ;;
    esac
    echo "${!var:-${STEPS:-$def}}"
}

tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=(mt-rnnsearch mt-transformer cifar order reader)
for t in "${tasks[@]}"; do
    args_of "$t" >/dev/null || { echo "$0: unknown task '$t' (mt-rnnsearch mt-transformer cifar order reader)" >&2; exit 2; }
done
if [ $dry -eq 0 ]; then
    [ -x "$NB" ] || { echo "$0: no '$NB': run make first (or set NB)" >&2; exit 2; }
    [ -d "$OUT" ] || { echo "$0: no directory '$OUT'" >&2; exit 2; }
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "# $(date -u +%FT%TZ) load average $load; $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $THREADS threads; CSVs to $OUT/*-bench-$CPU.csv" >&2
    awk -v l="$load" 'BEGIN { exit !(l > 1.0) }' &&
        echo "# warning: load average $load: not a quiet machine; the intervals will be wide" >&2
fi
unset OPENBLAS_CORETYPE # let OpenBLAS choose its kernels (a forced older core halves sgemm)
failed=0
tmpfile=
trap '[ -n "$tmpfile" ] && rm -f "$tmpfile"; exit 130' INT TERM # no half CSV left behind
for t in "${tasks[@]}"; do
    file="$OUT/$t-bench-$CPU.csv"
    steps=$(steps_of "$t")
    read -r -a targs <<<"$(args_of "$t")"
    cmd=(env OMP_NUM_THREADS="$THREADS" "$NB" bench step "${targs[@]}" --norms "$norms" --steps "$steps" --threads "$THREADS" --format csv)
    if [ $dry -eq 1 ]; then
        echo "${cmd[*]} > $file"
        continue
    fi
    start=$(date +%s)
    echo "# $t: ${cmd[*]}" >&2
    # the CSV goes to a temporary beside it and into place only when the benchmark succeeded
    tmpfile="$file.tmp"
    if "${cmd[@]}" >"$tmpfile" && "$NB" bench --from "$tmpfile" >&2; then
        mv "$tmpfile" "$file"
        tmpfile=
        echo "# $t: $file written in $(($(date +%s) - start)) s; load average now $(cut -d' ' -f1 /proc/loadavg)" >&2
    else
        rm -f "$tmpfile"
        tmpfile=
        echo "# $t: failed after $(($(date +%s) - start)) s; nothing written" >&2
        failed=1
    fi
done
exit $failed
