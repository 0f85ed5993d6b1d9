#!/bin/bash
# `bench --from FILE.csv` (issue 33: a bench result kept in docs/results/ as its --format csv
# output becomes a generated block of a results page): the file's table as text or Markdown,
# with the machine, date, threads and BLAS it records and its values as bench printed them; a
# file cut short, malformed, or of an unknown header or version is refused naming the file and
# the line, with nothing on stdout. bench's CSVs end with machine and date (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)

# 1. A CSV that `bench kernels` writes now: it ends with machine and date.
check "bench kernels --format csv" 0 "$NB" bench kernels --norms layer,rms --shapes 64x64 --threads 1 --format csv
cp "$tmp/out" "$tmp/k.csv"
has "its header ends with machine and date" "$tmp/k.csv" '^shape,norm,pass,ms,gb_per_s,copy_gb_per_s,ratio_to_copy,threads,settings,machine,date$'
has "each row with the date it ran (UTC)" "$tmp/k.csv" ',20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]Z$'

# 2. Shown as Markdown: every row's values, the machine, the date, the threads and the BLAS.
check "bench --from FILE --format md" 0 "$NB" bench --from "$tmp/k.csv" --format md
cp "$tmp/out" "$tmp/k.md"
has "a Markdown table of the kernels" "$tmp/k.md" '^\| shape \| norm \| pass \| ms \| GB/s \| copy GB/s \| vs copy \|$'
python3 - "$tmp/k.csv" "$tmp/k.md" >"$tmp/py" 2>&1 <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
md = open(sys.argv[2]).read()
bad = []
for r in rows:
    line = "| %s | %s | %s | %.4f | %.2f | %.2f | %.2f |" % (
        r["shape"], r["norm"], r["pass"], float(r["ms"]), float(r["gb_per_s"]),
        float(r["copy_gb_per_s"]), float(r["ratio_to_copy"]))
    if line not in md.splitlines():
        bad.append(line)
for want in ("machine: " + rows[0]["machine"], "date: " + rows[0]["date"], "1 thread,",
             "BLAS `" + rows[0]["settings"].split('blas="')[1].split('"')[0] + "`"):
    if want not in md:
        bad.append(want)
print(len(rows), "rows;", "missing:", bad if bad else "nothing")
sys.exit(1 if bad or len(rows) != 4 else 0)
EOF
if [ $? -eq 0 ]; then ok "every row's values, the machine, date, threads and BLAS are in it ($(cat "$tmp/py"))"; else not_ok "every row's values, the machine, date, threads and BLAS are in it" "$(cat "$tmp/py")"; fi
check "as text" 0 "$NB" bench --from "$tmp/k.csv"
has "an aligned table, the settings on # lines" "$tmp/out" '^shape +norm +pass +ms +GB/s'
has "the machine on a # line" "$tmp/out" '^# bench kernels; machine: .+; date: 20'

# 3. A step benchmark: vs_layer and its interval as bench prints them.
check "bench step mnist --format csv" 0 "$NB" bench step mnist --norms layer,rms --batch 4 --steps 6 --threads 1 --format csv
cp "$tmp/out" "$tmp/s.csv"
check "bench --from the step CSV --format md" 0 "$NB" bench --from "$tmp/s.csv" --format md
python3 - "$tmp/s.csv" "$tmp/out" >"$tmp/py" 2>&1 <<'EOF'
import csv, sys
rows = {r["norm"]: r for r in csv.DictReader(open(sys.argv[1]))}
md = open(sys.argv[2]).read().splitlines()
r = rows["rms"]
want = "| mnist | rms | 4 | %.3f | %.3f | %.3f | %.3f× | %.3f–%.3f |" % (
    float(r["ms_per_step"]), float(r["ms_mean"]), float(r["ms_std"]), float(r["vs_layer"]),
    float(r["vs_layer_lo"]), float(r["vs_layer_hi"]))
