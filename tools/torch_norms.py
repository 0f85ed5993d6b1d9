#!/usr/bin/env python3
"""PyTorch's norms on the GPU, timed like `normbench bench kernels --device cuda`.

Prints one line per shape and kernel: milliseconds (median of CUDA-event timings) and GB/s
counting the fewest bytes the op must move (forward: read x, write y; forward+backward: also
read dy, write dx, and the forward again). Exits 0 with a note when PyTorch or CUDA is absent.
Usage: python3 tools/torch_norms.py [--dtype float32|bfloat16] [ROWSxCOLS ...]
"""
import sys

def main():
    try:
        import torch
    except ImportError:
        print("torch_norms: PyTorch is not installed; column skipped")
        return 0
    if not torch.cuda.is_available():
        print("torch_norms: PyTorch sees no CUDA device; column skipped")
        return 0
    args = sys.argv[1:]
    dtype = torch.float32
    if len(args) >= 2 and args[0] == "--dtype":
        dtype = getattr(torch, args[1])
        args = args[2:]
    shapes = [tuple(int(v) for v in a.split("x")) for a in args] or [(16384, 4096), (4096, 8192)]
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}, dtype {dtype}")
    has_rms = hasattr(torch.nn.functional, "rms_norm")

    def bench(fn, reps=50):
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
        ts.sort()
        return ts[len(ts) // 2]

    for (B, C) in shapes:
        x = torch.randn(B, C, device=dev, dtype=dtype)
        dy = torch.randn(B, C, device=dev, dtype=dtype)
        y = torch.empty_like(x)
        esz = x.element_size()
        nbytes = 2 * B * C * esz
        tcopy = bench(lambda: y.copy_(x))
        print(f"{B}x{C} copy              {tcopy:8.4f} ms {nbytes / tcopy / 1e6:8.1f} GB/s")
        ln = torch.nn.LayerNorm(C, eps=1e-5, device=dev, dtype=dtype)
        g = torch.ones(C, device=dev, dtype=dtype, requires_grad=True)

        def rms_composite(t):
            return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5) * g

        kernels = [("layer nn.LayerNorm", lambda t: ln(t)), ("rms composite", rms_composite)]
        if has_rms:
            kernels.append(("rms F.rms_norm", lambda t: torch.nn.functional.rms_norm(t, (C,), g, 1e-5)))
        for name, f in kernels:
            with torch.no_grad():
                tf = bench(lambda: f(x))
            xr = x.clone().requires_grad_(True)

            def fb():
                xr.grad = None
                out = f(xr)
                out.backward(dy)
            tb = bench(fb)
            # forward+backward minimum traffic: fwd (x, y) + bwd (x, dy, dx)
            print(f"{B}x{C} {name:18s} fwd {tf:8.4f} ms {nbytes / tf / 1e6:8.1f} GB/s ({tcopy / tf:.2f} of copy)"
                  f"  fwd+bwd {tb:8.4f} ms {2.5 * nbytes / tb / 1e6:8.1f} GB/s ({2.5 * tcopy / tb:.2f} of copy)")
    return 0

if __name__ == "__main__":
    sys.exit(main())
