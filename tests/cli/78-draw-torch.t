#!/bin/bash
# draw against PyTorch (compare/pytorch/draw.py): `bench step draw --against pytorch` opens the
# PyTorch model at the sizes and options given to normbench (--preset, --dim, --glimpses,
# --z-dim, --read-n, --write-n, --no-attention) for the norms draw takes and prints both medians
# and their ratio with its interval, as a table and as CSV; and draw.py still computes the
# numbers of the committed reference tests/ref/draw.bin (loss, its parts, gradients), which
# tests/test_draw.c holds normbench to, so the model PyTorch times is normbench's model (TAP).
# Skipped without Debian's python3-torch.
set -u
. "$(dirname "$0")/lib.sh"
root="$(cd "$(dirname "$0")/../.." && pwd)"
export NORMBENCH_COMPARE_DIR="$root/compare/pytorch"
unset OPENBLAS_CORETYPE NORMBENCH_PYTHON
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "1..0 # skip python3-torch is not installed"
    exit 0
fi
tiny="--preset small --dim 8 --glimpses 2 --z-dim 2 --batch 2 --steps 2 --threads 1"
row='^draw +%s +2 +[0-9.]+ +[0-9.]+ +[0-9.]+x +\[[0-9.]+,[0-9.]+\] +DRAW 8 units, 2 glimpses, z 2, %s'

check "bench step draw --against pytorch (attention)" 0 "$NB" bench step draw --against pytorch $tiny --norms none,layer,dyt --read-n 3 --write-n 4
has "the header" "$tmp/out" '^task +norm +batch +normbench_ms +pytorch_ms +ratio +ratio_95%'
has "none's row, the plain cell loop" "$tmp/out" "$(printf "$row" none 'read 3, write 4, LSTM cell loop, no norm, Adam, clip 10')"
has "layer's row, nn.LayerNorm" "$tmp/out" "$(printf "$row" layer 'read 3, write 4, nn.LayerNorm in the LSTM cells')"
has "dyt's row, DyT" "$tmp/out" "$(printf "$row" dyt 'read 3, write 4, DyT .*in the LSTM cells')"
has "both sides' settings" "$tmp/out" '^# pytorch: +torch=.* threads=1 '
check "--no-attention reaches PyTorch, CSV" 0 "$NB" bench step draw --against pytorch $tiny --norms rms,weight --no-attention --format csv
has "the CSV header" "$tmp/out" '^task,norm,batch,pytorch_variant,normbench_ms,pytorch_ms,ratio,ratio_lo,ratio_hi,'
csv='^draw,%s,2,,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,2,1,.*"DRAW 8 units, 2 glimpses, z 2, no attention, %s'
has "rms without attention" "$tmp/out" "$(printf "$csv" rms 'composite RMSNorm in the LSTM cells')"
has "weight: weight_norm" "$tmp/out" "$(printf "$csv" weight 'nn.utils.weight_norm')"

# draw.py is the model of the committed reference: the generator, run again, gives its numbers
check "tests/ref/ref_draw.py runs" 0 "$py" "$root/tests/ref/ref_draw.py" "$tmp/draw.bin"
check "draw.py gives tests/ref/draw.bin's numbers" 0 "$py" -c '
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import refio
a, b = refio.read(sys.argv[2]), refio.read(sys.argv[3])
assert sorted(a) == sorted(b), "different tensors: %s" % sorted(set(a) ^ set(b))
worst = 0.0
for k in a:
    d = np.max(np.abs(a[k] - b[k]) / (1e-12 + np.max(np.abs(b[k]))))
    worst = max(worst, d)
    assert d < 1e-9, (k, a[k], b[k])
print("%d tensors, worst %.1e" % (len(a), worst))
' "$root/tests/ref" "$tmp/draw.bin" "$root/tests/ref/draw.bin"
has "every tensor compared" "$tmp/out" '^582 tensors, worst '
echo "1..$n"
[ "$fails" -eq 0 ]
