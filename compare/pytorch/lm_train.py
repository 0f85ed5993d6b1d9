#!/usr/bin/env python3
"""Trains `normbench run lm`'s model in PyTorch (compare/pytorch/lm.py's GPT, nanoGPT's
architecture) on Tiny Shakespeare with normbench's hyper-parameters, printing the validation loss
against wall-clock seconds: the PyTorch side of tools/lm-time-to-quality.sh.

The same data and schedule as tasks/lm.c: the characters of input.txt, the vocabulary their sorted
set, the first 90% to train and the rest to validate; each step B windows of --context characters
at uniformly random offsets of the training part; AdamW (β 0.9, 0.99, eps 1e-8) with decoupled
weight decay 0.1 on the matrices only, lr 1e-3 warmed up linearly over --warmup steps (lr
(it+1)/(warmup+1)) then cosine-decayed to --min-lr (lr/10) at the last step; the global gradient
norm clipped at 1; dropout the preset's. Every --eval-every steps and at the end: the mean
cross-entropy (nats per character) over --eval-windows windows evenly spaced over the validation
part (the first at its start, the last ending one character before its end), the same windows
normbench evaluates. The random draws are PyTorch's (seed semantics differ from normbench's).

Output, one line per evaluation (tab-separated, with a header):
  step  seconds  val_loss
seconds: wall-clock time since the first training step began (evaluations included)."""
import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm  # noqa: E402  (the model and optimizer of bench step lm --against pytorch)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="Tiny Shakespeare's input.txt (or any text)")
    ap.add_argument("--preset", default="cpu", choices=sorted(lm.PRESETS))
    ap.add_argument("--norm", default="layer", choices=["none", "weight", *lm.ROW_NORMS])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="0: the preset's (cpu 2000, gpu 5000)")
    ap.add_argument("--batch", type=int, default=0, help="0: the preset's (cpu 12, gpu 64)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=-1, help="-1: lr / 10")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-windows", type=int, default=0, help="0: cpu 240, gpu 1280")
    ap.add_argument("--eval-batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(a.seed)
    cpu = a.preset == "cpu"
    steps = a.steps or (2000 if cpu else 5000)
    B = a.batch or (12 if cpu else 64)
    nwin = a.eval_windows or (240 if cpu else 1280)
    min_lr = a.lr / 10 if a.min_lr < 0 else a.min_lr
    L, H, d, T, p = lm.shapes({**lm.CFG, "preset": a.preset})

    with open(a.data, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.long)
    ntrain = int(len(ids) * 0.9)
    train, val = ids[:ntrain], ids[ntrain:]
    vspan = len(val) - T - 1
    wins = [int(vspan * i / (nwin - 1)) if nwin > 1 else 0 for i in range(nwin)]
    vx = torch.stack([val[s:s + T] for s in wins])
    vy = torch.stack([val[s + 1:s + T + 1] for s in wins])

    model = lm.GPT(a.norm, len(chars), L, H, d, T, p)
    opt = lm.adamw(model, lr=a.lr, weight_decay=a.weight_decay)
    params = list(model.parameters())

    def lr_at(it):  # tasks/lm.c's lm_lr, it = step - 1
        if it < a.warmup:
            return a.lr * (it + 1) / (a.warmup + 1)
        r = min(1.0, (it - a.warmup) / (steps - a.warmup)) if steps > a.warmup else 1.0
        return min_lr + 0.5 * (1 + math.cos(math.pi * r)) * (a.lr - min_lr)

    @torch.no_grad()
    def evaluate():
        model.eval()
        s = 0.0
        for i in range(0, nwin, a.eval_batch):
            x, y = vx[i:i + a.eval_batch], vy[i:i + a.eval_batch]
            s += model(x, y).item() * len(x)
        model.train()
        return s / nwin

    print("step\tseconds\tval_loss", flush=True)
    best = float("inf")
    model.train()
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        for g in opt.param_groups:
            g["lr"] = lr_at(step - 1)
        off = torch.randint(0, ntrain - T, (B,))
        x = torch.stack([train[o:o + T] for o in off])
        y = torch.stack([train[o + 1:o + T + 1] for o in off])
        opt.zero_grad(set_to_none=True)
        model(x, y).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % a.eval_every == 0 or step == steps:
            v = evaluate()
            best = min(best, v)
            print(f"{step}\t{time.perf_counter() - t0:.3f}\t{v:.6f}", flush=True)
    print(f"# best val_loss {best:.4f} ({best / math.log(2):.4f} bits per character), "
          f"{time.perf_counter() - t0:.1f} s, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, norm {a.norm}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
