"""Norm modules shared by the task scripts: PyTorch's own where 1.13 has one (nn.LayerNorm,
nn.BatchNorm1d/2d, nn.GroupNorm, torch.nn.utils.weight_norm), the composite form otherwise
(RMSNorm and pRMSNorm: PyTorch 1.13 has no RMS norm; DyT, the paper's module), written the way a
PyTorch user would.

NORMS names every norm of normbench's table (nn/norms/table.c) and says what it acts on; the
task scripts ask it (ROW_NORMS, has_shift, describe) instead of listing norms themselves, and
tests/cli/39-dyt-torch.t checks that its names are the table's: a norm added to the table and
not here fails that test rather than drifting."""
import math

import torch
import torch.nn as nn


def prms_k(n, p=0.0625):
    """pRMSNorm's k: the first ceil(n p) values (the paper's rounding), at least 1."""
    return max(1, math.ceil(n * p))


class RMSNorm(nn.Module):
    """y = g x / sqrt(mean(x[:k]^2) + eps) (+ b), over the last `dims` dimensions; k = all of
    them (RMSNorm) or the first k values in row-major order (pRMSNorm). shape: the gain's."""

    def __init__(self, shape, n, k=None, eps=1e-5, bias=True, dims=1):
        super().__init__()
        self.k, self.n, self.eps, self.dims = k, n, eps, dims
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else None

    def forward(self, x):
        f = x.flatten(-self.dims) if self.dims > 1 else x
        if self.k is not None and self.k < self.n:
            f = f[..., : self.k]
        ms = f.pow(2).mean(-1, keepdim=True)
        if self.dims > 1:
            ms = ms.unsqueeze(-1)
        y = x * torch.rsqrt(ms + self.eps) * self.weight
        return y + self.bias if self.bias is not None else y


class DyT(nn.Module):
    """DyT (Dynamic Tanh; Zhu, Chen, He, LeCun, Liu, CVPR 2025), the paper's module:
    tanh(alpha x) weight + bias, alpha one learned scalar (alpha0: normbench's --dyt-alpha
    default, the paper's 0.5), weight and bias per channel. shape: the gain's ((C, 1, 1) for
    an NCHW block)."""

    def __init__(self, shape, alpha0=0.5, bias=True):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((1,), float(alpha0)))
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else None

    def forward(self, x):
        y = torch.tanh(self.alpha * x) * self.weight
        return y + self.bias if self.bias is not None else y


# Every norm of normbench's table by name: (what it acts on, whether it has a shift of its own,
# its PyTorch form in the rows' descriptions). "rows": row_norm builds it (ROW_BUILD); the others
# each task builds its own way (BatchNorm per feature, weight_norm on the weights, none).
NORMS = {
    "none": ("nothing", False, "no norm"),
    "batch": ("features", True, "nn.BatchNorm"),
    "weight": ("weights", False, "nn.utils.weight_norm"),
    "layer": ("rows", True, "nn.LayerNorm"),
    "rms": ("rows", False, "composite RMSNorm"),
    "prms": ("rows", False, "composite pRMSNorm"),
    "dyt": ("rows", True, "DyT (tanh(alpha x) weight + bias)"),
}

# The row-wise norms' modules over a row of n values: gain, and bias if `bias`.
ROW_BUILD = {
    "layer": lambda n, eps, bias, p, alpha0: (nn.LayerNorm(n, eps=eps, elementwise_affine=True)
                                              if bias else _LNGain(n, eps)),
    "rms": lambda n, eps, bias, p, alpha0: RMSNorm(n, n, eps=eps, bias=bias),
    "prms": lambda n, eps, bias, p, alpha0: RMSNorm(n, n, k=prms_k(n, p), eps=eps, bias=bias),
    "dyt": lambda n, eps, bias, p, alpha0: DyT(n, alpha0, bias=bias),
}
ROW_NORMS = tuple(k for k, v in NORMS.items() if v[0] == "rows")
assert set(ROW_NORMS) == set(ROW_BUILD), "every row-wise norm in NORMS has a ROW_BUILD entry"


def norm_info(kind):
    """NORMS[kind], or a ValueError naming the norms known here."""
    if kind not in NORMS:
        raise ValueError(f"unknown norm '{kind}': compare/pytorch/norms.py knows "
                         f"{', '.join(NORMS)} (a norm added to normbench's table goes into its "
                         f"NORMS too)")
    return NORMS[kind]


def has_shift(kind):
    """Whether the norm has a shift (bias) of its own, as nn/norms/ says (layer, batch, dyt)."""
    return norm_info(kind)[1]


def describe(kind):
    """The norm's PyTorch form, for a row's description."""
    return norm_info(kind)[2]


def row_norm(kind, n, eps=1e-5, bias=True, p=0.0625, alpha0=0.5):
    """The norm of a row of n values: one of ROW_NORMS (gain, and bias if `bias`)."""
    if norm_info(kind)[0] != "rows":
        raise ValueError(f"'{kind}' is not a row-wise norm (those: {', '.join(ROW_NORMS)})")
    return ROW_BUILD[kind](n, eps, bias, p, alpha0)


class _LNGain(nn.Module):
    """LayerNorm with a gain and no bias."""

    def __init__(self, n, eps):
        super().__init__()
        self.n, self.eps = n, eps
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return nn.functional.layer_norm(x, (self.n,), self.weight, None, self.eps)


class StepBatchNorm(nn.Module):
    """Recurrent BatchNorm: one gain and bias, statistics per time step over the batch rows
    (running averages per step), as normbench's recurrent tasks."""

    def __init__(self, n, steps, eps=1e-5, gain=1.0, bias=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.full((n,), gain))
        self.bias = nn.Parameter(torch.zeros(n)) if bias else None
        self.register_buffer("rm", torch.zeros(steps, n))
        self.register_buffer("rv", torch.ones(steps, n))

    def forward(self, x, t):
        t = min(t, self.rm.shape[0] - 1)
        return nn.functional.batch_norm(x, self.rm[t], self.rv[t], self.weight, self.bias,
                                        training=True, momentum=0.1, eps=self.eps)
