"""Reference for nn/cnn.c's data-dependent initialisation pass (nb_cnn_data_init), computed
independently with PyTorch in float64, for weight and none, with the Gaussian noise and dropout on
(the WN code's train.py: ll.get_output(layers[-1], x, init=True) without deterministic=True) and
off (the deterministic pass).

The script cannot draw normbench's random numbers: the C test dumps the input, each model's
initial weights and the noise and dropout mask that the pass draws, then this script reads them:
    NORMBENCH_REF_DUMP=tests/ref build/tests/test_conv     # writes tests/ref/cnn_init_draws.bin
    /usr/bin/python3 tests/ref/ref_cnn_init.py              # writes tests/ref/cnn_init.bin
tests/test_conv.c (test_data_init_pass) reads cnn_init.bin.

Network (the test's init_net): input (6,3,6,6) -> + noise (sigma 0.15, dumped as drawn) -> conv
3x3 pad 1 to 4 -> lrelu(0.1) -> maxpool 2x2 -> dropout (dumped mask, 0 or 2) -> conv 3x3 pad 1 to 5
-> lrelu -> global average pool -> conv 1x1 to 3 (identity). Each conv layer as the WN code's
WeightNormLayer / InitLayer (lasagne/nn.py get_output_for with init=True): t = conv(x, V/||V||)
(weight; the norm per output channel over in x kh x kw) or conv(x, W) (none);
m = mean over (N,H,W), stdv = sqrt(mean((t - m)^2)); g = 1/stdv, b = -m/stdv; the layer passes
on (t - m)/stdv through its nonlinearity. Tensors written: "<norm>.<pass>.g<i>" and ".b<i>" for
pass train and deterministic, i = 0, 1, 2; "noise" (as read, for the C test to check).
"""
import os

import torch
import torch.nn.functional as F

import refio

HERE = os.path.dirname(os.path.abspath(__file__))
Dt = torch.float64
N, C, H, W = 6, 3, 6, 6
d = refio.read(os.path.join(HERE, "cnn_init_draws.bin"))
x = torch.tensor(d["x"], dtype=Dt).reshape(N, C, H, W)
noise = torch.tensor(d["noise"], dtype=Dt).reshape(N, C, H, W)
mask = torch.tensor(d["mask"], dtype=Dt).reshape(N, 4, 3, 3)
shapes = [(4, 3, 3, 3), (5, 4, 3, 3), (3, 5, 1, 1)]
pads = [1, 1, 0]


def layer(h, w, kind, pad, act):
    if kind == "weight":
        w = w / w.pow(2).sum((1, 2, 3), keepdim=True).sqrt()
    t = F.conv2d(h, w, padding=pad)
    m = t.mean((0, 2, 3))
    c = t - m[None, :, None, None]
    stdv = c.pow(2).mean((0, 2, 3)).sqrt()
    out = c / stdv[None, :, None, None]
    if act:
        out = F.leaky_relu(out, 0.1)
    return out, 1 / stdv, -m / stdv


res = [("noise", d["noise"])]
for kind in ("none", "weight"):
    ws = [torch.tensor(d["%s.w%d" % (kind, i)], dtype=Dt).reshape(s) for i, s in enumerate(shapes)]
    for pas in ("train", "deterministic"):
        train = pas == "train"
        h = x + noise if train else x
        gb = []
        h, g, b = layer(h, ws[0], kind, pads[0], True)
        gb.append((g, b))
        h = F.max_pool2d(h, 2)
        if train:
            h = h * mask
        h, g, b = layer(h, ws[1], kind, pads[1], True)
        gb.append((g, b))
        h = h.mean((2, 3), keepdim=True)
        h, g, b = layer(h, ws[2], kind, pads[2], False)
        gb.append((g, b))
        for i, (g, b) in enumerate(gb):
            res.append(("%s.%s.g%d" % (kind, pas, i), g.numpy()))
            res.append(("%s.%s.b%d" % (kind, pas, i), b.numpy()))

refio.write(os.path.join(HERE, "cnn_init.bin"), res)
print("wrote", len(res), "tensors")
