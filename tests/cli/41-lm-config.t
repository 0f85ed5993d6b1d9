#!/bin/bash
# Command-line tests of what an lm run records about its model: the activation its MLP really
# uses (GELU in its tanh form, not --act's default relu), --act refused, help's defaults (TAP).
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DB=$tmp/lm.db
tiny="--dataset synthetic --layers 1 --dim 16 --heads 2 --context 16 --batch 4 --eval-windows 8 --threads 1 --quiet"
q() { sqlite3 "$NORMBENCH_DB" "$1"; }

check "a short lm run" 0 "$NB" run lm $tiny --steps 2 --eval-every 2
run=$(q "select max(id) from runs")
act=$(q "select json_extract(config, '$.activation') from runs where id = $run")
[ "$act" = "gelu-tanh" ] && ok "it records its activation as gelu-tanh" || not_ok "it records its activation as gelu-tanh (got '$act')"
check "show the run" 0 "$NB" show $run
has "show says gelu-tanh" "$tmp/out" 'gelu-tanh'
check "--act is refused for lm" 2 "$NB" run lm $tiny --steps 2 --act tanh
has "saying the MLP's activation is GELU" "$tmp/err" "cannot use --act: its MLP's activation is GELU"
check "help run lm" 0 "$NB" help run lm
has "its defaults name gelu-tanh" "$tmp/out" '--act gelu-tanh'
check "help run mnist" 0 "$NB" help run mnist
has "mnist's default stays relu" "$tmp/out" '--act relu'
echo "1..$n"
exit $((fails > 0))
