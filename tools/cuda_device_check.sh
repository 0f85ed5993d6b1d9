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
echo "== bench kernels --device cuda" | tee "$O/bench.txt"
$NB bench kernels --device cuda 2>&1 | tee -a "$O/bench.txt"
$NB bench kernels --device cuda --dtype bf16 --norms layer,rms,prms 2>&1 | tee -a "$O/bench.txt"
echo "== PyTorch" | tee -a "$O/bench.txt"
PYTHONUNBUFFERED=1 python3 tools/torch_norms.py 128x1000 65536x1024 16384x4096 4096x8192 2>&1 | tee -a "$O/bench.txt"
PYTHONUNBUFFERED=1 python3 tools/torch_norms.py --dtype bfloat16 16384x4096 4096x8192 2>&1 | tee -a "$O/bench.txt"
echo "== bench step mnist" | tee "$O/step.txt"
$NB bench step mnist --device cuda --batch 128,4 2>&1 | tee -a "$O/step.txt"
$NB bench step mnist --batch 128 --norms none,layer,rms 2>&1 | tee -a "$O/step.txt"
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
$NB show 2 --db $DB 2>&1 | grep -i -E "device|param" | head -5 | tee -a "$O/losses.txt"
