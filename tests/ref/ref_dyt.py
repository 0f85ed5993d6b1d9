"""Reference tensors for nn/dyt.c (DyT) from PyTorch in float64: the DyT paper's module,
y = tanh(alpha * x) * weight + bias, with alpha one learnable scalar.

Run with the system Python that has torch:  /usr/bin/python3 tests/ref/ref_dyt.py
Writes tests/ref/dyt.bin (format: tests/ref.h). For every case NAME it writes NAME.cfg =
[alpha, has_bias] and the inputs x, g, b, a fixed random upstream gradient dy, the forward
output y and the gradients autograd computes for L = sum(dy * y): dx, dg, db, dalpha.
"""
import os

import torch

import refio

torch.manual_seed(20250314)
D = torch.float64
out = []


def put(name, t):
    out.append((name, t.detach().cpu().numpy()))


def leaf(t):
    return t.clone().requires_grad_(True)


def case(name, B, C, alpha, xscale, has_b=True):
    x = leaf(torch.randn(B, C, dtype=D) * xscale + 0.2)
    a = leaf(torch.tensor([alpha], dtype=D))
    g = leaf(1.0 + 0.3 * torch.randn(C, dtype=D))
    b = leaf(0.2 * torch.randn(C, dtype=D))
    dy = torch.randn(B, C, dtype=D)
    y = torch.tanh(a * x) * g
    if has_b:
        y = y + b
    (y * dy).sum().backward()
    put(name + ".cfg", torch.tensor([alpha, int(has_b)], dtype=D))
    for n, t in (("x", x), ("g", g), ("b", b), ("dy", dy), ("y", y), ("dx", x.grad),
                 ("dg", g.grad), ("dalpha", a.grad)):
        put(name + "." + n, t)
    put(name + ".db", b.grad if has_b else torch.zeros(C, dtype=D))


case("dyt_small", 3, 37, 0.5, 1.5)  # C not a multiple of 16: the vector tail
case("dyt_wide", 17, 160, 0.5, 4.0)  # saturating values
case("dyt_alpha", 5, 64, 1.7, 1.0)
case("dyt_nob", 4, 48, 0.3, 2.0, has_b=False)

refio.write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "dyt.bin"), out)
