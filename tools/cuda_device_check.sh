#!/bin/bash
# The GPU machine's check, in one call: the kernel tests, the kernel benchmark (fp32 and bf16)
# beside PyTorch's norms, the MNIST step, and the first 100 losses of CPU and CUDA runs of the
# same seed. Expects binaries built by `make cuda BUILD=build-cuda` (and `make test-cuda`) and
# writes logs under ${OUT:-/tmp/nbcuda}. Usage: tools/cuda_device_check.sh
set -u
O=${OUT:-/tmp/nbcuda}
mkdir -p "$O"
NB=./build-cuda/normbench
export OMP_WAIT_POLICY=passive
echo "== make test-cuda" | tee "$O/test_cuda.txt"
./build-cuda/tests/cuda/test_cuda 2>&1 | tee -a "$O/test_cuda.txt" | grep -v '^ok' | tail -40
if [ -z "${NO_BENCH:-}" ]; then  # NO_BENCH=1: tests and losses only
echo "== bench kernels --device cuda" | tee "$O/bench.txt"
$NB bench kernels --device cuda 2>&1 | tee -a "$O/bench.txt"
$NB bench kernels --device cuda --dtype bf16 --norms layer,rms,prms 2>&1 | tee -a "$O/bench.txt"
echo "== PyTorch" | tee -a "$O/bench.txt"
PYTHONUNBUFFERED=1 python3 tools/torch_norms.py 128x1000 65536x1024 16384x4096 4096x8192 2>&1 | tee -a "$O/bench.txt"
PYTHONUNBUFFERED=1 python3 tools/torch_norms.py --dtype bfloat16 16384x4096 4096x8192 2>&1 | tee -a "$O/bench.txt"
echo "== bench step mnist" | tee "$O/step.txt"
$NB bench step mnist --device cuda --batch 128,4 2>&1 | tee -a "$O/step.txt"
$NB bench step mnist --batch 128 --norms none,layer,rms 2>&1 | tee -a "$O/step.txt"
fi
echo "== losses" | tee "$O/losses.txt"
DB=/tmp/nbcuda.db
rm -f $DB
id=0
for n in none batch weight layer rms prms; do
  for d in cpu cuda; do
    $NB run mnist --dataset synthetic --norm $n --steps 100 --log-every 1 --device $d --db $DB --quiet 2>&1 | tail -2 | tee -a "$O/losses.txt"
  done
  id=$((id + 2))
  python3 tools/compare_losses.py $NB $DB $((id - 1)) $id 100 1e-3 2>&1 | tee -a "$O/losses.txt"
done
$NB show 2 --db $DB 2>&1 | grep -E "device =" | tee -a "$O/losses.txt"
# The same comparison on real data (a truncated Fashion-MNIST carried as devdata/, when there),
# and the CPU against itself with 1 and 16 threads (OpenBLAS sums in another order): how far
# fp32 rounding alone moves these losses in 100 Adam steps.
if [ -d devdata/fashion-mnist ]; then
  for n in none layer rms; do
    for d in cpu cuda; do
      $NB run mnist --dataset fashion-mnist --data-dir devdata --norm $n --steps 100 --log-every 1 --device $d --db $DB --quiet 2>&1 | tail -1 | tee -a "$O/losses.txt"
    done
    id=$((id + 2))
    python3 tools/compare_losses.py $NB $DB $((id - 1)) $id 100 1e-3 2>&1 | tee -a "$O/losses.txt"
  done
fi
for n in none layer; do
  $NB run mnist --dataset synthetic --norm $n --steps 100 --log-every 1 --threads 16 --db $DB --quiet 2>&1 | tail -1
  $NB run mnist --dataset synthetic --norm $n --steps 100 --log-every 1 --threads 1 --db $DB --quiet 2>&1 | tail -1
  id=$((id + 2))
  echo "CPU 16 threads vs CPU 1 thread:" | tee -a "$O/losses.txt"
  python3 tools/compare_losses.py $NB $DB $((id - 1)) $id 100 1e-3 2>&1 | tee -a "$O/losses.txt"
done
