"""Reference tensors for nn/ops.c and nn/optim.c, from PyTorch in float64.

Run with the Debian PyTorch:  /usr/bin/python3 tests/ref/ref_ops.py
Writes tests/ref/ops.bin (format: tests/ref.h). tests/test_ops.c reads it.

Cases
  dense_*    F.linear + autograd, for a fixed upstream gradient dense_dout
  act_*      relu, leaky_relu (slope 0.1), tanh, sigmoid: forward and autograd gradient for a
             fixed upstream gradient; inputs kept away from 0 (relu's kink)
  xent_*     F.cross_entropy (mean) and its gradient; per-row losses (reduction='none');
             a second case with logits of +-1000
  adam_*     ADAM_T steps on fixed gradients for every variant
             (bias standard/none/kiros x eps outside/inside x eps on raw v / on corrected v^);
             p after each step and the final moments. With eps on v^ and outside the sqrt,
             standard bias correction is exactly torch.optim.Adam.

Adam conventions. normbench's contract (nn/optim.h) folds the bias correction into the step,
    p -= lr_t * m / (sqrt(v) + eps),   lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)
(Kingma & Ba's "efficient" form, the attentive reader's and order-embedding code's form).
torch.optim.Adam instead computes  lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps_torch), i.e.
the same thing with eps_torch = eps / sqrt(1 - b2^t). The standard/eps-outside case therefore
runs the real torch.optim.Adam with its eps reset to eps/sqrt(1-b2^t) before each step, and the
script checks that it agrees with the explicit formula. The other five variants have no torch
optimizer and use the explicit formulas (torch tensor ops in float64).
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refio  # noqa: E402

torch.manual_seed(20240601)
D = torch.float64

out = []


def put(name, t):
    out.append((name, t.detach().cpu().numpy() if torch.is_tensor(t) else t))


# ---- dense ---------------------------------------------------------------------------------
B, C, OC = 5, 7, 4
x = torch.randn(B, C, dtype=D, requires_grad=True)
w = torch.randn(OC, C, dtype=D, requires_grad=True)
b = torch.randn(OC, dtype=D, requires_grad=True)
dout = torch.randn(B, OC, dtype=D)
y = F.linear(x, w, b)
y.backward(dout)
for n, t in [("inp", x), ("w", w), ("bias", b), ("dout", dout), ("out", y),
             ("dinp", x.grad), ("dw", w.grad), ("dbias", b.grad)]:
    put("dense_" + n, t)

# ---- activations -----------------------------------------------------------------------------
N = 64
xa = torch.randn(N, dtype=D) * 2.0
xa = torch.where(xa.abs() < 0.05, xa.sign() * 0.05 + xa, xa)  # away from 0
xa[0], xa[1] = 6.0, -6.0  # saturating tanh / sigmoid
da = torch.randn(N, dtype=D)
put("act_inp", xa)
put("act_dout", da)
acts = {
    "relu": F.relu,
    "leaky_relu": lambda t: F.leaky_relu(t, negative_slope=0.1),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
}
for name, f in acts.items():
    xi = xa.clone().requires_grad_(True)
    yi = f(xi)
    yi.backward(da)
    put("act_%s_out" % name, yi)
    put("act_%s_dinp" % name, xi.grad)

# ---- softmax cross-entropy ---------------------------------------------------------------------
def xent_case(prefix, logits, targets):
    lg = logits.clone().requires_grad_(True)
    loss = F.cross_entropy(lg, targets)  # mean over rows
    loss.backward()
    rows = F.cross_entropy(logits, targets, reduction="none")
    put(prefix + "_logits", logits)
    put(prefix + "_targets", targets.to(D))
    put(prefix + "_probs", torch.softmax(logits, dim=1))
    put(prefix + "_loss", loss.reshape(1))
    put(prefix + "_losses", rows)
    put(prefix + "_dlogits", lg.grad)


Bx, V = 6, 5
xent_case("xent", torch.randn(Bx, V, dtype=D) * 3.0, torch.tensor([0, 4, 2, 2, 1, 3]))
big = torch.tensor([[1000.0, -1000.0, 0.0],
                    [-1000.0, 1000.0, 999.0],
                    [1000.0, 1000.0, -1000.0]], dtype=D)
xent_case("xent_big", big, torch.tensor([1, 2, 0]))  # row 0: target has p = e^-1000

# ---- Adam ------------------------------------------------------------------------------------
ADAM_T, NP = 5, 37
LR, B1, B2, EPS = 0.01, 0.9, 0.999, 1e-6
p0 = torch.randn(NP, dtype=D)
scales = torch.tensor([1.0, 1e-3, 1e-6, 10.0], dtype=D)
grads = torch.randn(ADAM_T, NP, dtype=D) * scales[torch.arange(NP) % 4]
grads[:, 5] = 0.0  # a parameter that never gets a gradient
put("adam_p0", p0)
put("adam_grads", grads)
put("adam_cfg", torch.tensor([LR, B1, B2, EPS, ADAM_T], dtype=D))


def lr_t(bias, t):
    if bias == "standard":
        return LR * math.sqrt(1 - B2 ** t) / (1 - B1 ** t)
    if bias == "kiros":
        return LR * math.sqrt(1 - 0.001 ** t) / (1 - 0.1 ** t)
    return LR


def corrections(bias, t):
    if bias == "standard":
        return 1 - B1 ** t, 1 - B2 ** t
    if bias == "kiros":
        return 1 - 0.1 ** t, 1 - 0.001 ** t
    return 1.0, 1.0


def adam_explicit(bias, inside, corrected):
    p, m, v = p0.clone(), torch.zeros(NP, dtype=D), torch.zeros(NP, dtype=D)
    traj = []
    for t in range(1, ADAM_T + 1):
        g = grads[t - 1]
        m = B1 * m + (1 - B1) * g
        v = B2 * v + (1 - B2) * g * g
        if corrected:
            # eps meets the bias-corrected moments, written as textbook Adam
            c1, c2 = corrections(bias, t)
            mh, vh = m / c1, v / c2
            den = torch.sqrt(vh + EPS) if inside else torch.sqrt(vh) + EPS
            p = p - LR * mh / den
        else:
            den = torch.sqrt(v + EPS) if inside else torch.sqrt(v) + EPS
            p = p - lr_t(bias, t) * m / den
        traj.append(p.clone())
    return torch.stack(traj), m, v


def adam_torch(corrected):
    p = p0.clone().requires_grad_(True)
    opt = torch.optim.Adam([p], lr=LR, betas=(B1, B2), eps=EPS, foreach=False)
    traj = []
    for t in range(1, ADAM_T + 1):
        if not corrected:
            opt.param_groups[0]["eps"] = EPS / math.sqrt(1 - B2 ** t)  # see the docstring
        p.grad = grads[t - 1].clone()
        opt.step()
        traj.append(p.detach().clone())
    st = opt.state[p]
    return torch.stack(traj), st["exp_avg"], st["exp_avg_sq"]


for bias in ("standard", "none", "kiros"):
    for inside in (0, 1):
        for corrected in (0, 1):
            if bias == "standard" and not inside:
                # the real torch.optim.Adam: as is for eps on v^, with eps rescaled for raw v
                traj, m, v = adam_torch(corrected)
                e_traj, _, _ = adam_explicit(bias, inside, corrected)
                assert torch.allclose(traj, e_traj, rtol=1e-13, atol=1e-15), "torch vs explicit"
            else:
                traj, m, v = adam_explicit(bias, inside, corrected)
            tag = "adam_%s_%s%s" % (bias, "inside" if inside else "outside",
                                    "_corrected" if corrected else "")
            put(tag + "_p", traj)
            put(tag + "_m", m)
            put(tag + "_v", v)

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops.bin")
refio.write(path, out)
print("wrote %s: %d tensors" % (path, len(out)))
