#!/bin/bash
# CLI tests of labels that gnuplot must draw as they are, of a report whose figure failed, and of
# the values and lists that report, runs and plot take or show (issue 30, items 9 and 10):
# - plot and report --format html with a variant holding apostrophes, two in a row;
# - a figure gnuplot fails to draw: the page says so, stderr says so, the exit status is 1;
#   a missing gnuplot stays a note (exit 0);
# - report with infinite and NaN values: no "-nan", no 96-digit number, the mean over the finite
#   values with the others counted; the speed sentence says which side has one timed run;
# - plot --seed with an empty or repeated item refused;
# - runs and report --format csv: no raw control character;
# - a variant too long for a file name: plot says the name is too long.
set -u
. "$(dirname "$0")/lib.sh"
case $NB in /*) ;; *) NB=$PWD/$NB ;; esac
unset NORMBENCH_DB
S="--dataset synthetic --threads 1 --quiet --subset 300 --steps 6 --log-every 2"
cd "$tmp" || exit 1
mkdir tmpd
export TMPDIR=$tmp/tmpd
have_gnuplot=0
command -v gnuplot >/dev/null && have_gnuplot=1
CTRL=$'[\x01-\x08\x0b-\x1f\x7f]'

V="rock''n''roll"
for run in "layer --seed 1" "rms --seed 1" "rms --seed 2"; do
    # shellcheck disable=SC2086
    "$NB" run mnist $S --db q.db --norm $run --variant "$V" >/dev/null 2>&1 ||
        not_ok "run mnist --norm $run --variant $V"
done

# ---- item 9: apostrophes
if [ $have_gnuplot = 1 ]; then
    check "plot with the variant $V exits 0" 0 "$NB" plot --db q.db --variant "$V" --out fig
    tst "  the images are written" test -s fig.png -a -s fig.svg
    has "  the title holds the variant as it is" fig.svg "rock(''|&apos;&apos;|&#39;&#39;)n(''|&apos;&apos;|&#39;&#39;)roll"
    check "plot --term dumb with it exits 0" 0 "$NB" plot --db q.db --variant "$V" --term dumb
    has "  and draws the label" "$tmp/out" "rock''n''roll"
    check "report --format html with it exits 0" 0 "$NB" report --db q.db --format html --out r.html
    tst "  the page has its figure" test "$(grep -c '<svg' r.html)" -ge 1
    tst "  and says no figure failed" bash -c "! grep -q 'figure failed\|No figure' r.html"
    # a gnuplot that fails: the report says so on the page, on stderr and in its exit status
    mkdir fakebin
    printf '#!/bin/sh\necho "line 1: something gnuplot did not like" >&2\nexit 1\n' >fakebin/gnuplot
    chmod +x fakebin/gnuplot
    check "report --format html whose figure gnuplot failed exits 1" 1 \
        env PATH="$tmp/fakebin:$PATH" "$NB" report --db q.db --format html --out bad.html
    has "  stderr names the figure and gnuplot's message" "$tmp/err" \
        "error: the figure of mnist / synthetic.*failed: gnuplot failed.*did not like"
    has "  the page is written, with the error in the figure's place" bad.html \
        'class="error"><b>Error: the figure failed:</b> gnuplot failed'
    check "  the same to stdout exits 1" 1 env PATH="$tmp/fakebin:$PATH" "$NB" report --db q.db --format html
    has "  with the error on the page" "$tmp/out" 'Error: the figure failed'
    mkdir empty
    check "report --format html without gnuplot exits 0 (a note, as documented)" 0 \
        env PATH="$tmp/empty" "$NB" report --db q.db --format html --out nognuplot.html
    has "  the page says there is no figure" nognuplot.html 'No figure: cannot run .{1,5}gnuplot.{1,5}: it is not installed'
else
    for i in $(seq 1 16); do n=$((n + 1)); echo "ok $n # skip gnuplot is not installed"; done
fi

# ---- item 10: infinite and NaN values in report
for run in "layer --seed 1" "layer --seed 2" "rms --seed 1" "rms --seed 2" "rms --seed 3"; do
    # shellcheck disable=SC2086
    "$NB" run mnist $S --db i.db --norm $run >/dev/null 2>&1 || not_ok "run mnist --norm $run"
done
sqlite3 i.db "UPDATE metrics SET value = 9e999 WHERE run = 1 AND name = 'test_nll';
              UPDATE metrics SET value = -9e999 WHERE run = 3 AND name = 'test_error';
              UPDATE metrics SET value = 1e300 WHERE run IN (4, 5) AND name = 'test_nll';
              UPDATE metrics SET value = 9e999 WHERE run = 2 AND name = 'ms_per_step'" ||
    not_ok "sqlite3 could write the values"
check "report with infinite values exits 0" 0 "$NB" report --db i.db
tst "  no nan is printed" bash -c "! grep -qi 'nan' '$tmp/out'"
tst "  no number of more than 20 digits" bash -c "! grep -qE '[0-9]{21}' '$tmp/out'"
has "  layer's test_nll: the finite run's value, the infinite one counted" "$tmp/out" \
    '^  layer .* [0-9]+\.[0-9]{4} \(\+1 inf\) '
has "  rms's test_error: mean and std of the two finite runs, the -inf counted" "$tmp/out" \
    '^  rms .* [0-9.]+ ± [0-9.]+ \(\+1 -inf\) '
has "  rms's test_nll (1e300, 1e300 and a finite one): in scientific notation" "$tmp/out" \
    '6\.667e\+299 ± 5\.774e\+299'
has "  the speed sentence names the side with one timed run" "$tmp/out" \
    'than layer \(one timed run of layer: no spread\)'
tst "  not 'single runs'" bash -c "! grep -q 'single runs' '$tmp/out'"
check "report --format csv with them exits 0" 0 "$NB" report --db i.db --format csv
tst "  csv: mean over the finite values and a nonfinite count" python3 -c '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
r = [x for x in rows if x["norm"] == "layer" and x["metric"] == "test_nll"][0]
assert r["n"] == "1" and r["nonfinite"] == "1" and float(r["mean"]) < 10 and r["std"] == "", r
r = [x for x in rows if x["norm"] == "rms" and x["metric"] == "test_nll"][0]
assert r["nonfinite"] == "0" and abs(float(r["mean"]) / 6.666666666666667e299 - 1) < 1e-12, r
assert abs(float(r["std"]) / 5.773502691896258e299 - 1) < 1e-12, r
' "$tmp/out"
check "report --format json with them exits 0" 0 "$NB" report --db i.db --format json
tst "  json: valid, counts the infinite values, no \"nan\" mean" python3 -c '
import json, sys
g = json.load(open(sys.argv[1]))
lay = [x for x in g if x["norm"] == "layer"][0]["metrics"]["test_nll"]
assert lay["n"] == 1 and lay["inf"] == 1 and isinstance(lay["mean"], float), lay
rms = [x for x in g if x["norm"] == "rms"][0]["metrics"]["test_error"]
assert rms["n"] == 2 and rms["-inf"] == 1 and isinstance(rms["std"], float), rms
' "$tmp/out"

# ---- item 10: plot --seed lists
for bad in "1,,2" "1,1" "1,01" ",1" "1,"; do
    check "plot --seed '$bad' is a usage error" 2 "$NB" plot --db i.db --seed "$bad" --term dumb
done
has "  a repeated seed is named" "$tmp/err" "invalid --seed"
"$NB" plot --db i.db --seed 1,1 --term dumb >/dev/null 2>"$tmp/err"
has "  'seed 1 is named twice'" "$tmp/err" "seed 1 is named twice"

# ---- item 10: csv with control characters
sqlite3 i.db "UPDATE runs SET norm = 'la' || char(27) || ']0;pwned' || char(7) || 'yer' || char(13) || char(10) || 'x' WHERE id = 1" ||
    not_ok "sqlite3 could write the norm"
for c in "runs" "report"; do
    check "$c --format csv with an escape sequence in a norm exits 0" 0 "$NB" $c --db i.db --format csv
    tst "  no raw control character" bash -c "! LC_ALL=C grep -q \$'$CTRL' '$tmp/out'"
    has "  the norm shown escaped" "$tmp/out" 'la\\x1b\]0;pwned\\x07yer\\r\\nx'
done

# ---- item 10: a variant too long for a file name
sqlite3 i.db "INSERT OR REPLACE INTO tags(run, key, value)
              SELECT id, 'variant', replace(hex(zeroblob(2500000)), '0', 'x') FROM runs WHERE id = 2" ||
    not_ok "sqlite3 could write the 5 MB variant"
check "plot with a 5 MB variant is a usage error" 2 "$NB" plot --db i.db
has "  it says the name is too long" "$tmp/err" "the figure's name is too long for a file name"
has "  and what to do" "$tmp/err" "hint: name the files with --out FILE"
tst "  it does not blame the directory" bash -c "! grep -q 'cannot create directory' '$tmp/err'"
tst "  the message is short" test "$(wc -c <"$tmp/err")" -lt 1000

echo "1..$n"
exit $((fails > 0))
