"""Reference tensors for nn/gru.c and nn/oe.c from an independent implementation (PyTorch, float64).

Run with the system Python that has torch:  /usr/bin/python3 tests/ref/ref_gru.py
Writes tests/ref/gru.bin (format: tests/ref.h).

The GRU is written here as the order-embedding Theano code writes it (layers.py gru_layer /
lngru_layer / rlngru_layer): separate matrices in the Theano (in, out) layout, x·W, W (E, 2H),
U (H, 2H), Wx (E, H), Ux (H, H), biases b (2H), bx (H) added before the norms, four norms per
step with their own gains (and biases for LN), the mask carrying the state. The C test maps its
stacked (out, in) parameters onto these: Wc = [W^T; Wx^T], Uc = [U^T; Ux^T], gx = [s1; s2],
gh = [s3; s4], bx = [b1; b2], bh = [b3; b4].

For every case NAME: NAME.cfg = [kind, eps, p_k2, p_k1, training], NAME.x (T, B, E), NAME.mask
(T, B), NAME.w (B, H) (L = sum(w * h_T)), the parameters NAME.W, .U, .Wx, .Ux, .b, .bx and the
norm's NAME.s1..s4, NAME.b1..b4, NAME.gw, NAME.gu (weight norm gains, per output unit), then the
output NAME.h (B, H) and the gradients NAME.d<param> and NAME.dx.

The order loss: ORDER.s, ORDER.c (B, n), ORDER.alpha, ORDER.loss, ORDER.ds, ORDER.dc, computed
with the B×B×n broadcast as model.py does.
"""
import os

import torch
import torch.nn.functional as F

import refio

torch.manual_seed(20161116)
D = torch.float64
out = []
KINDS = {"none": 0, "batch": 1, "weight": 2, "layer": 3, "rms": 4, "prms": 5}


def put(name, t):
    out.append((name, t.detach().cpu().numpy() if torch.is_tensor(t) else t))


def leaf(t):
    return t.clone().requires_grad_(True)


