#!/bin/bash
# Command-line tests of the tasks' option declarations (tasks/taskopt.h): `help run TASK`, task
# options given to the wrong task or model, the configuration JSON's keys, and a test task
# (tests/task_toy.c, built into build/tests/normbench-toy by its own registration line) that
# runs, sweeps, reports and plots like any task (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
TOY=${NORMBENCH_TOY_BIN:-$(dirname "$NB")/build/tests/normbench-toy}
root=$(cd "$(dirname "$0")/../.." && pwd)
export NORMBENCH_DB=$tmp/t.db

# help run TASK: that task's options with their defaults, and no other task's
for t in mnist cifar order reader; do
    check "help run $t exits 0" 0 "$NB" help run "$t"
    has "help run $t names the task" "$tmp/out" "^task $t \\("
    has "help run $t shows the task's defaults" "$tmp/out" '^  defaults: --epochs [0-9]+'
    others=$(printf '%s\n' mnist cifar order reader | grep -v "^$t\$" | paste -sd'|')
    if grep -qE "^task ($others) " "$tmp/out"; then not_ok "help run $t shows no other task"; else ok "help run $t shows no other task"; fi
done
"$NB" help run cifar >"$tmp/out" 2>&1
has "cifar: --norm-axes" "$tmp/out" '^  --norm-axes A '
has "with its default" "$tmp/out" '\(hw\|chw\); default hw$'
has "cifar: --lr's default differs per norm" "$tmp/out" '--lr 0.003 \(none: 0.0003\)'
"$NB" help run order >"$tmp/out" 2>&1
has "order: --clip-tensor with its default" "$tmp/out" '^  --clip-tensor X .*default 2$'
"$NB" help run reader >"$tmp/out" 2>&1
has "reader: --bn-everywhere" "$tmp/out" '^  --bn-everywhere'
check "help run with an unknown task is a usage error" 2 "$NB" help run nosuch
has "it lists the tasks" "$tmp/err" 'the tasks are: mnist cifar order reader'
check "run TASK --help shows that task" 0 "$NB" run order --help
has "run order --help has order's options" "$tmp/out" '^  --dim-word N'
if grep -q '^task reader' "$tmp/out"; then not_ok "run order --help shows only order"; else ok "run order --help shows only order"; fi

# A task's option given to another task names the tasks that take it.
check "a reader option on cifar is a usage error" 2 "$NB" run cifar --unidirectional --dataset synthetic
has "it names the task that takes it" "$tmp/err" '--unidirectional is an option of the task\(s\) reader, not of .cifar.'
check "a cifar option on order is a usage error" 2 "$NB" run order --width 0.5
has "it names cifar" "$tmp/err" '--width is an option of the task\(s\) cifar, not of .order.'
check "a task option's value is checked by its declaration" 2 "$NB" run cifar --width 0x10
has "it says what it expects" "$tmp/err" "option '--width' expects a number, not '0x10'"
check "a choice outside its values is a usage error" 2 "$NB" run reader --encoders sideways
has "it lists the values" "$tmp/err" 'valid values are: bidirectional unidirectional'

# Every option in force is a top-level key of the configuration JSON, named as the flag.
check "a cifar run with task options" 0 "$NB" run cifar --dataset synthetic --subset 200 --steps 2 \
    --width 0.125 --norm-axes chw --no-zca --quiet --threads 1
cfg=$(sqlite3 "$NORMBENCH_DB" "select config from runs order by id desc limit 1")
ok_json() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); $2" "$cfg"; }
if ok_json x 'assert d["width"] == 0.125 and d["norm_axes"] == "chw" and d["zca"] == "off" and d["none_init"] == "data", d'; then
    ok "cifar's options are keys of the configuration"; else not_ok "cifar's options are keys of the configuration" "$cfg"; fi
check "a reader run with an alias" 0 "$NB" run reader --dataset synthetic --subset 64 --steps 1 --dim 16 \
    --unidirectional --quiet --threads 1
cfg=$(sqlite3 "$NORMBENCH_DB" "select config from runs order by id desc limit 1")
if ok_json x 'assert d["encoders"] == "unidirectional" and d["bn_everywhere"] == "off" and d["dim"] == 16 and d["eval_every"] == 1000, d'; then
    ok "reader's options are keys, the alias recorded as its option"; else not_ok "reader's options are keys, the alias recorded as its option" "$cfg"; fi

# sweep knows which options are flags from the declarations (and the common table)
check "sweep cifar --no-zca --width 0.5 (a flag before a valued option)" 0 "$NB" sweep cifar --no-zca --width 0.5 --norms rms --seeds 1 --dry-run
has "the job keeps both" "$tmp/out" 'run cifar --norm rms --seed 1 --no-zca --width 0.5$'
check "sweep order --adam-fix --no-fetch --dim 8" 0 "$NB" sweep order --adam-fix --no-fetch --dim 8 --norms rms --seeds 1 --dry-run
has "the job keeps all three" "$tmp/out" 'run order --norm rms --seed 1 --adam-fix --no-fetch --dim 8$'
check "sweep reader --unidirectional --bn-everywhere" 0 "$NB" sweep reader --unidirectional --bn-everywhere --dim 8 --norms batch --seeds 1 --dry-run

