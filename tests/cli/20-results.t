#!/bin/bash
# CLI tests for the results commands: runs, show, report (TAP, run by prove).
# The fixture store is written by the unit-test binary (tests/test_store.c --fixture), so
# `make unit` must have built it (make test does).
set -u
BIN=${NORMBENCH_BIN:?set NORMBENCH_BIN to the normbench binary}
BINDIR=$(dirname "$BIN")
FIXTOOL=
for c in "$BINDIR/tests/test_store" "$BINDIR/build/tests/test_store"; do
    [ -x "$c" ] && { FIXTOOL=$c; break; }
done
if [ -z "$FIXTOOL" ]; then
    echo "Bail out! fixture builder test_store not found next to $BIN: run 'make unit' first"
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
json_ok() { python3 -m json.tool "$1" >/dev/null; }

# runs
"$BIN" runs --db "$DB" >"$T/runs.txt" 2>"$T/err"; rc=$?
ok "runs table exits 0" test $rc -eq 0
ok "runs table has a header" grep -q '^id  *task  *dataset  *norm  *seed  *status  *started  *duration  *test_error$' "$T/runs.txt"
ok "runs table shows the crashed run" grep -qE '^11 .* crashed ' "$T/runs.txt"
ok "runs table shows the diverged run's nan" grep -qE '^ 8 .* diverged .* nan$' "$T/runs.txt"
ok "runs writes nothing to stderr" test ! -s "$T/err"
"$BIN" runs --db "$DB" --format csv >"$T/runs.csv"; rc=$?
ok "runs csv exits 0" test $rc -eq 0
ok "runs csv header" test "$(head -n 1 "$T/runs.csv")" = "id,task,dataset,norm,seed,status,started,duration_s,test_error"
ok "runs csv has 11 rows" test "$(wc -l <"$T/runs.csv")" -eq 12
ok "runs csv quotes fields" grep -q '^10,order,"syn,""q""",layer,1,finished,' "$T/runs.csv"
ok "runs csv parses with 9 columns" python3 -c '
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
assert all(len(r) == 9 for r in rows), rows
assert rows[10][2] == "syn,\"q\"", rows[10]
' "$T/runs.csv"
"$BIN" runs --db "$DB" --format json >"$T/runs.json"; rc=$?
ok "runs json exits 0" test $rc -eq 0
ok "runs json is valid" json_ok "$T/runs.json"
ok "runs json content" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r) == 11
assert r[7]["status"] == "diverged" and r[7]["test_error"] == "nan"
assert r[10]["status"] == "crashed"
assert r[0]["test_error"] == 0.1
' "$T/runs.json"
NORMBENCH_DB=$DB "$BIN" runs --format csv >"$T/env.csv"
ok "runs reads NORMBENCH_DB" cmp -s "$T/runs.csv" "$T/env.csv"

# show
"$BIN" show 8 --db "$DB" >"$T/show.txt"; rc=$?
ok "show table exits 0" test $rc -eq 0
ok "show table has the status and message" grep -q '^message     loss became nan at step 50$' "$T/show.txt"
ok "show table lists metrics" grep -qE '^test_error +1 +50 +nan$' "$T/show.txt"
"$BIN" show 10 --db "$DB" --format json >"$T/show.json"; rc=$?
ok "show json exits 0" test $rc -eq 0
ok "show json is valid" json_ok "$T/show.json"
ok "show json content" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["id"] == 10 and d["dataset"] == "syn,\"q\""
assert d["params"] == {"lr": "0.001"}
assert d["tags"]["note"] == "quote \" and\nnewline"
assert "openblas_config" in d["provenance"] and "git_rev" in d["provenance"]
assert d["metrics"]["test_r1"]["last"] == 0.25
assert d["metrics"]["ms_per_step"]["value"] == [3]
' "$T/show.json"
"$BIN" show 8 --db "$DB" --format json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["metrics"]["train_loss"]["value"] == ["nan"]
' 2>/dev/null
ok "show json keeps NaN distinguishable" test $? -eq 0
"$BIN" show 999 --db "$DB" >"$T/out" 2>"$T/err"; rc=$?
ok "show unknown run exits 1" test $rc -eq 1
ok "show unknown run names it" grep -q "^error: no run '999'" "$T/err"
ok "show unknown run prints nothing on stdout" test ! -s "$T/out"
"$BIN" show abc --db "$DB" 2>/dev/null; rc=$?
ok "show invalid id is a usage error" test $rc -eq 2
"$BIN" show --db "$DB" 2>/dev/null; rc=$?
ok "show without a run is a usage error" test $rc -eq 2

