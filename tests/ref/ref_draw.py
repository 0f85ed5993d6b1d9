"""Reference tensors for nn/draw.c (DRAW) from the PyTorch model of compare/pytorch/draw.py (the
one `bench step draw --against pytorch` times; written independently of the C code: per-step
LSTM cells with the norm modules of compare/pytorch/norms.py, the filterbanks by their formulas,
autograd for the gradients), in float64.

Run with the system Python that has torch:  /usr/bin/python3 tests/ref/ref_draw.py
Writes tests/ref/draw.bin (format: tests/ref.h), read by tests/test_draw.c (test_reference), or
the file its first argument names (tests/cli/78-draw-torch.t checks that compare/pytorch/draw.py
still gives the committed numbers).

Sizes: 28x28 images, a batch of 3, 3 glimpses, 16 units, z 4, read 2, write 5, with and without
attention, for every norm draw takes (none, weight, layer, rms, prms with p = 0.3, dyt).

The parameters are not stored: both sides compute them from the tensor's name in nn/draw.c's
layout and the value's index with integer arithmetic (exact in both languages):
  h = sum over the name's bytes of byte * (position + 1)
  u = (((i + 1) * 2654435761 + h * 97531) mod 2^32) / 2^32            (in [0, 1))
  value = centre + amp * (2 u - 1), with
    gains (s1, s2, s3, Wg, Ug): centre 1, amp 0.2;  DyT's alpha1..3: centre 0.5, amp 0.1;
    the write layer (write.W, write.b): centre 0, amp 1 (so that the canvas moves off 0 and the
    error image and the reconstruction depend on it);
    every other tensor of n values: centre 0, amp min(0.3, 3 / sqrt(n)).
So the python names every tensor as the C layout does ("enc.W", "enc.s1", "read.b", ...): a
name that differs gives other values and a loss that does not match, or a gradient the C test
cannot find.

x (3, 784) the binary images and eps (3, 3, 4) the noise, rows (image, step, z) as nn/draw.h
takes it, for every case; for each case CASE = "<norm>.<attn|noattn>":
  CASE.loss   [loss, reconstruction, KL] in nats per image (the negative bound and its parts)
  CASE.g.NAME the gradient of the loss wrt tensor NAME at the indices 0, S, 2S, ... (S =
              ceil(n / 48), flattened in the C layout's row-major order)
  CASE.gn.NAME [the whole gradient's L2 norm]
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "compare", "pytorch"))
import draw  # noqa: E402  compare/pytorch/draw.py
import refio  # noqa: E402
from norms import ROW_NORMS, prms_k  # noqa: E402

torch.set_default_dtype(torch.float64)
torch.manual_seed(20261128)
B, T, H, Z, NR, NW = 3, 3, 16, 4, 2, 5
P_PRMS = 0.3
NORMS = ["none", "weight", "layer", "rms", "prms", "dyt"]
SAMPLES = 48


def values(name, n):
    h = sum(b * (k + 1) for k, b in enumerate(name.encode()))
    leaf = name.rsplit(".", 1)[1]
    if leaf in ("s1", "s2", "s3", "Wg", "Ug"):
        centre, amp = 1.0, 0.2
    elif leaf.startswith("alpha"):
        centre, amp = 0.5, 0.1
    elif name.startswith("write."):
        centre, amp = 0.0, 1.0
    else:
        centre, amp = 0.0, min(0.3, 3.0 / math.sqrt(n))
    u = [(((i + 1) * 2654435761 + h * 97531) % (1 << 32)) / float(1 << 32) for i in range(n)]
    return torch.tensor([centre + amp * (2 * v - 1) for v in u])


def named(model, norm):
    """(C layout name, parameter tensor) for every parameter of the model."""
    out = []
    for cname, cell in (("enc", model.enc), ("dec", model.dec)):
        for lin, key in ((cell.W, "W"), (cell.U, "U")):
            if norm == "weight":
                out += [(f"{cname}.{key}v", lin.weight_v), (f"{cname}.{key}g", lin.weight_g)]
            else:
                out.append((f"{cname}.{key}", lin.weight))
        out += [(f"{cname}.b", cell.W.bias), (f"{cname}.h0", cell.h0)]
        if norm in ROW_NORMS:
            for k, mod in enumerate(cell.n, 1):
                out.append((f"{cname}.s{k}", mod.weight))
                if getattr(mod, "bias", None) is not None:
                    out.append((f"{cname}.b{k}", mod.bias))
                if hasattr(mod, "alpha"):
                    out.append((f"{cname}.alpha{k}", mod.alpha))
    dense = [("mu", model.mu), ("ls", model.ls), ("write", model.write)]
    if model.attn:
        dense += [("read", model.read_p), ("wattn", model.write_p)]
    for cname, lin in dense:
        out += [(f"{cname}.W", lin.weight), (f"{cname}.b", lin.bias)]
    assert len(out) == len(list(model.parameters())), "every parameter named"
    return out


res = []
x = (torch.rand(B, draw.SIDE * draw.SIDE) < 0.3).double()
eps = torch.randn(T, B, Z)
res.append(("x", x.numpy()))
res.append(("eps", eps.permute(1, 0, 2).contiguous().numpy()))
for attn in (1, 0):
    for norm in NORMS:
        draw.CFG.update({"preset": "small", "dim": H, "glimpses": T, "z-dim": Z,
                         "model": "attention" if attn else "no-attention", "read-n": NR,
                         "write-n": NW})
        model = draw.Draw(norm)
        if norm == "prms":
            for cell in (model.enc, model.dec):
                for mod in cell.n:
                    mod.k = prms_k(mod.n, P_PRMS)
        params = named(model, norm)
        with torch.no_grad():
            for cname, p in params:
                p.copy_(values(cname, p.numel()).view(p.shape))
        loss = model(x, eps)
        loss.backward()
        case = f"{norm}.{'attn' if attn else 'noattn'}"
        res.append((case + ".loss", [loss.item(), model.rec.item() / B, model.kl.item() / B]))
        for cname, p in params:
            g = p.grad.reshape(-1)
            step = -(-g.numel() // SAMPLES)
            res.append((f"{case}.g.{cname}", g[::step].numpy()))
            res.append((f"{case}.gn.{cname}", [g.norm().item()]))
        print(f"{case:14s} loss {loss.item():10.4f} (reconstruction {model.rec.item() / B:.4f}, "
              f"KL {model.kl.item() / B:.4f}), {len(params)} tensors")

refio.write(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "draw.bin"), res)
print("wrote", len(res), "tensors")
