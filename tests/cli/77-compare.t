#!/bin/bash
# `bench step TASK --against pytorch`: usage errors, the refusal without Python or torch, the
# line protocol with the PyTorch side played by a fake driver (no torch needed), and, where
# Debian's python3-torch is installed, one real short comparison (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
# the PyTorch scripts of this source tree (an out-of-tree build, e.g. build-asan/normbench,
# does not sit beside them)
export NORMBENCH_COMPARE_DIR="$(cd "$(dirname "$0")/../.." && pwd)/compare/pytorch"

check "--against an unknown framework is a usage error" 2 "$NB" bench step mnist --against tf
has "it names the framework" "$tmp/err" "unknown framework 'tf'"
check "--against with kernels is a usage error" 2 "$NB" bench kernels --against pytorch
check "--against with --device cuda is a usage error" 2 "$NB" bench step mnist --against pytorch --device cuda

# No Python: exit 1 with the install hint.
check "no python: exit 1" 1 env NORMBENCH_PYTHON=/nonexistent/python3 "$NB" bench step mnist --against pytorch --batch 4 --steps 2 --norms layer
has "no python: error line" "$tmp/err" "^error: 'bench step --against pytorch' needs Python 3 with PyTorch"
has "no python: hint names the Debian package" "$tmp/err" "^hint: apt-get install python3-torch"

py=$(command -v python3 || command -v /usr/bin/python3 || true)
if [ -z "$py" ]; then
    ok "# SKIP no python3 here"
else
    # Python without torch: a torch module on PYTHONPATH that fails to import.
    mkdir -p "$tmp/notorch"
    echo 'raise ImportError("No module named torch (test)")' >"$tmp/notorch/torch.py"
    check "no torch: exit 1" 1 env NORMBENCH_PYTHON="$py" PYTHONPATH="$tmp/notorch" "$NB" bench step mnist --against pytorch --batch 4 --steps 2 --norms layer
    has "no torch: says import torch failed" "$tmp/err" "'import torch' failed"
    has "no torch: hint" "$tmp/err" "^hint: apt-get install python3-torch"

    # A task without a script.
    mkdir -p "$tmp/fake"
    check "a task without a PyTorch script: exit 1" 1 env NORMBENCH_COMPARE_DIR="$tmp/fake" NORMBENCH_PYTHON="$py" "$NB" bench step mnist --against pytorch --steps 2
    touch "$tmp/fake/driver.py"
    check "a task without a PyTorch script (driver present): exit 1" 1 env NORMBENCH_COMPARE_DIR="$tmp/fake" NORMBENCH_PYTHON="$py" "$NB" bench step mnist --against pytorch --steps 2
    has "it names the script a task adds" "$tmp/err" "compare/pytorch/mnist.py"

    # The protocol, with a fake PyTorch side: 2 ms per step for 'layer', 4 ms for its fused
    # extra form, and no 'rms'.
    cat >"$tmp/fake/driver.py" <<'PY'
import sys
print("hello normbench-compare 1")
print("settings fake threads=%s" % sys.argv[2])
print("extra layer fast a fake fused form")
print("ready", flush=True)
ids = {}
for line in sys.stdin:
    w = line.split()
    if w[0] == "quit":
        break
    if w[0] == "open":
        if w[2] == "rms":
            print("error no rms here")
        else:
            ids[w[1]] = 4.0 if w[3] == "fast" else 2.0
            print("ok fake %s %s batch %s" % (w[2], w[3], w[4]))
    elif w[0] == "step":
        print("ms " + " ".join(["%g" % ids[w[1]]] * int(w[2])))
    elif w[0] == "close":
        print("ok")
    sys.stdout.flush()
