#!/usr/bin/env python3
"""The PyTorch side of `normbench bench step TASK --against pytorch`.

normbench starts `python3 compare/pytorch/driver.py TASK THREADS [OPTION...]` and speaks a line
protocol
over the child's stdin/stdout, so that its own steps and PyTorch's alternate in rounds in one
session (a slow spell of the machine lands on both sides). OPTION: the task's own options given
to `bench step` (e.g. mt's --model transformer), each as "--name=value", or "--name" for a flag;
normbench has checked them already.

  child  -> "hello normbench-compare 1"
  child  -> "settings TEXT"          torch version, threads, BLAS/oneDNN (torch.__config__)
  child  -> "error options MESSAGE"  (instead of what follows, then exit) when the script cannot
                                      take the task options given
  child  -> "extra NORM VARIANT DESCRIPTION"   rows PyTorch has beside the task's norms
                                      (e.g. "extra none fused fused nn.GRU, no norm")
  child  -> "ready"
  parent -> "open ID NORM VARIANT BATCH"   VARIANT "-" for the task's own form
  child  -> "ok DESCRIPTION" | "error MESSAGE"
  parent -> "step ID N"               N training steps on instance ID
  child  -> "ms T1 ... TN"            milliseconds per step (forward, backward, optimizer)
  parent -> "close ID"                child -> "ok"
  parent -> "quit" (or EOF)

Without torch the child says "error no-torch MESSAGE" and exits 1; normbench then refuses with
a hint. A task joins by adding compare/pytorch/TASK.py with
  EXTRAS = [(norm, variant, description), ...]      (may be empty)
  def build(norm, variant, batch): -> (step, description)
where step() runs one training step on fixed generated data; see mnist.py. A task with options
(tasks/TASK.c's nb_task_opt rows) that change the step adds
  def configure(opts): opts = {name: value or None}; raises ValueError for one it cannot take
called once before "ready"; without it, any option given is refused. See mt.py.
"""
import importlib
import os
import sys
import time


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def settings(torch):
    """Threads, BLAS and oneDNN as this torch build reports them (torch.__config__.show()), and
    the BLAS/LAPACK libraries actually mapped into this process (Debian's BLAS_INFO=generic
    means whatever libblas.so.3 the alternatives system points at)."""
    cfg = torch.__config__.show()
    blas, cpu, dnn = "?", "?", "?"
    for line in cfg.splitlines():
        line = line.strip(" -")
        if line.startswith("CPU capability usage:"):
            cpu = line.split(":", 1)[1].strip()
        if "MKL-DNN" in line or "oneDNN" in line:
            dnn = line.replace("Intel(R) ", "").replace(" (Git Hash N/A)", "").replace(" ", "-")
        for part in line.split(","):
            if "BLAS_INFO=" in part:
                blas = part.split("BLAS_INFO=", 1)[1].strip()
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                name = os.path.basename(path)
                if name.startswith(("libblas", "libopenblas", "liblapack", "libmkl")):
                    libs.add(os.path.realpath(path))
    except OSError:
        pass
    wait = os.environ.get("OMP_WAIT_POLICY", "(unset)")
    return (f"torch={torch.__version__} threads={torch.get_num_threads()} "
            f"interop_threads={torch.get_num_interop_threads()} OMP_WAIT_POLICY={wait} "
            f"blas_info={blas} blas_libs={','.join(sorted(libs)) or '?'} "
            f"onednn={dnn if torch.backends.mkldnn.is_available() else 'off'} cpu_capability={cpu}")


def task_options(args):
    """{name: value} from "--name=value" ("--name": None), in the order given."""
    opts = {}
    for a in args:
        if not a.startswith("--") or len(a) < 3:
            raise ValueError(f"not an option: '{a}'")
        name, eq, value = a[2:].partition("=")
        opts[name] = value if eq else None
    return opts


def main():
    if len(sys.argv) < 3:
        say("error usage: driver.py TASK THREADS [--OPTION[=VALUE]...]")
        return 2
    task, threads = sys.argv[1], int(sys.argv[2])
    try:
        import torch
    except ImportError as e:
        say(f"error no-torch {e}")
        return 1
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        mod = importlib.import_module(task)
    except ImportError as e:
        say(f"error no-script {e}")
        return 1
    torch.set_num_threads(threads)
    say("hello normbench-compare 1")
    say("settings " + settings(torch))
    try:
        opts = task_options(sys.argv[3:])
        if opts and not hasattr(mod, "configure"):
            raise ValueError(f"the PyTorch script for '{task}' takes no task options "
                             f"(given: {' '.join('--' + k for k in opts)})")
        if hasattr(mod, "configure"):
            mod.configure(opts)
    except ValueError as e:
        say(f"error options {e}")
        return 1
    for norm, variant, desc in getattr(mod, "EXTRAS", []):
        say(f"extra {norm} {variant} {desc}")
    say("ready")
    inst = {}
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        if w[0] == "quit":
            break
        if w[0] == "open" and len(w) == 5:
            try:
                torch.manual_seed(1)
                step, desc = mod.build(w[2], None if w[3] == "-" else w[3], int(w[4]))
                inst[w[1]] = step
                say("ok " + desc)
            except Exception as e:  # unsupported norm, out of memory: the row says why
                say("error " + (str(e).splitlines() or ["failed"])[0])
        elif w[0] == "step" and len(w) == 3 and w[1] in inst:
            step, out = inst[w[1]], []
            for _ in range(int(w[2])):
                t0 = time.perf_counter()
                step()
                out.append(1e3 * (time.perf_counter() - t0))
            say("ms " + " ".join(f"{t:.6f}" for t in out))
        elif w[0] == "close" and len(w) == 2:
            inst.pop(w[1], None)
            say("ok")
        else:
            say("error bad request: " + line.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
