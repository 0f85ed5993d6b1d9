#!/bin/bash
# The PyTorch side of the comparisons (compare/pytorch/) lists norms from normbench's table: the
# names in norms.py's NORMS are the table's (as `run --help` lists them), every task script
# builds every row-wise norm (dyt too) or refuses a name it does not know with a message naming
# the known ones, and `bench step --against pytorch` gives dyt a row (TAP). Skipped without
# Debian's python3-torch.
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_COMPARE_DIR="$(cd "$(dirname "$0")/../.." && pwd)/compare/pytorch"
unset OPENBLAS_CORETYPE NORMBENCH_PYTHON
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "1..0 # skip python3-torch is not installed"
    exit 0
fi
check "run --help" 0 "$NB" run --help
table=$(sed -n 's/^ *--norm NAME .*(\([a-z|]*\))$/\1/p' "$tmp/out" | tr '|' '\n' | sort | tr '\n' ' ')
if [ -n "$table" ]; then ok "the table's norms from run --help: $table"; else not_ok "the table's norms from run --help" "$(grep -- '--norm NAME' "$tmp/out")"; fi
check "norms.py's NORMS" 0 "$py" -c 'import sys; sys.path.insert(0, sys.argv[1]); import norms
print(" ".join(sorted(norms.NORMS)))' "$NORMBENCH_COMPARE_DIR"
got=$(tr '\n' ' ' <"$tmp/out")
if [ "$got" = "$table" ]; then ok "norms.py names the table's norms"; else not_ok "norms.py names the table's norms" "norms.py: $got; table: $table"; fi
# every task script builds every row-wise norm at a small batch (no step taken), and refuses an
# unknown name saying which it knows
check "every task script builds every row-wise norm" 0 "$py" -c '
import importlib, sys
sys.path.insert(0, sys.argv[1])
import norms
for task, opts in (("mnist", None), ("cifar", None), ("order", None), ("reader", None),
                   ("mt", {"model": "rnnsearch"}), ("mt", {"model": "transformer"}),
                   ("lm", {"layers": "1", "dim": "16", "heads": "2", "context": "8"})):
    mod = importlib.import_module(task)
    if opts is not None:
        mod.configure(opts)
    for norm in norms.ROW_NORMS:
        step, desc = mod.build(norm, None, 2)
        assert callable(step) and desc, (task, norm)
        print(task, (opts or {}).get("model", "-"), norm, desc)
    try:
        mod.build("nope", None, 2)
        raise SystemExit(f"{task}: build(nope) did not refuse")
    except ValueError as e:
        assert "unknown norm" in str(e) and "dyt" in str(e), (task, str(e))
' "$NORMBENCH_COMPARE_DIR"
has "mnist's dyt row says DyT" "$tmp/out" '^mnist - dyt MLP .*DyT'
has "mt transformer's dyt row says DyT" "$tmp/out" '^mt transformer dyt nn\.Transformer .*DyT'
check "bench step mnist --against pytorch --norms layer,dyt" 0 "$NB" bench step mnist --against pytorch --norms layer,dyt --batch 4 --steps 2 --threads 1
has "a dyt row with PyTorch's DyT" "$tmp/out" '^mnist +dyt +4 +[0-9.]+ +[0-9.]+ +[0-9.]+x .*DyT'
echo "1..$n"
[ "$fails" -eq 0 ]
