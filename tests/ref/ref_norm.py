"""Reference tensors for nn/norm.c from an independent implementation (PyTorch, float64).

Run with the system Python that has torch:  /usr/bin/python3 tests/ref/ref_norm.py
Writes tests/ref/norm.bin (format: tests/ref.h). For every case NAME it writes NAME.cfg =
[eps, eps_outside, k, has_bias, momentum, training, unbiased_running, unbiased_batch] and the
inputs, the parameters, a fixed random upstream gradient dy, the forward output and the
gradients autograd computes for L = sum(dy * y).
"""
import os

import torch
import torch.nn.functional as F

import refio

torch.manual_seed(20240611)
D = torch.float64
out = []


def put(name, t):
    out.append((name, t.detach().cpu().numpy()))


def cfg(name, eps, outside=0, k=0, has_b=1, mom=0.0, training=0, unb_run=1, unb_batch=0):
    put(name + ".cfg", torch.tensor([eps, outside, k, has_b, mom, training, unb_run, unb_batch], dtype=D))


def leaf(t):
    return t.clone().requires_grad_(True)


def row_case(name, kind, B, C, eps, outside, k=None, has_b=True):
    """kind: 'layer' or 'rms' (k first elements for the statistic)."""
    x = leaf(torch.randn(B, C, dtype=D) * 1.5 + 0.3)
    g = leaf(1.0 + 0.3 * torch.randn(C, dtype=D))
    b = leaf(0.2 * torch.randn(C, dtype=D))
    dy = torch.randn(B, C, dtype=D)
    if kind == "layer":
        if not outside:
            y = F.layer_norm(x, (C,), g, b if has_b else None, eps)
        else:  # LN torch module of the LN authors: (x - mu) / (std + eps), population std
            mu = x.mean(dim=1, keepdim=True)
            sd = ((x - mu) ** 2).mean(dim=1, keepdim=True).sqrt()
            y = (x - mu) / (sd + eps) * g + (b if has_b else 0)
        k = C
    else:
        ms = (x[:, :k] ** 2).mean(dim=1, keepdim=True)
        if outside:  # rmsnorm_torch.py: x / (||x_k||_2 * k^-1/2 + eps)
            rms = x[:, :k].norm(2, dim=1, keepdim=True) * k ** -0.5
            y = x / (rms + eps) * g
        else:  # rmsnorm_tensorflow.py: x * rsqrt(mean(x^2) + eps)
            y = x * torch.rsqrt(ms + eps) * g
        if has_b:
            y = y + b
    (y * dy).sum().backward()
    cfg(name, eps, outside, k, int(has_b))
    for n, t in (("x", x), ("g", g), ("b", b), ("dy", dy), ("y", y), ("dx", x.grad), ("dg", g.grad)):
        put(name + "." + n, t)
    put(name + ".db", b.grad if has_b else torch.zeros(C, dtype=D))


def batch_case(name, B, C, eps, training, mom=0.1):
    x = leaf(torch.randn(B, C, dtype=D) * 2.0 - 0.7)
    g = leaf(1.0 + 0.3 * torch.randn(C, dtype=D))
    b = leaf(0.2 * torch.randn(C, dtype=D))
    dy = torch.randn(B, C, dtype=D)
    rm = 0.5 * torch.randn(C, dtype=D)
    rv = 0.5 + torch.rand(C, dtype=D)
    rm1, rv1 = rm.clone(), rv.clone()
    y = F.batch_norm(x, rm1, rv1, g, b, training=bool(training), momentum=mom, eps=eps)
    (y * dy).sum().backward()
    cfg(name, eps, 0, 0, 1, mom, training)
    for n, t in (("x", x), ("g", g), ("b", b), ("dy", dy), ("y", y), ("dx", x.grad),
                 ("dg", g.grad), ("db", b.grad), ("rm0", rm), ("rv0", rv), ("rm1", rm1),
                 ("rv1", rv1)):
        put(name + "." + n, t)


def weight_case(name, OC, C):
    v = leaf(0.5 * torch.randn(OC, C, dtype=D))
    g = leaf(1.0 + 0.3 * torch.randn(OC, dtype=D))
    dy = torch.randn(OC, C, dtype=D)
    w = torch._weight_norm(v, g.unsqueeze(1), 0)  # PyTorch's own weight-norm kernel
    (w * dy).sum().backward()
    cfg(name, 0.0)
    for n, t in (("v", v), ("g", g), ("dy", dy), ("y", w), ("dv", v.grad), ("dg", g.grad)):
        put(name + "." + n, t)


B, C = 4, 37
row_case("layer_in", "layer", B, C, 1e-5, 0)
row_case("layer_out", "layer", B, C, 1e-5, 1)
row_case("layer_nob", "layer", B, C, 1e-6, 0, has_b=False)
row_case("rms_in", "rms", B, C, 1e-8, 0, k=C)
row_case("rms_out", "rms", B, C, 1e-8, 1, k=C, has_b=False)
# pRMSNorm, n = 37: p = 6.25% -> n*p = 2.3125 -> ceil 3 (paper), floor 2 (code); p = 2% -> 1
row_case("prms_ceil", "rms", B, C, 1e-5, 0, k=3)
row_case("prms_floor", "rms", B, C, 1e-5, 1, k=2)
row_case("prms_k1", "rms", B, C, 1e-5, 0, k=1)
batch_case("batch_train", 8, 5, 1e-5, 1)
batch_case("batch_eval", 8, 5, 1e-5, 0)
weight_case("weight", 5, 7)

refio.write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "norm.bin"), out)
