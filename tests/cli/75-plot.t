#!/bin/bash
# CLI tests of `normbench plot` (TAP, run by prove). The fixture store (three norms x three
# seeds, a diverged and an interrupted run, a second dataset) is written by the unit-test
# binary (tests/test_plot.c --fixture), so `make unit` must have built it (make test does).
set -u
BIN=${NORMBENCH_BIN:?set NORMBENCH_BIN to the normbench binary}
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
BINDIR=$(dirname "$BIN")
FIXTOOL=
for c in "$BINDIR/tests/test_plot" "$BINDIR/build/tests/test_plot"; do
    [ -x "$c" ] && { FIXTOOL=$c; break; }
done
if [ -z "$FIXTOOL" ]; then
    echo "Bail out! fixture builder test_plot not found next to $BIN: run 'make unit' first"
    exit 1
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
DB=$T/fx.db
"$FIXTOOL" --fixture "$DB" || { echo "Bail out! cannot build the fixture store"; exit 1; }
unset NORMBENCH_DB

n=0
fails=0
ok() { # ok DESCRIPTION COMMAND...
    local d=$1; shift
    n=$((n + 1))
    if "$@"; then echo "ok $n - $d"; else echo "not ok $n - $d"; fails=$((fails + 1)); fi
}
is_png() { [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
is_svg() { python3 -c '
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag.endswith("svg"), root.tag
' "$1" 2>/dev/null; }
no_tmp_left() { ! ls -a "$1" | grep -q '\.tmp'; }

# images
"$BIN" plot --db "$DB" --task mnist --dataset synthetic --out "$T/fig.png" >"$T/out" 2>"$T/err"; rc=$?
ok "plot --out FILE.png exits 0" test $rc -eq 0
ok "the PNG is whole (signature)" is_png "$T/fig.png"
ok "only the PNG is written" test ! -e "$T/fig.svg"
ok "stdout names the image" test "$(cat "$T/out")" = "$T/fig.png"
ok "the script is kept beside it" grep -q "^set multiplot layout 2,2" "$T/fig.gp"
ok "the data are kept beside it" test -s "$T/fig-data/train_loss-step-rms.dat"
ok "one data file per metric, axis and norm" test "$(ls "$T/fig-data" | wc -l)" -eq 12
ok "no temporary file is left" no_tmp_left "$T"
ok "finished runs only by default, the legend names their seeds" \
    grep -q "'rms (3 runs, seeds 1,2,3)'" "$T/fig.gp"
ok "the default rows: train_loss and val_error" \
    test "$(grep -c "^set title '\(training loss\|validation error\) against" "$T/fig.gp")" -eq 4
ok "the band is drawn" grep -q 'using 1:3:4 with filledcurves' "$T/fig.gp"
ok "the unsmoothed mean is drawn faintly" grep -q "using 1:5 with lines lc rgb '#a0" "$T/fig.gp"
ok "fixed colors per norm (layer blue, rms red)" \
    grep -q "layer.dat' using 1:2 with lines lc rgb '#1f77b4'" "$T/fig.gp"
ok "rms red" grep -q "rms.dat' using 1:2 with lines lc rgb '#d62728'" "$T/fig.gp"
rm -f "$T/fig.png"
(cd "$T" && gnuplot fig.gp 2>/dev/null); rc=$?
ok "the kept script reruns on its own" test $rc -eq 0
ok "and makes the PNG again" is_png "$T/fig.png"

"$BIN" plot --db "$DB" --task mnist --dataset synthetic --out "$T/fig.svg" >/dev/null 2>"$T/err"; rc=$?
ok "plot --out FILE.svg exits 0" test $rc -eq 0
ok "the SVG parses as <svg>" is_svg "$T/fig.svg"

mkdir -p "$T/cwd"
(cd "$T/cwd" && "$BIN" plot --db "$DB" >"$T/out" 2>"$T/err"); rc=$?
ok "plot with defaults exits 0" test $rc -eq 0
ok "a figure per dataset, PNG and SVG each, named after task and dataset" test "$(sort "$T/out" | tr '\n' ' ')" = \
    "normbench-mnist-fashion-mnist.png normbench-mnist-fashion-mnist.svg normbench-mnist-synthetic.png normbench-mnist-synthetic.svg "
ok "default PNG is whole" is_png "$T/cwd/normbench-mnist-synthetic.png"
ok "default SVG parses" is_svg "$T/cwd/normbench-mnist-synthetic.svg"
(cd "$T/cwd" && "$BIN" plot --db "$DB" --dataset fashion-mnist >"$T/out" 2>"$T/err"); rc=$?
ok "one figure for a task is named after the task" test "$(tr '\n' ' ' <"$T/out")" = "normbench-mnist.png normbench-mnist.svg "

"$BIN" plot --db "$DB" --dataset synthetic --x step --metric train_loss --out "$T/one" >/dev/null 2>&1; rc=$?
ok "--x step --metric train_loss, --out without extension" test $rc -eq 0
ok "one panel" grep -q '^set multiplot layout 1,1' "$T/one.gp"
ok "both images from a base name" is_png "$T/one.png"
ok "both images from a base name (svg)" is_svg "$T/one.svg"

# unfinished runs
"$BIN" plot --db "$DB" --dataset synthetic --status all --out "$T/all.png" >/dev/null 2>"$T/err"; rc=$?
ok "--status all exits 0" test $rc -eq 0
ok "the diverged run is counted in the legend" grep -q "'layer (4 runs, seeds 1,2,3,4, 1 diverged)'" "$T/all.gp"
ok "the interrupted run is counted in the legend" grep -q "'rms (4 runs, seeds 1,2,3,4, 1 interrupted)'" "$T/all.gp"
ok "no NaN or Inf reaches gnuplot" bash -c "! grep -v '^#' '$T'/all-data/*.dat | grep -qi 'nan\|inf'"
ok "the image is whole" is_png "$T/all.png"
ok "the diverged series ends where it diverged (steps 10-70 of seed 4 kept)" \
    python3 -c '
import sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
n = {int(float(r[0])): int(r[5]) for r in rows}
assert n[70] == 4 and n[80] == 3 and n[300] == 3, n
' "$T/all-data/train_loss-step-layer.dat"

# --seed: only the runs of the seeds named
"$BIN" plot --db "$DB" --dataset synthetic --seed 2 --out "$T/s2.png" >/dev/null 2>"$T/err"; rc=$?
ok "--seed 2 exits 0" test $rc -eq 0
ok "--seed 2: one run a norm" grep -q "'layer (1 run, seed 2)'" "$T/s2.gp"
ok "--seed 2: its mean is that run (no band: top = bottom = mean)" python3 -c '
import sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
assert rows and all(r[1] == r[2] == r[3] and r[5] == "1" for r in rows), rows[:3]
' "$T/s2-data/val_error-step-rms.dat"
"$BIN" plot --db "$DB" --dataset synthetic --status all --seed 1,4 --out "$T/s14.png" >/dev/null 2>"$T/err"; rc=$?
ok "--seed 1,4 with --status all exits 0" test $rc -eq 0
ok "--seed 1,4: two runs of layer, one diverged" grep -q "'layer (2 runs, seeds 1,4, 1 diverged)'" "$T/s14.gp"
ok "--seed 1,4: none ran seed 1 only" grep -q "'none (1 run, seed 1)'" "$T/s14.gp"
"$BIN" plot --db "$DB" --dataset synthetic --seed 7 --out "$T/s7.png" >/dev/null 2>"$T/err"; rc=$?
ok "--seed with no such run fails (1)" test $rc -eq 1
ok "it says which seed" grep -q "^error: no finished runs on dataset 'synthetic' with seed 7 in" "$T/err"
ok "and writes nothing" test ! -e "$T/s7.png" -a ! -e "$T/s7.gp"
for bad in x 1.5 "" 1,x; do
    "$BIN" plot --db "$DB" --seed "$bad" --out "$T/bad.png" >/dev/null 2>"$T/err"; rc=$?
    ok "--seed '$bad' is a usage error" test $rc -eq 2
    ok "--seed '$bad': the message names the option" grep -q -- "--seed" "$T/err"
done

# the terminal
"$BIN" plot --db "$DB" --dataset synthetic --term dumb >"$T/dumb" 2>"$T/err"; rc=$?
ok "--term dumb exits 0" test $rc -eq 0
for norm in none layer rms; do
    ok "the dumb drawing names $norm" grep -q "$norm (3 runs, seeds 1,2,3)" "$T/dumb"
done
ok "the dumb drawing has axes" grep -q 'training loss against training steps' "$T/dumb"
mkdir -p "$T/tmpd"
TMPDIR=$T/tmpd "$BIN" plot --db "$DB" --dataset synthetic --term dumb >/dev/null 2>&1
ok "--term dumb leaves no temporary file behind" test -z "$(ls -A "$T/tmpd")"

# errors
"$BIN" plot --db "$DB" --dataset synthetic --metric bogus --out "$T/b.png" >"$T/out" 2>"$T/err"; rc=$?
ok "an unknown --metric is a usage error" test $rc -eq 2
ok "it names the metric" grep -q "^error: no metric 'bogus'" "$T/err"
ok "it lists the valid metrics" grep -q "^hint: .*ms_per_step train_loss val_error" "$T/err"
ok "no image for a bad --metric" test ! -e "$T/b.png"
"$BIN" plot --db "$DB" --out "$T/two.png" >"$T/out" 2>"$T/err"; rc=$?
ok "--out with two figures is a usage error" test $rc -eq 2
ok "it names the figures" grep -q "'mnist / fashion-mnist', 'mnist / synthetic'" "$T/err"
"$BIN" plot --db "$DB" --task cifar >"$T/out" 2>"$T/err"; rc=$?
ok "no runs of a task exits 1" test $rc -eq 1
ok "no runs: says so" grep -q "^error: no finished runs of task 'cifar'" "$T/err"
"$BIN" plot --db "$DB" --out "$T/x.jpg" 2>"$T/err"; rc=$?
ok "--out with another extension is a usage error" test $rc -eq 2
"$BIN" plot --db "$DB" --smooth 1 2>"$T/err"; rc=$?
ok "--smooth 1 is a usage error" test $rc -eq 2
"$BIN" plot --db "$DB" --status done 2>"$T/err"; rc=$?
ok "an unknown --status is a usage error" test $rc -eq 2
ok "it lists the statuses" grep -q 'finished interrupted diverged failed crashed running all' "$T/err"
"$BIN" plot --db "$T/none.db" 2>"$T/err"; rc=$?
ok "a missing store exits 1" test $rc -eq 1

# gnuplot missing, or failing
mkdir -p "$T/nognu"
PATH=/nonexistent "$BIN" plot --db "$DB" --dataset synthetic --out "$T/nognu/f.png" >"$T/out" 2>"$T/err"; rc=$?
ok "without gnuplot: exits 1" test $rc -eq 1
ok "without gnuplot: says it is not installed" grep -q "^error: cannot run 'gnuplot': it is not installed" "$T/err"
ok "without gnuplot: says how to install it" grep -q "sudo apt-get install gnuplot-nox" "$T/err"
ok "without gnuplot: no image" test ! -e "$T/nognu/f.png"
mkdir -p "$T/fake" "$T/bad"
# a gnuplot that writes half an image to the name it was given, then fails
cat >"$T/fake/gnuplot" <<'EOF'
#!/bin/sh
out=$(printf '%s' "$2" | sed -n "s/^out_png = '\([^']*\)'.*/\1/p")
printf '\211PNG half' >"$out"
echo 'line 3: something went wrong' >&2
exit 1
EOF
chmod +x "$T/fake/gnuplot"
PATH=$T/fake:$PATH "$BIN" plot --db "$DB" --dataset synthetic --out "$T/bad/f.png" >"$T/out" 2>"$T/err"; rc=$?
ok "gnuplot failing: exits 1" test $rc -eq 1
ok "gnuplot failing: its exit status and message are reported" \
    grep -q "^error: gnuplot failed on '.*f.gp' (exit status 1): line 3: something went wrong" "$T/err"
ok "gnuplot failing: no image, not even half of one" test ! -e "$T/bad/f.png"
ok "gnuplot failing: the temporary image is removed" no_tmp_left "$T/bad"
ok "gnuplot failing: the script is kept to debug" test -s "$T/bad/f.gp"

"$BIN" plot --help >"$T/out"; rc=$?
ok "plot --help exits 0" test $rc -eq 0
ok "plot --help shows usage" grep -q "^usage: normbench plot" "$T/out"
ok "plot --help documents every option" bash -c "for o in task dataset variant metric x out term smooth status max-points db; do grep -q -- \"--\$o\" '$T/out' || exit 1; done"

echo "1..$n"
exit $((fails > 0))