PY
    touch "$tmp/fake/mnist.py"
    check "fake side: bench step --against runs" 0 env NORMBENCH_COMPARE_DIR="$tmp/fake" NORMBENCH_PYTHON="$py" "$NB" bench step mnist --against pytorch --batch 4 --steps 6 --norms layer,rms --threads 1
    has "both sides' settings" "$tmp/out" "^# pytorch: +fake threads=1"
    has "normbench's settings" "$tmp/out" "^# normbench: threads=1 "
    has "layer row: PyTorch's median 2.000 and the ratio" "$tmp/out" "^mnist +layer +4 +[0-9.]+ +2\.000 +[0-9.]+x +\[[0-9.]+,[0-9.]+\] +fake layer - batch 4$"
    has "the extra form gets its own row" "$tmp/out" "^mnist +layer +4 +[0-9.]+ +4\.000 .*fake layer fast batch 4$"
    has "rms: PyTorch's refusal shown in its row" "$tmp/out" "^mnist +rms +4 +[0-9.]+ +- +- +- +error no rms here$"
    # the ratio is PyTorch's median over normbench's
    awk '$2 == "layer" && $5 == "2.000" { r = 2 / $4; s = substr($6, 1, length($6) - 1); d = r - s; if (d < 0) d = -d; exit !(d < 0.002 * r + 0.001) }' "$tmp/out" \
        && ok "ratio = 2 / normbench's median" || not_ok "ratio = 2 / normbench's median" "$(cat "$tmp/out")"
    check "fake side: csv" 0 env NORMBENCH_COMPARE_DIR="$tmp/fake" NORMBENCH_PYTHON="$py" "$NB" bench step mnist --against pytorch --batch 4 --steps 5 --norms layer --format csv
    has "csv header" "$tmp/out" "^task,norm,batch,pytorch_variant,normbench_ms,pytorch_ms,ratio,ratio_lo,ratio_hi,steps,threads,settings,pytorch_settings,pytorch_model,machine,date$"
    has "csv row" "$tmp/out" "^mnist,layer,4,,[0-9.]+,2\.0000,[0-9.]+,[0-9.]+,[0-9.]+,5,"
    has "csv extra row" "$tmp/out" "^mnist,layer,4,fast,[0-9.]+,4\.0000,"
    check "fake side: json" 0 env NORMBENCH_COMPARE_DIR="$tmp/fake" NORMBENCH_PYTHON="$py" "$NB" bench step mnist --against pytorch --batch 4 --steps 5 --norms layer --format json
    if "$py" -c 'import json,sys; d = json.load(open(sys.argv[1])); r = d["results"]; assert d["pytorch_settings"].startswith("fake"); assert r[0]["pytorch_ms"] == 2 and r[0]["pytorch_variant"] is None and r[1]["pytorch_variant"] == "fast"' "$tmp/out"; then
        ok "json: both rows, settings"
    else
        not_ok "json: both rows, settings" "$(cat "$tmp/out")"
    fi
    # the task's own options reach the PyTorch side (mt --model transformer), as --name=value
    cat >"$tmp/fake/driver.py" <<'PY'
import sys
print("hello normbench-compare 1")
print("settings fake argv=%s" % " ".join(sys.argv[3:]))
print("ready", flush=True)
for line in sys.stdin:
    w = line.split()
    if w[0] == "quit":
        break
    print({"open": "ok fake", "step": "ms " + " ".join(["1"] * int(w[-1])), "close": "ok"}[w[0]])
    sys.stdout.flush()
PY
    touch "$tmp/fake/mt.py"
    check "fake side: task options" 0 env NORMBENCH_COMPARE_DIR="$tmp/fake" NORMBENCH_PYTHON="$py" "$NB" bench step mt --against pytorch --model rnnsearch --dim 8 --dim-word 8 --batch 2 --steps 2 --norms rms --threads 1
    has "the PyTorch side got them" "$tmp/out" "^# pytorch: +fake argv=--model=rnnsearch --dim=8 --dim-word=8$"
    check "fake side: no task options, none passed" 0 env NORMBENCH_COMPARE_DIR="$tmp/fake" NORMBENCH_PYTHON="$py" "$NB" bench step mnist --against pytorch --batch 2 --steps 2 --norms rms --threads 1
    has "no options: nothing after the threads" "$tmp/out" "^# pytorch: +fake argv=$"
    # a PyTorch side that cannot take an option refuses it: a usage error naming it
    printf 'print("hello normbench-compare 1")\nprint("settings fake")\nprint("error options --dim has no PyTorch form here", flush=True)\n' >"$tmp/fake/driver.py"
    check "the PyTorch side refuses an option: exit 2" 2 env NORMBENCH_COMPARE_DIR="$tmp/fake" NORMBENCH_PYTHON="$py" "$NB" bench step mt --against pytorch --dim 8 --dim-word 8 --batch 2 --steps 2 --norms rms --threads 1
    has "it says which" "$tmp/err" "^error: the PyTorch side of 'bench step mt' cannot take these options: --dim has no PyTorch form here$"
    has "and what to do" "$tmp/err" "^hint: "
    # long steps go one per round (rounds of 5 steps or 250 ms): a side whose steps take 300 ms
    # is asked for one step at a time, one of 2 ms for up to 5
    cat >"$tmp/fake/driver.py" <<'PY'
import os, sys
log = open(os.environ["FAKE_LOG"], "w")
print("hello normbench-compare 1")
print("settings fake")
print("ready", flush=True)
ids = {}
for line in sys.stdin:
    w = line.split()
    log.write(line)
    log.flush()
    if w[0] == "quit":
        break
    if w[0] == "open":
        ids[w[1]] = "300" if w[2] == "layer" else "2"
        print("ok fake " + w[2])
    elif w[0] == "step":
        print("ms " + " ".join([ids[w[1]]] * int(w[2])))
    else:
        print("ok")
    sys.stdout.flush()
