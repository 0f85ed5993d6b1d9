#!/bin/bash
# A run recorded by an earlier normbench, before one of its task's options existed (cifar's
# --conv, --precision and --grad-sums; mt's --src-eos, --beam-rules, --decode-cap and
# --batch-order), resumes with what normbench did then (the option's legacy value): its stored
# configuration lacks the key, and that is not "another run". A missing key of any other option
# is still refused (63-resume-config.t) (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
metrics() { sqlite3 "$1" "select name, step, value from metrics where run = $2 and name not in ('ms_per_step', 'epoch_seconds') order by name, step"; }
small="cifar --dataset synthetic --width 0.125 --subset 200 --steps 4 --seed 3 --quiet"

# the reference: the same run made now with the former behaviours given as options
check "a cifar run with --grad-sums batch (the behaviour before the option)" 0 "$NB" run $small --grad-sums batch --db "$tmp/ref.db"
ref=$(metrics "$tmp/ref.db" 1)
[ -n "$ref" ] && ok "... it recorded metrics" || not_ok "... it recorded metrics"

# the same run at today's defaults, its configuration then made to look like an earlier normbench's
check "a cifar run at the defaults" 0 "$NB" run $small --db "$tmp/old.db"
sqlite3 "$tmp/old.db" "update runs set status = 'interrupted', config = json_remove(config, '$.conv', '$.precision', '$.grad_sums') where id = 1"
sqlite3 "$tmp/old.db" "delete from metrics where run = 1"
sqlite3 "$tmp/old.db" "select config from runs where id = 1" | grep -q -e '"conv"' -e '"grad_sums"' -e '"precision"' &&
    not_ok "the stored configuration lost conv, precision and grad_sums" || ok "the stored configuration lost conv, precision and grad_sums"
check "it resumes (from scratch: no checkpoint)" 0 "$NB" run --resume 1 --from-scratch --db "$tmp/old.db" --quiet
got=$(metrics "$tmp/old.db" 1)
[ -n "$ref" ] && [ "$ref" = "$got" ] && ok "... as the earlier normbench ran it: im2col, fp32, batch sums (the reference's metrics)" ||
    not_ok "... the reference's metrics" "$ref
---
$got"
check "runs says it finished" 0 "$NB" runs --db "$tmp/old.db"
has "... finished" "$tmp/out" "^ *1 .* finished "

# a key without a legacy value is still refused
check "a cifar run to break" 0 "$NB" run $small --db "$tmp/w.db"
sqlite3 "$tmp/w.db" "update runs set status = 'interrupted', config = json_remove(config, '$.width') where id = 1"
check "a stored configuration without width is refused" 1 "$NB" run --resume 1 --from-scratch --db "$tmp/w.db"
has "... naming it" "$tmp/err" "its stored configuration has no 'width'"

# a legacy value is only for a missing key: a stored value is taken as recorded
check "a cifar run with --conv winograd" 0 "$NB" run $small --conv winograd --db "$tmp/wg.db"
sqlite3 "$tmp/wg.db" "update runs set status = 'interrupted' where id = 1"
sqlite3 "$tmp/wg.db" "delete from metrics where run = 1"
check "it resumes from scratch" 0 "$NB" run --resume 1 --from-scratch --db "$tmp/wg.db" --quiet
check "show" 0 "$NB" show 1 --db "$tmp/wg.db"
has "... still winograd" "$tmp/out" '"conv": "winograd"'

# mt: a synthetic run without the four keys of issue 35 resumes
mt="mt --dataset synthetic --dim-word 8 --dim 16 --steps 4 --eval-every 4 --test-max 3 --val-bleu-max 3 --quiet"
check "an mt run at the defaults" 0 "$NB" run $mt --db "$tmp/mt.db"
sqlite3 "$tmp/mt.db" "update runs set status = 'interrupted', config = json_remove(config, '$.src_eos', '$.beam_rules', '$.decode_cap', '$.batch_order') where id = 1"
check "without src_eos, beam_rules, decode_cap and batch_order it resumes" 0 "$NB" run --resume 1 --from-scratch --db "$tmp/mt.db" --quiet
check "runs" 0 "$NB" runs --db "$tmp/mt.db"
has "... finished" "$tmp/out" "^ *1 .* finished "

echo "1..$n"
exit $((fails > 0))
