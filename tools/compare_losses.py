#!/usr/bin/env python3
"""Compares the training losses of two recorded runs step by step.

Usage: python3 tools/compare_losses.py NORMBENCH DB RUN_A RUN_B [STEPS] [TOL]
Reads `normbench show RUN --format json` for both, takes the first STEPS (100) train_loss
points (record them with --log-every 1), prints the largest relative difference and exits 1
when it is over TOL (1e-3)."""
import json
import subprocess
import sys


def losses(nb, db, run):
    out = subprocess.run([nb, "show", str(run), "--db", db, "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    m = d["metrics"]["train_loss"]
    return dict(zip(m["step"], m["value"])), d


def main():
    nb, db, a, b = sys.argv[1:5]
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 100
    tol = float(sys.argv[6]) if len(sys.argv) > 6 else 1e-3
    la, da = losses(nb, db, a)
    lb, db_ = losses(nb, db, b)
    worst, at, first_over = 0.0, None, None
    n = 0
    prof = []
    for s in range(1, steps + 1):
        if s not in la or s not in lb:
            print(f"step {s} missing")
            return 1
        r = abs(la[s] - lb[s]) / max(abs(la[s]), 1e-30)
        n += 1
        if r > worst:
            worst, at = r, s
        if r > tol and first_over is None:
            first_over = s
        if s in (1, 2, 5, 10, 20, 50, 100):
            prof.append(f"{s}:{r:.1e}")
    print("  relative difference by step: " + " ".join(prof) +
          (f"; first over {tol:g} at step {first_over}" if first_over else ""))
    print(f"runs {a} ({da['params'].get('device', 'cpu')}) and {b} "
          f"({db_['params'].get('device', 'cpu')}), norm {da['norm']}: first {n} losses, "
          f"max relative difference {worst:.2e} at step {at} "
          f"(loss {la[at]:.6f} vs {lb[at]:.6f}); {'ok' if worst <= tol else 'OVER'} {tol:g}")
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
