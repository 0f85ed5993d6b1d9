"""mnist: the LN paper's MLP 784-1000-1000-10 (docs/papers.md#mnist-model), one training step
as `normbench bench step mnist` times it: dense -> norm -> ReLU on the hidden layers (LN, RMS,
pRMS, WN there, logits plain; BN on all three layers), the dense bias replaced by the norm's
bias, softmax cross-entropy, torch.optim.Adam lr 1e-3 (PyTorch's form, as the task)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from norms import ROW_NORMS, describe, norm_info, row_norm

EXTRAS = []


def build(norm, variant, batch):
    if variant:
        raise ValueError(f"no variant '{variant}' for mnist")
    if norm == "batch" and batch < 2:
        raise ValueError("batch norm needs a batch of 2 or more")
    dims = [784, 1000, 1000, 10]
    layers = []
    for i in range(3):
        n_in, n_out, last = dims[i], dims[i + 1], i == 2
        use = norm if (not last or norm == "batch") else "none"
        lin = nn.Linear(n_in, n_out, bias=use in ("none", "weight"))
        if use == "weight":
            lin = nn.utils.weight_norm(lin)
        layers.append(lin)
        if use == "batch":
            layers.append(nn.BatchNorm1d(n_out, eps=1e-5, momentum=0.1))
        elif use in ROW_NORMS:
            layers.append(row_norm(use, n_out, eps=1e-5))
        elif norm_info(use)[0] not in ("nothing", "weights"):
            raise ValueError(f"no PyTorch form of mnist with '{norm}'")
        if not last:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(batch, 784)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    what = {"batch": "nn.BatchNorm1d"}.get(norm) or describe(norm)
    return step, f"MLP 784-1000-1000-10, {what}, Adam"