# report
"$BIN" report --db "$DB" >"$T/rep.txt" 2>"$T/err"; rc=$?
ok "report table exits 0" test $rc -eq 0
ok "report table shows mean ± std" grep -qE '^  layer +3 +0\.1200 ± 0\.0200 +0\.4000 ± 0\.1000 +11\.00 ± 1\.00 +- +\(base\) +- \(0/3\) +- +1 ' "$T/rep.txt"
ok "report table has the speed sentence" grep -q '^  rms ran 1.22 ± 0.18× faster per step than layer$' "$T/rep.txt"
ok "report writes nothing to stderr" test ! -s "$T/err"
"$BIN" report --db "$DB" --format md >"$T/rep.md"; rc=$?
ok "report md exits 0" test $rc -eq 0
ok "report md has a table" grep -q '^| rms | 3 | 0.1300 ± 0.0200 | - | 9.00 ± 1.00 | - | +18.2 ± 11.7% | - (0/3) | - | 0 | 0 | 1 | 1 |$' "$T/rep.md"
ok "report md has the speed sentence" grep -q '^- rms ran 1.22 ± 0.18× faster per step than layer$' "$T/rep.md"
"$BIN" report --db "$DB" --format csv >"$T/rep.csv"; rc=$?
ok "report csv exits 0" test $rc -eq 0
ok "report csv header" grep -q '^task,dataset,norm,runs,metric,mean,std,ms_per_step' <(head -n 1 "$T/rep.csv")
ok "report csv values" python3 -c '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
r = {(x["norm"], x["metric"]): x for x in rows if x["task"] == "mnist"}
l = r[("layer", "test_error")]
assert abs(float(l["mean"]) - 0.12) < 1e-12 and abs(float(l["std"]) - 0.02) < 1e-12, l
assert l["runs"] == "3" and l["diverged"] == "1" and float(l["ms_per_step"]) == 11, l
m = r[("rms", "test_error")]
assert m["interrupted"] == "1" and m["crashed"] == "1" and float(m["ms_per_step"]) == 9, m
assert abs(float(m["speed_vs_layer"]) - 11 / 9) < 1e-12, m
assert r[("none", "test_error")]["std"] == ""
assert any(x["dataset"] == "syn,\"q\"" for x in rows)
' "$T/rep.csv"
"$BIN" report --db "$DB" --format json >"$T/rep.json"; rc=$?
ok "report json exits 0" test $rc -eq 0
ok "report json is valid" json_ok "$T/rep.json"
"$BIN" report --db "$DB" --task order --format csv >"$T/order.csv"
ok "report --task filters" test "$(cut -d, -f1 "$T/order.csv" | sort -u | tr '\n' ' ')" = "order task "
"$BIN" report --db "$DB" >/dev/full 2>"$T/err"; rc=$?
ok "report > /dev/full fails" test $rc -ne 0
ok "report > /dev/full says why" grep -q 'cannot write to standard output' "$T/err"

# errors
for cmd in runs report "show 1"; do
    "$BIN" $cmd --db "$T/nope.db" >"$T/out" 2>"$T/err"; rc=$?
    ok "$cmd: missing store exits 1" test $rc -eq 1
    ok "$cmd: missing store message" grep -q "^error: no results store at '$T/nope.db'$" "$T/err"
    ok "$cmd: missing store hint" grep -q "^hint: .*normbench run" "$T/err"
    ok "$cmd: missing store is not created" test ! -e "$T/nope.db"
done
"$BIN" report --db "$DB" --format xml >"$T/out" 2>"$T/err"; rc=$?
ok "bad --format exits 2" test $rc -eq 2
ok "bad --format lists valid values" grep -q 'table md csv json' "$T/err"
ok "bad --format prints nothing on stdout" test ! -s "$T/out"
"$BIN" runs --db "$DB" --format md 2>"$T/err"; rc=$?
ok "runs has no md format" test $rc -eq 2
echo "not a database at all, just text" >"$T/text.db"
"$BIN" runs --db "$T/text.db" 2>"$T/err"; rc=$?
ok "a non-database file exits 1" test $rc -eq 1
ok "a non-database file is named" grep -q "'$T/text.db' is not a normbench results store" "$T/err"
for cmd in runs show report; do
    "$BIN" $cmd --help >"$T/out"; rc=$?
    ok "$cmd --help exits 0" test $rc -eq 0
    ok "$cmd --help shows usage" grep -q "^usage: normbench $cmd" "$T/out"
done

echo "1..$n"
exit $((fails > 0))
