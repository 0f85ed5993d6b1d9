#!/bin/bash
# --device cuda where no GPU can be used (CI, the development machine): exit 1 and say that no
# CUDA device was found, before any work is done or any run is recorded. The kernels themselves
# are tested on a GPU by `make test-cuda`.
set -u
. "$(dirname "$0")/lib.sh"
db=$tmp/nb.db
export NORMBENCH_DB=$db NORMBENCH_DATA=$tmp/data

if "$NB" bench kernels --device cuda --norms rms >/dev/null 2>&1; then
    echo "1..0 # SKIP a CUDA device is present (make test-cuda covers it)"
    exit 0
fi
check "run --device cuda without a GPU fails" 1 "$NB" run mnist --dataset synthetic --steps 1 --device cuda
has "run --device cuda says no CUDA device was found" "$tmp/err" "^error: no CUDA device was found"
has "run --device cuda says what to do" "$tmp/err" "^hint: .*(--device cpu|make cuda)"
check "no run was recorded" 1 test -e "$db"
check "bench kernels --device cuda without a GPU fails" 1 "$NB" bench kernels --device cuda
has "bench kernels --device cuda says no CUDA device was found" "$tmp/err" "no CUDA device was found"
check "bench step mnist --device cuda without a GPU fails" 1 "$NB" bench step mnist --device cuda
has "bench step says no CUDA device was found" "$tmp/err" "no CUDA device was found"
check "--device takes cpu or cuda only" 2 "$NB" run mnist --device tpu
has "--device's values are listed" "$tmp/err" "cpu cuda"
check "--device cuda is for mnist only" 2 "$NB" run cifar --device cuda
check "run --device cpu still trains" 0 "$NB" run mnist --dataset synthetic --subset 256 --steps 2 --device cpu --quiet

echo "1..$n"
[ $fails -eq 0 ]