def ln(x, s, b, eps):  # layers.py ln(): population variance, eps inside the sqrt
    mu = x.mean(dim=1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * s + b


def rln(x, s, eps, k):  # layers.py rln(); k < n: the RMS of the first k values (pRMSNorm)
    ms = (x[:, :k] ** 2).mean(dim=1, keepdim=True)
    return x / torch.sqrt(ms + eps) * s


def bn(x, s, b, eps):  # recurrent BN, batch statistics of this step, biased variance
    return F.batch_norm(x, None, None, s, b, training=True, eps=eps)


def gru_case(name, kind, E, H, T, B, lens, eps=1e-5, k2=None, k1=None):
    x = leaf(torch.randn(T, B, E, dtype=D))
    mask = torch.tensor([[1.0 if t < lens[b] else 0.0 for b in range(B)] for t in range(T)], dtype=D)
    w_up = torch.randn(B, H, dtype=D)
    P = {
        "W": leaf(0.5 * torch.randn(E, 2 * H, dtype=D)),
        "U": leaf(0.5 * torch.randn(H, 2 * H, dtype=D)),
        "Wx": leaf(0.5 * torch.randn(E, H, dtype=D)),
        "Ux": leaf(0.5 * torch.randn(H, H, dtype=D)),
        "b": leaf(0.3 * torch.randn(2 * H, dtype=D)),
        "bx": leaf(0.3 * torch.randn(H, dtype=D)),
    }
    if kind in ("layer", "rms", "prms", "batch"):
        for i, n in ((1, 2 * H), (2, H), (3, 2 * H), (4, H)):
            P["s%d" % i] = leaf(1.0 + 0.3 * torch.randn(n, dtype=D))
            if kind in ("layer", "batch"):
                P["b%d" % i] = leaf(0.2 * torch.randn(n, dtype=D))
    if kind == "weight":
        P["gw"] = leaf(1.0 + 0.3 * torch.rand(3 * H, dtype=D))  # per output unit of [W | Wx]
        P["gu"] = leaf(1.0 + 0.3 * torch.rand(3 * H, dtype=D))  # and of [U | Ux]
    k2 = k2 or 2 * H
    k1 = k1 or H

    def norm(v, i):
        if kind == "layer":
            return ln(v, P["s%d" % i], P["b%d" % i], eps)
        if kind in ("rms", "prms"):
            return rln(v, P["s%d" % i], eps, k2 if i in (1, 3) else k1)
        if kind == "batch":
            return bn(v, P["s%d" % i], P["b%d" % i], eps)
        return v

    W, U, Wx, Ux = P["W"], P["U"], P["Wx"], P["Ux"]
    if kind == "weight":  # w = g v / ||v|| per output unit: a column of the Theano (in, out) matrix
        Wc = torch.cat([W, Wx], dim=1)
        Uc = torch.cat([U, Ux], dim=1)
        Wc = Wc / Wc.norm(dim=0, keepdim=True) * P["gw"]
        Uc = Uc / Uc.norm(dim=0, keepdim=True) * P["gu"]
        W, Wx = Wc[:, : 2 * H], Wc[:, 2 * H:]
        U, Ux = Uc[:, : 2 * H], Uc[:, 2 * H:]
    h = torch.zeros(B, H, dtype=D)
    for t in range(T):
        xa = norm(x[t] @ W + P["b"], 1)
        xx = norm(x[t] @ Wx + P["bx"], 2)
        pre = norm(h @ U, 3) + xa
        r = torch.sigmoid(pre[:, :H])
        u = torch.sigmoid(pre[:, H:])
        hc = torch.tanh(norm(h @ Ux, 4) * r + xx)
        hn = u * h + (1 - u) * hc
        m = mask[t].unsqueeze(1)
        h = m * hn + (1 - m) * h
    (w_up * h).sum().backward()
    put(name + ".cfg", torch.tensor([KINDS[kind], eps, k2, k1, 1.0], dtype=D))
    put(name + ".x", x)
    put(name + ".mask", mask)
    put(name + ".w", w_up)
    put(name + ".h", h)
    put(name + ".dx", x.grad)
    for n, p in P.items():
        put(name + "." + n, p)
        put(name + ".d" + n, p.grad)


def order_case(name, B, n, alpha):
    s = leaf(torch.rand(B, n, dtype=D) * 0.5)
    c = leaf(torch.rand(B, n, dtype=D) * 0.5)
    errors = (torch.clamp(s.unsqueeze(1) - c.unsqueeze(0), min=0) ** 2).sum(dim=2)  # (B, B, n)
    diag = errors.diagonal()
    cost_s = torch.clamp(alpha - errors + diag.unsqueeze(0), min=0)  # E_jj: contrastive images
    cost_im = torch.clamp(alpha - errors + diag.unsqueeze(1), min=0)  # E_ii: contrastive captions
    tot = cost_s + cost_im
    tot = tot * (1 - torch.eye(B, dtype=D))
    loss = tot.sum()
    loss.backward()
    for k, v in (("s", s), ("c", c), ("alpha", torch.tensor([alpha], dtype=D)),
                 ("loss", loss.reshape(1)), ("ds", s.grad), ("dc", c.grad)):
        put(name + "." + k, v)


E, H, T, B = 5, 6, 4, 3
lens = [4, 2, 3]
gru_case("none", "none", E, H, T, B, lens)
gru_case("layer", "layer", E, H, T, B, lens)
gru_case("rms", "rms", E, H, T, B, lens)
# pRMSNorm with p = 0.3: 2H = 12 -> ceil(3.6) = 4, H = 6 -> ceil(1.8) = 2
gru_case("prms", "prms", E, H, T, B, lens, k2=4, k1=2)
gru_case("batch", "batch", E, H, T, B, lens)
gru_case("weight", "weight", E, H, T, B, lens)
order_case("order", 7, 5, 0.2)

refio.write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gru.bin"), out)