PY
    check "fake side: rounds by time" 0 env FAKE_LOG="$tmp/fake.log" NORMBENCH_COMPARE_DIR="$tmp/fake" NORMBENCH_PYTHON="$py" "$NB" bench step mnist --against pytorch --batch 2 --steps 4 --norms layer,rms --threads 1
    lid=$(awk '$1 == "open" && $3 == "layer" { print $2 }' "$tmp/fake.log")
    rid=$(awk '$1 == "open" && $3 == "rms" { print $2 }' "$tmp/fake.log")
    [ "$(grep -c "^step $lid 1\$" "$tmp/fake.log")" = 4 ] && ok "300 ms steps: asked for one at a time" \
        || not_ok "300 ms steps: asked for one at a time" "$(cat "$tmp/fake.log")"
    grep -q "^step $rid 4\$" "$tmp/fake.log" && ok "2 ms steps: all 4 in one round" \
        || not_ok "2 ms steps: all 4 in one round" "$(cat "$tmp/fake.log")"
    has "the header says how rounds end" "$tmp/out" "rounds of 5 steps or 250 ms"
    # a side that dies mid-run is an error, not a hang or a crash
    printf 'print("hello normbench-compare 1")\nprint("ready", flush=True)\n' >"$tmp/fake/driver.py"
    check "a PyTorch side that stops answering: exit 1" 1 env NORMBENCH_COMPARE_DIR="$tmp/fake" NORMBENCH_PYTHON="$py" "$NB" bench step mnist --against pytorch --batch 4 --steps 2 --norms layer
    has "it says so" "$tmp/err" "stopped answering"
fi

# The real thing, where Debian's python3-torch is installed (never in CI).
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    check "real PyTorch: mnist at batch 4" 0 env -u NORMBENCH_PYTHON "$NB" bench step mnist --against pytorch --batch 4 --steps 3 --norms layer,rms --threads 1
    has "real PyTorch: settings name torch and oneDNN" "$tmp/out" "^# pytorch: +torch=1\.[0-9.a-z]+ threads=1 .*onednn="
    has "real PyTorch: layer row with nn.LayerNorm" "$tmp/out" "^mnist +layer +4 +[0-9.]+ +[0-9.]+ +[0-9.]+x .*nn\.LayerNorm"
    has "real PyTorch: rms row with the composite form" "$tmp/out" "^mnist +rms +4 .*composite RMSNorm"
    # mt, both models, at tiny shapes through the task's options (the real mt.py)
    check "real PyTorch: mt rnnsearch, tiny" 0 env -u NORMBENCH_PYTHON "$NB" bench step mt --model rnnsearch --dim-word 8 --dim 8 --against pytorch --batch 2 --steps 2 --norms none,layer,prms --threads 1
    has "real PyTorch: rnnsearch none with the fused GRU" "$tmp/out" "^mt +none +2 +[0-9.]+ +[0-9.]+ +[0-9.]+x .*RNNSearch emb 8 hidden 8, .*fused nn\.GRU"
    has "real PyTorch: rnnsearch layer in the composed LN-GRU" "$tmp/out" "^mt +layer +2 +[0-9.]+ +[0-9.]+ +[0-9.]+x .*LN-GRU cells of PyTorch ops, nn\.LayerNorm"
    has "real PyTorch: rnnsearch prms" "$tmp/out" "^mt +prms +2 +[0-9.]+ +[0-9.]+ +[0-9.]+x .*composite pRMSNorm"
    check "real PyTorch: mt transformer pre-norm, one sentence" 0 env -u NORMBENCH_PYTHON "$NB" bench step mt --model transformer --norm-position pre --against pytorch --batch 1 --steps 2 --norms rms --threads 1
    has "real PyTorch: nn.Transformer with RMSNorm, pre-norm" "$tmp/out" "^mt +rms +1 +[0-9.]+ +[0-9.]+ +[0-9.]+x .*nn\.Transformer 3\+3 d 256 ff 1024, pre-norm, 1x30 tokens, composite RMSNorm"
    check "real PyTorch: an mt option with no effect on the step is taken" 0 env -u NORMBENCH_PYTHON "$NB" bench step mt --model rnnsearch --dim-word 8 --dim 8 --beam 3 --against pytorch --batch 2 --steps 2 --norms rms --threads 1
    # cifar's engine options choose how normbench computes the step: PyTorch takes and ignores them
    check "real PyTorch: cifar with --conv winograd4 --grad-sums batch" 0 env -u NORMBENCH_PYTHON "$NB" bench step cifar --conv winograd4 --grad-sums batch --against pytorch --batch 2 --steps 1 --norms none --threads 1
    has "real PyTorch: the cifar row" "$tmp/out" "^cifar +none +2 +[0-9.]+ +[0-9.]+ +[0-9.]+x "
    check "real PyTorch: a cifar option that changes the model is refused" 2 env -u NORMBENCH_PYTHON "$NB" bench step cifar --width 0.5 --against pytorch --batch 2 --steps 1 --norms none --threads 1
    has "real PyTorch: it names the option" "$tmp/err" "cannot take these options: --width has no PyTorch form"
else
    ok "# SKIP python3-torch is not installed"
fi

echo "1..$n"
[ $fails -eq 0 ]