# The structure: cmd/ compares no task name, and nothing cites files outside the repository.
if grep -rn 'strcmp(cfg->task\|strcmp(task->name' "$root/cmd/" >/dev/null; then not_ok "cmd/ compares no task name"; else ok "cmd/ compares no task name"; fi
if grep -rn 'PAPERS.md\|NUMERICS.md' --include=*.c --include=*.h "$root" | grep -v '/\.' >/dev/null; then
    not_ok "no code cites PAPERS.md or NUMERICS.md" "$(grep -rn 'PAPERS.md\|NUMERICS.md' --include=*.c --include=*.h "$root" | head -3)"
else ok "no code cites PAPERS.md or NUMERICS.md"; fi
if grep -rn '#include "nn/' "$root/datasets" "$root/results" >/dev/null; then not_ok "datasets/ and results/ include nothing from nn/"; else ok "datasets/ and results/ include nothing from nn/"; fi

# The test task: one file, one registration line, and the whole tool works with it.
if [ ! -x "$TOY" ]; then
    echo "1..$n"; echo "# the test build $TOY is missing (make $TOY)"; exit 1
fi
if grep -rn 'toy' "$root/cmd" "$root/tasks" "$root/nn" "$root/datasets" "$root/results" "$root/plots" "$root/util" >/dev/null; then
    not_ok "no product file names the test task"; else ok "no product file names the test task"; fi
export NORMBENCH_DB=$tmp/toy.db
check "the product has no toy task" 2 "$NB" run toy
check "the test build lists it in help" 0 "$TOY" help run toy
has "with its options and defaults per model" "$tmp/out" '^  --toy-width N +weights; default --model linear: 8; --model cubic: 4'
has "and per norm" "$tmp/out" '^  --toy-noise X +noise of the targets; default 0.1 \(none: 0.2\)'
has "an option of one model says so" "$tmp/out" '^  --shift X .*\[models: cubic\]'
check "an option of the other model is a usage error" 2 "$TOY" run toy --shift 1
has "it names the model that takes it" "$tmp/err" '--shift is an option of toy --model cubic, not of --model linear'
check "a toy option on mnist names toy" 2 "$TOY" run mnist --toy-width 3
has "as the task that takes it" "$tmp/err" '--toy-width is an option of the task\(s\) toy, not of .mnist.'
check "run toy --model cubic" 0 "$TOY" run toy --model cubic --shift 0.5 --center --toy-label 'a b' --quiet
cfg=$(sqlite3 "$NORMBENCH_DB" "select config from runs order by id desc limit 1")
if ok_json x 'assert d["model"] == "cubic" and d["toy_width"] == 4 and d["shift"] == 0.5 and d["center"] == "on" and d["toy_label"] == "a b" and d["toy_noise"] == 0.1, d'; then
    ok "its options in force are keys of the configuration"; else not_ok "its options in force are keys of the configuration" "$cfg"; fi
check "run toy --model linear" 0 "$TOY" run toy --quiet
cfg=$(sqlite3 "$NORMBENCH_DB" "select config from runs order by id desc limit 1")
if ok_json x 'assert "shift" not in d and d["toy_width"] == 8, d'; then
    ok "an option the model does not take is not in force"; else not_ok "an option the model does not take is not in force" "$cfg"; fi
check "sweep toy (jobs re-run the test build)" 0 "$TOY" sweep toy --norms none,rms --seeds 2 --toy-width 4,6 --center
has "four jobs finished" "$tmp/out" '^sweep: 8 jobs: 8 finished now'
finished=$(sqlite3 "$NORMBENCH_DB" "select count(*) from runs r join tags t on t.run = r.id and t.key = 'sweep' where status = 'finished' and json_extract(config, '$.center') = 'on'")
if [ "$finished" = 8 ]; then ok "the sweep's flag reached its jobs"; else not_ok "the sweep's flag reached its jobs" "$finished"; fi
check "report --task toy" 0 "$TOY" report --task toy
has "report shows toy's norms" "$tmp/out" '^  rms +2 '
check "plot --task toy" 0 "$TOY" plot --task toy --variant '--toy-width 4' --out "$tmp/toy.svg"
if [ -s "$tmp/toy.svg" ]; then ok "plot wrote the figure"; else not_ok "plot wrote the figure"; fi
check "resume is refused for a finished toy run" 1 "$TOY" run --resume 1
echo "1..$n"
[ "$fails" -eq 0 ]
