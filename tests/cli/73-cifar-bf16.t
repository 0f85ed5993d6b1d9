#!/bin/bash
# cifar's --precision bf16 (nn/gemm_bf16.c: the convolutions' and the dense layer's products with
# inputs rounded to bfloat16, float accumulation): the option's usage, its refusals (with
# Winograd; on a CPU without AVX512-BF16, forced here by the NB_CPU_NO_BF16 test hook), a short
# synthetic run that trains and whose losses follow fp32's within a stated tolerance (the same
# network and data, other rounding), with both gradient-sum modes, and what is recorded.
set -u
. "$(dirname "$0")/lib.sh"
db=$tmp/c.db
export NORMBENCH_DB=$db
losses() { sqlite3 "$db" "select group_concat(value, ' ') from (select value from metrics where run = $1 and name = 'train_loss' order by step)"; }
skip_ok() { n=$((n + 1)); echo "ok $n # skip $1"; }

check "run --help" 0 "$NB" run cifar --help
has "help lists --precision" "$tmp/out" "--precision fp32\\|bf16"
check "a bad --precision is a usage error" 2 "$NB" run cifar --precision fp16
has "it names the choices" "$tmp/err" "bf16"
check "bf16 with Winograd is refused" 2 "$NB" run cifar --dataset synthetic --steps 1 --precision bf16 --conv winograd
has "it says why" "$tmp/err" "im2col engine only, not with --conv winograd"
check "bf16 with --conv auto is refused" 2 "$NB" run cifar --dataset synthetic --steps 1 --precision bf16 --conv auto

# a CPU without AVX512-BF16, forced: refused before anything runs, naming option and feature
check "no AVX512-BF16 (NB_CPU_NO_BF16=1): refused" 2 env NB_CPU_NO_BF16=1 "$NB" run cifar --dataset synthetic --steps 1 --width 0.125 --precision bf16
has "it names the option and the CPU feature" "$tmp/err" "--precision bf16 needs a CPU with AVX512-BF16"
has "and the way out" "$tmp/err" "use --precision fp32"
check "bench step refuses likewise" 2 env NB_CPU_NO_BF16=1 "$NB" bench step cifar --norms layer --batch 4 --steps 1 --precision bf16
check "fp32 runs with the hook set" 0 env NB_CPU_NO_BF16=1 NORMBENCH_DB=$tmp/hook.db "$NB" run cifar --dataset synthetic --width 0.125 --subset 100 --batch 50 --steps 1 --quiet

if ! grep -q -w avx512_bf16 /proc/cpuinfo; then
    # this CPU has none: the refusal without the hook, and the runs below are skipped
    check "no AVX512-BF16 here: refused" 2 "$NB" run cifar --dataset synthetic --steps 1 --width 0.125 --precision bf16
    has "it says so" "$tmp/err" "AVX512-BF16"
    for t in trains follows records batch-sums bench; do skip_ok "bf16 $t: this CPU has no AVX512-BF16"; done
    echo "1..$n"
    [ $fails -eq 0 ]
    exit
fi

# 20 steps of a narrow network (12/24 channels) on 500 synthetic images, batch 50, a loss each
# step: fp32 then bf16, with exact (example, the default) and batched gradient sums. Tolerance:
# each loss within 2% of fp32's (measured: at most 0.5%), and not fp32's bit for bit.
common="--dataset synthetic --width 0.125 --subset 500 --batch 50 --steps 20 --log-every 1 --quiet"
check "fp32: short synthetic run" 0 "$NB" run cifar $common --precision fp32
check "bf16: short synthetic run" 0 "$NB" run cifar $common --precision bf16
check "fp32, batched sums" 0 "$NB" run cifar $common --precision fp32 --grad-sums batch
check "bf16, batched sums" 0 "$NB" run cifar $common --precision bf16 --grad-sums batch
close() {
    awk -v a="$1" -v b="$2" 'BEGIN { na = split(a, x, " "); nb = split(b, y, " "); if (na != 20 || nb != 20) exit 1
        for (i = 1; i <= na; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (!(d <= 0.02 * x[i])) exit 1 } }'
}
for pair in "1 2" "3 4"; do
    set -- $pair
    a=$(losses $1) b=$(losses $2)
    close "$a" "$b" && ok "run $2: twenty losses within 2% of fp32's (run $1)" || not_ok "run $2: twenty losses within 2% of fp32's" "fp32: $a
bf16: $b"
    [ -n "$b" ] && [ "$a" != "$b" ] && ok "run $2: not fp32's losses bit for bit" || not_ok "run $2: not fp32's losses bit for bit"
done
# it trains: the mean of the last five losses is below the first five's by 0.1 (measured: 0.25)
awk -v a="$(losses 2)" 'BEGIN { n = split(a, x, " "); if (n != 20) exit 1; f = 0; l = 0
    for (i = 1; i <= 5; i++) { f += x[i]; l += x[n - 5 + i] }; exit !(l / 5 < f / 5 - 0.1) }' &&
    ok "bf16: the loss falls" || not_ok "bf16: the loss falls" "$(losses 2)"
check "the config records the precision" 0 "$NB" show 2
has "precision bf16 recorded" "$tmp/out" '"precision": "bf16"'
has "as the run's model label" "$tmp/out" "model = --precision bf16"
check "the default is recorded too" 0 "$NB" show 1
has "precision fp32 recorded" "$tmp/out" '"precision": "fp32"'
check "report" 0 "$NB" report --format csv
has "report keeps bf16 apart" "$tmp/out" "^cifar,synthetic \\[--precision bf16\\],layer"
# the step benchmark takes it as cifar's option
check "bench step cifar --precision bf16" 0 "$NB" bench step cifar --norms layer --batch 4 --steps 1 --precision bf16

echo "1..$n"
[ $fails -eq 0 ]
