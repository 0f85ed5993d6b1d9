#!/bin/bash
# Command-line tests of `normbench` help, usage errors, run, and their records (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
sql() { sqlite3 "$db" "$1"; }

db=$tmp/nb.db
export NORMBENCH_DB=$db NORMBENCH_DATA=$tmp/data

check "--version exits 0" 0 "$NB" --version
has "--version names the program" "$tmp/out" '^normbench [0-9]'
check "help exits 0" 0 "$NB" help
for c in run runs show report bench; do has "help lists '$c'" "$tmp/out" "^  $c "; done
check "help run exits 0" 0 "$NB" help run
has "help run shows the usage" "$tmp/out" '^usage: normbench run TASK'
check "run --help exits 0" 0 "$NB" run --help
has "run --help lists --norm with its values" "$tmp/out" 'none\|batch\|weight\|layer\|rms\|prms'
for t in mnist cifar order reader; do has "run --help describes task $t" "$tmp/out" " $t \\("; done
check "no arguments is a usage error" 2 "$NB"
check "unknown command is a usage error" 2 "$NB" frobnicate
has "unknown command names it and lists commands" "$tmp/err" "unknown command 'frobnicate'.*|hint: .*run"
check "unknown task is a usage error" 2 "$NB" run nosuchtask
has "unknown task lists the tasks" "$tmp/err" "unknown task 'nosuchtask'"
has "unknown task hint names mnist" "$tmp/err" "hint: .*mnist"
check "unknown norm is a usage error" 2 "$NB" run mnist --norm bogus
has "unknown norm lists the valid values" "$tmp/err" "none batch weight layer rms prms"
check "unknown flag is a usage error" 2 "$NB" run mnist --bogus
has "unknown flag is named" "$tmp/err" "unknown option '--bogus'"
check "non-numeric --batch is a usage error" 2 "$NB" run mnist --batch abc
has "non-numeric --batch is explained" "$tmp/err" "'--batch' expects an integer"
check "batch norm at batch 1 is a usage error" 2 "$NB" run mnist --norm batch --batch 1
check "unknown dataset is a usage error" 2 "$NB" run mnist --dataset imagenet
has "unknown dataset lists the task's datasets" "$tmp/err" "fashion-mnist mnist synthetic"
check "bench without a target is a usage error" 2 "$NB" bench

# Missing data: says where it looked and how to get it; records nothing.
check "missing MNIST fails at run time" 1 "$NB" run mnist --dataset mnist --data-dir "$tmp/empty" --no-fetch --quiet
has "missing MNIST names the place looked" "$tmp/err" "$tmp/empty/mnist"
has "missing MNIST gives a hint" "$tmp/err" '^hint: '
if [ ! -e "$db" ] || [ "$(sql 'select count(*) from runs')" = 0 ]; then ok "a run without data leaves no record"; else not_ok "a run without data leaves no record"; fi

# Corrupt IDX files are refused with the file named.
mkdir -p "$tmp/bad/mnist"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    printf 'not an idx file at all' >"$tmp/bad/mnist/$f"
done
check "corrupt IDX fails at run time" 1 "$NB" run mnist --dataset mnist --data-dir "$tmp/bad" --quiet
has "corrupt IDX names the file" "$tmp/err" "$tmp/bad/mnist/.*-ubyte"

# A short real run on each norm (generated data, so it is quick), all recorded as finished.
for norm in none batch weight layer rms prms; do
    check "run mnist --norm $norm on synthetic data" 0 "$NB" run mnist --dataset synthetic --subset 2000 \
        --steps 40 --batch 32 --norm "$norm" --seed 7 --quiet
    has "run prints its id and status on stdout ($norm)" "$tmp/out" '^run [0-9]+ finished$'
done
check "runs lists them" 0 "$NB" runs
c=$(sql "select count(*) from runs where status='finished'")
[ "$c" = 6 ] && ok "six finished runs in the store" || not_ok "six finished runs in the store (got $c)"
c=$(sql "select count(distinct r.norm) from runs r join metrics m on m.run = r.id where m.name = 'test_error'")
[ "$c" = 6 ] && ok "every norm recorded a test error" || not_ok "every norm recorded a test error (got $c)"
c=$(sql "select count(*) from metrics m join runs r on r.id = m.run where r.norm='rms' and m.name='train_loss'")
[ "$c" -ge 1 ] && ok "training loss recorded with steps" || not_ok "training loss recorded ($c)"
has "config records eps placement" <(sql "select config from runs where norm='prms'") '"eps_placement": "inside-sqrt"'
has "config records pRMS rounding" <(sql "select config from runs where norm='prms'") '"p_rounding": "ceil"'
has "provenance records the BLAS" <(sql "select provenance from runs limit 1") 'openblas'

