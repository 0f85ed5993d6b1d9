"""Reference tensors for nn/conv.c (convolution, max pooling, the norms on NCHW maps), from
PyTorch in float64.

Run with the Debian PyTorch:  /usr/bin/python3 tests/ref/ref_conv.py
Writes tests/ref/conv.bin (format: tests/ref.h). tests/test_conv.c reads it.

Cases (every norm fused with a leaky ReLU of slope 0.1, as ConvPool-CNN-C uses them;
gradients by autograd for a fixed upstream gradient):
  conv_*     F.conv2d, x (2,3,6,6), w (4,3,3,3), padding 1, no bias
  pool_*     F.max_pool2d 2x2 stride 2 on norm_x
  ln_*       layer norm per example per channel over H x W (F.layer_norm over the last two
             dims, without its affine, then per-channel g, b), eps 1e-6 inside the sqrt
  ln_chw_*   the same over C x H x W
  rms_*      x / sqrt(mean(x^2 over H,W) + 1e-6) * g_c + b_c (the RMSNorm README's CIFAR layer)
  rms_chw_*  over C x H x W
  prms_*     pRMSNorm: the mean square from the first k = ceil(36 * 0.125) = 5 of the 36
             positions of each (example, channel) in row-major order, applied to all 36
  bn_*       F.batch_norm in training mode (biased batch variance in the normalisation),
             momentum 0.1, running variance updated with the unbiased variance of the
             N*H*W values as torch does (our kernel uses N/(N-1) of the images, the WN code's
             choice: the running values are therefore computed here by that formula and the
             torch buffers are not used)
  bn_eval_*  F.batch_norm in evaluation mode with fixed running mean/var
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refio  # noqa: E402

torch.manual_seed(20240604)
D = torch.float64
EPS = 1e-6
out = []


def put(name, t):
    out.append((name, t.detach().cpu().numpy() if torch.is_tensor(t) else t))


# ---- convolution ---------------------------------------------------------------------------
x = torch.randn(2, 3, 6, 6, dtype=D, requires_grad=True)
w = torch.randn(4, 3, 3, 3, dtype=D, requires_grad=True)
y = F.conv2d(x, w, padding=1)
dy = torch.randn_like(y)
y.backward(dy)
for n, t in [("x", x), ("w", w), ("dout", dy), ("out", y), ("dx", x.grad), ("dw", w.grad)]:
    put("conv_" + n, t)

# ---- norms on maps -------------------------------------------------------------------------
N, C, H, W = 2, 4, 6, 6
nx = (torch.randn(N, C, H, W, dtype=D) * 1.5 + 0.3)
ng = 1 + 0.5 * torch.randn(C, dtype=D)
nb = 0.5 * torch.randn(C, dtype=D)
nd = torch.randn(N, C, H, W, dtype=D)
put("norm_x", nx)
put("norm_g", ng)
put("norm_b", nb)
put("norm_dout", nd)

# max pooling
xp = nx.clone().requires_grad_(True)
po = F.max_pool2d(xp, 2, 2)
pd = torch.randn_like(po)
po.backward(pd)
put("pool_out", po)
put("pool_dout", pd)
put("pool_dx", xp.grad)


def affine_act(xhat, g, b):
    return F.leaky_relu(xhat * g.view(1, -1, 1, 1) + b.view(1, -1, 1, 1), 0.1)


def ln_hw(t):
    return F.layer_norm(t, (H, W), eps=EPS)


def ln_chw(t):
    return F.layer_norm(t, (C, H, W), eps=EPS)


def rms_hw(t):
    return t / torch.sqrt(t.pow(2).mean(dim=(2, 3), keepdim=True) + EPS)


def rms_chw(t):
    return t / torch.sqrt(t.pow(2).mean(dim=(1, 2, 3), keepdim=True) + EPS)


K = math.ceil(H * W * 0.125)


def prms_hw(t):
    flat = t.reshape(N, C, H * W)
    ms = flat[:, :, :K].pow(2).mean(dim=2, keepdim=True)
    return (flat / torch.sqrt(ms + EPS)).reshape(N, C, H, W)


RM0 = torch.tensor([0.1, -0.2, 0.3, 0.0], dtype=D)
RV0 = torch.tensor([1.0, 0.5, 2.0, 1.5], dtype=D)


def case(name, norm_fn):
    xi = nx.clone().requires_grad_(True)
    g = ng.clone().requires_grad_(True)
    b = nb.clone().requires_grad_(True)
    yo = affine_act(norm_fn(xi), g, b)
    yo.backward(nd)
    put(name + "_out", yo)
    put(name + "_dx", xi.grad)
    put(name + "_dg", g.grad)
    put(name + "_db", b.grad)


case("ln", ln_hw)
case("ln_chw", ln_chw)
case("rms", rms_hw)
case("rms_chw", rms_chw)
case("prms", prms_hw)
case("bn", lambda t: F.batch_norm(t, None, None, training=True, eps=EPS))
case("bn_eval", lambda t: F.batch_norm(t, RM0.clone(), RV0.clone(), training=False, eps=EPS))

mu = nx.mean(dim=(0, 2, 3))
var = nx.var(dim=(0, 2, 3), unbiased=False)
put("bn_running_mean", 0.9 * RM0 + 0.1 * mu)
put("bn_running_var", 0.9 * RV0 + 0.1 * var * N / (N - 1))

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv.bin")
refio.write(path, out)
print("wrote %s: %d tensors" % (path, len(out)))
