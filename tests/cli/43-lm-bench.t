#!/bin/bash
# Command-line tests of `bench step lm`: every norm lm takes, at a tiny width, and, where
# Debian's python3-torch is installed, `--against pytorch` with compare/pytorch/lm.py (nanoGPT's
# GPT in PyTorch ops) for every norm, the task's options passed on (TAP).
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_COMPARE_DIR="$(cd "$(dirname "$0")/../.." && pwd)/compare/pytorch"
unset OPENBLAS_CORETYPE NORMBENCH_PYTHON
tiny="--layers 1 --dim 16 --heads 2 --context 8 --batch 2 --steps 2 --threads 1"
row='+2 +[0-9.]+ +[0-9.]+ +[0-9.]+x'

check "bench step lm, every norm" 0 "$NB" bench step lm --norms none,weight,layer,rms,prms $tiny --format csv
for norm in none weight layer rms prms; do
    has "a row for $norm" "$tmp/out" "^lm,$norm,2,"
done
check "bench step lm refuses batch" 1 "$NB" bench step lm --norms batch $tiny
has "saying why" "$tmp/err" "cannot use --norm batch"

if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    check "against PyTorch: every norm" 0 "$NB" bench step lm --against pytorch --norms none,weight,layer,rms,prms $tiny
    has "none: nn.Identity" "$tmp/out" "^lm +none $row .*nanoGPT GPT 1 layers 2 heads d 16, pre-norm, 2x8 chars, nn\.Identity"
    has "weight: weight_norm" "$tmp/out" "^lm +weight $row .*weight_norm on the block maps"
    has "layer: nn.LayerNorm" "$tmp/out" "^lm +layer $row .*nn\.LayerNorm"
    has "rms: the composite RMSNorm" "$tmp/out" "^lm +rms $row .*composite RMSNorm"
    has "prms: the composite pRMSNorm" "$tmp/out" "^lm +prms $row .*composite pRMSNorm"
    if /usr/bin/python3 -c 'import torch, sys; sys.exit(not hasattr(torch.nn, "RMSNorm"))'; then
        has "rms: PyTorch's own nn.RMSNorm too" "$tmp/out" "nn\.RMSNorm"
    else
        ok "# SKIP this torch has no nn.RMSNorm"
    fi
    check "against PyTorch: post-norm without biases, a schedule option taken" 0 "$NB" bench step lm --against pytorch --norms layer $tiny --norm-position post --bias off --warmup 5
    has "post-norm" "$tmp/out" "^lm +layer $row .*post-norm, 2x8 chars, nn\.LayerNorm"
    check "against PyTorch: the PyTorch model has normbench's parameters" 0 /usr/bin/python3 -c '
import sys; sys.path.insert(0, sys.argv[1]); import lm
for norm, want in (("layer", 809856), ("rms", 808704), ("none", 807552)):
    got = sum(p.numel() for p in lm.GPT(norm, 65, 4, 4, 128, 64, 0.0).parameters())
    assert got == want, (norm, got, want)' "$NORMBENCH_COMPARE_DIR"
else
    ok "# SKIP python3-torch is not installed"
fi

echo "1..$n"
[ $fails -eq 0 ]