# Reproducibility: the same seed and threads record identical metrics.
check "repeat the rms run" 0 "$NB" run mnist --dataset synthetic --subset 2000 --steps 40 --batch 32 --norm rms --seed 7 --quiet
a=$(sql "select group_concat(name||':'||step||':'||value, ' ') from (select * from metrics where run = (select min(id) from runs where norm='rms') and name not in ('ms_per_step', 'epoch_seconds') order by name, step)")
b=$(sql "select group_concat(name||':'||step||':'||value, ' ') from (select * from metrics where run = (select max(id) from runs where norm='rms') and name not in ('ms_per_step', 'epoch_seconds') order by name, step)")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "same seed, same metrics" || not_ok "same seed, same metrics" "$a
$b"
check "a different seed" 0 "$NB" run mnist --dataset synthetic --subset 2000 --steps 40 --batch 32 --norm rms --seed 8 --quiet
c=$(sql "select group_concat(name||':'||step||':'||value, ' ') from (select * from metrics where run = (select max(id) from runs where norm='rms') and name not in ('ms_per_step', 'epoch_seconds') order by name, step)")
[ "$a" != "$c" ] && ok "another seed, other metrics" || not_ok "another seed, other metrics"

# Real data: Fashion-MNIST from Debian's package, a short run.
check "fashion-mnist run" 0 "$NB" run mnist --dataset fashion-mnist --subset 3000 --steps 30 --norm layer --quiet
has "fashion-mnist source is recorded" <(sql "select value from params where key='data_source'") 'fashion-mnist'

# Ctrl-C: the run stops cleanly, shows as interrupted and keeps its metrics.
"$NB" run mnist --dataset synthetic --subset 5000 --steps 1000000 --batch 16 --norm rms --log-every 5 --quiet --db "$tmp/int.db" >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 1 600); do
    sleep 0.2
    c=$(sqlite3 "$tmp/int.db" "select count(*) from metrics where name = 'train_loss'" 2>/dev/null || echo 0)
    [ "${c:-0}" -ge 3 ] && break
done
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 1 ] && ok "interrupted run exits 1" || not_ok "interrupted run exits 1 (got $rc)" "$(cat "$tmp/err")"
s=$(sqlite3 "$tmp/int.db" "select status from runs")
[ "$s" = interrupted ] && ok "interrupted run recorded as interrupted" || not_ok "interrupted run recorded as interrupted (got '$s')"
c=$(sqlite3 "$tmp/int.db" "select count(*) from metrics where name='train_loss'")
[ "$c" -ge 3 ] && ok "interrupted run kept its metrics ($c)" || not_ok "interrupted run kept its metrics ($c)"

# A store that cannot be written.
check "unwritable store fails at run time" 1 "$NB" run mnist --dataset synthetic --subset 500 --steps 2 --db "$tmp/no/such/dir/x.db" --quiet
has "unwritable store is named" "$tmp/err" "$tmp/no/such/dir/x.db"

# Divergence: an absurd learning rate makes the loss infinite; the run says so.
check "diverging run exits 1" 1 "$NB" run mnist --dataset synthetic --subset 2000 --steps 50 --batch 32 --norm none --lr 1e30 --quiet --db "$tmp/div.db"
s=$(sqlite3 "$tmp/div.db" "select status from runs")
[ "$s" = diverged ] && ok "diverged run recorded as diverged" || not_ok "diverged run recorded as diverged (got '$s')" "$(cat "$tmp/err")"

# OMP_WAIT_POLICY: passive unless the user sets it (libgomp's spinning collapses a busy 2-core
# machine); the value in force is what the provenance records.
check "run without OMP_WAIT_POLICY" 0 env -u OMP_WAIT_POLICY "$NB" run mnist --dataset synthetic --subset 300 --steps 2 --quiet --db "$tmp/wait.db"
w=$(sqlite3 "$tmp/wait.db" "select json_extract(provenance, '$.omp_wait_policy') from runs")
[ "$w" = passive ] && ok "wait policy defaults to passive" || not_ok "wait policy defaults to passive (got '$w')"
check "run with OMP_WAIT_POLICY=active" 0 env OMP_WAIT_POLICY=active "$NB" run mnist --dataset synthetic --subset 300 --steps 2 --quiet --db "$tmp/wait2.db"
w=$(sqlite3 "$tmp/wait2.db" "select json_extract(provenance, '$.omp_wait_policy') from runs")
[ "$w" = active ] && ok "a user's wait policy is kept" || not_ok "a user's wait policy is kept (got '$w')"

# bench step: quick, machine-readable.
check "bench step mnist csv" 0 "$NB" bench step mnist --norms layer,rms --batch 4 --steps 6 --format csv
has "bench step csv header" "$tmp/out" '^task,norm,batch,ms_per_step,'
has "bench step csv has rms at batch 4" "$tmp/out" '^mnist,rms,4,[0-9.]+'
has "bench step csv: vs_layer's interval, then machine and date" "$tmp/out" '^task,norm,.*,vs_layer_lo,vs_layer_hi,machine,date$'
python3 - "$tmp/out" <<'PY' && ok "rms gets an interval around its vs_layer, layer none" || not_ok "vs_layer interval"
import csv, sys
rows = {r["norm"]: r for r in csv.DictReader(open(sys.argv[1]))}
r, l = rows["rms"], rows["layer"]
lo, hi, v = float(r["vs_layer_lo"]), float(r["vs_layer_hi"]), float(r["vs_layer"])
assert 0 < lo <= hi and lo <= v * 1.5 and v <= hi * 1.5, r
assert l["vs_layer_lo"] == "" and l["vs_layer_hi"] == "", l
PY
check "bench with an unknown norm is a usage error" 2 "$NB" bench step mnist --norms layer,nope

echo "1..$n"
[ $fails -eq 0 ]