hit = [l for l in md if l.startswith(want)]
print(want, "found" if hit else "missing")
sys.exit(0 if hit else 1)
EOF
if [ $? -eq 0 ]; then ok "the rms row: ms, vs_layer and its interval ($(cat "$tmp/py"))"; else not_ok "the rms row: ms, vs_layer and its interval" "$(cat "$tmp/py"; cat "$tmp/out")"; fi
has "6 timed steps said" "$tmp/out" '^- 6 timed steps per row'

# 4. A file of the first version (no machine, date): kept in docs/results/, shown as not recorded.
old="$root/docs/results/lm-bench-pytorch-1thread-vtanh.csv"
check "a kept CSV of the first version" 0 "$NB" bench --from "$old" --format md
has "machine and date: not recorded" "$tmp/out" 'machine: not recorded; date: not recorded'
has "PyTorch's ratio and its interval" "$tmp/out" '^\| lm \| layer \| 12 \| 74\.088 \| 99\.257 \| 1\.340× \| 1\.227–1\.487 \|'

# 5. Refused, naming the file and the line, with nothing on stdout.
refused() { # DESC FILE REGEX
    check "$1: refused (exit 1)" 1 "$NB" bench --from "$2" --format md
    has "$1: the file and the line named" "$tmp/err" "$3"
    [ -s "$tmp/out" ] && not_ok "$1: nothing on stdout" "$(head -n 3 "$tmp/out")" || ok "$1: nothing on stdout"
}
head -c -20 "$tmp/k.csv" >"$tmp/cut.csv"
refused "a file cut short" "$tmp/cut.csv" "^error: '$tmp/cut\.csv' line 5: the file ends inside this line"
awk -F, 'NR == 3 { sub(/^[^,]*,/, "") } { print }' "$tmp/k.csv" >"$tmp/short.csv"
refused "a row with a field missing" "$tmp/short.csv" "^error: '$tmp/short\.csv' line 3: 10 fields where the header has 11"
awk -F, 'BEGIN { OFS = "," } NR == 4 { $4 = "fast" } { print }' "$tmp/k.csv" >"$tmp/nan.csv"
refused "a value that is not a number" "$tmp/nan.csv" "^error: '$tmp/nan\.csv' line 4: column ms: 'fast' is not a number"
sed '1 s/$/,extra/; 2,$ s/$/,x/' "$tmp/k.csv" >"$tmp/v3.csv"
refused "an unknown header (a newer version)" "$tmp/v3.csv" "^error: '$tmp/v3\.csv' line 1: not the header of a bench CSV"
sed '3 s/"threads=1 /"threads=2 /' "$tmp/k.csv" >"$tmp/two.csv"
refused "two runs in one file" "$tmp/two.csv" "^error: '$tmp/two\.csv' line 3: column settings differs from line 2's"
sed '2 s/,"threads=1/,"thr"eads=1/' "$tmp/k.csv" >"$tmp/quote.csv"
refused "a stray quote" "$tmp/quote.csv" "^error: '$tmp/quote\.csv' line 2: "
head -n 1 "$tmp/k.csv" >"$tmp/head.csv"
refused "a header and no rows" "$tmp/head.csv" "^error: '$tmp/head\.csv' line 1: a header and no rows"
: >"$tmp/empty.csv"
refused "an empty file" "$tmp/empty.csv" "^error: '$tmp/empty\.csv' is empty"
refused "a missing file" "$tmp/none.csv" "^error: cannot open '$tmp/none\.csv'"
has "with a hint" "$tmp/err" "^hint: "

# 6. Usage: --from takes only --format table or md; md is for --from.
check "--from with --format csv" 2 "$NB" bench --from "$tmp/k.csv" --format csv
check "--from with a benchmark" 2 "$NB" bench kernels --from "$tmp/k.csv"
check "--from with --threads" 2 "$NB" bench --from "$tmp/k.csv" --threads 2
check "--format md without --from" 2 "$NB" bench kernels --format md
check "the help says --from" 0 "$NB" bench --help
has "the help says --from" "$tmp/out" 'normbench bench --from FILE\.csv \[--format table\|md\]'

echo "1..$n"
[ $fails -eq 0 ]
