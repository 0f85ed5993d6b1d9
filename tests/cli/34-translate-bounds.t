#!/bin/bash
# Command-line tests of `translate`'s bounds: a line longer than the model takes (test_bleu's
# rule: the longest source sentence of the run's data) is refused with an empty output line and
# exit status 3, whatever its length; memory stays bounded (under `ulimit -v`) by
# --batch-tokens, which is refused up front when one line of the longest cannot fit; input that
# is not text (a NUL byte) is refused naming the line, as `bleu` does, and other bytes are
# translated; batching by length changes no translation (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DB=$tmp/t.db
export NORMBENCH_DATA=$tmp/data

# two tiny runs on the synthetic transduction: RNNSearch (1) and the Transformer (2)
check "a tiny RNNSearch run" 0 "$NB" run mt --dataset synthetic --dim-word 16 --dim 32 --batch 16 --steps 20 --eval-every 20 --val-bleu-max 10 --test-max 10 --threads 2 --quiet
check "a tiny Transformer run" 0 "$NB" run mt --model transformer --layers 1 --dim 16 --heads 2 --ffn 24 --dataset synthetic --batch 8 --steps 2 --eval-every 2 --val-bleu-max 4 --test-max 4 --threads 2 --quiet

# words of the synthetic source that are one BPE piece each (whole words of its vocabulary)
words=$(grep -v -e '@@$' -e '^[.,]$' "$NORMBENCH_DB-checkpoints/run-1.model/src.vocab" | head -n 8 | tr '\n' ' ')
w=$(echo $words | cut -d' ' -f1)
# the longest line the model takes, from what translate says of a line too long
python3 -c "import sys; print(' '.join([sys.argv[1]] * 3000))" "$w" >"$tmp/long"
# (the old build worked on it for 32 s and 1.6 GB, then printed a translation and exited 0;
# timeout 60 bounds a hang: how long it takes is not a test)
check "a line of 3,000 words: translated as refused (exit 3)" 3 timeout 60 "$NB" translate 1 <"$tmp/long"
has "it names the line and the limit" "$tmp/err" "^error: standard input line 1 has more than [0-9]+ bytes, so more than the [0-9]+ BPE pieces this model takes: its output line is empty$"
has "and says how many lines were refused" "$tmp/err" "^error: 1 of 1 lines were too long to translate \(at most [0-9]+ BPE pieces, the longest source sentence of run 1's data\)$"
has "with a hint" "$tmp/err" "^hint: split those lines"
[ "$(cat "$tmp/out")" = "" ] && [ "$(wc -l <"$tmp/out")" = 1 ] && ok "its output line is empty" || not_ok "its output line is empty" "$(head -c 300 "$tmp/out")"
smax=$(sed -n 's/.*so more than the \([0-9]*\) BPE pieces.*/\1/p' "$tmp/err" | head -n 1)

# a line just over the limit (counted in pieces, not bytes) and one at it: the synthetic
# source words are single pieces
python3 -c "import sys; n = int(sys.argv[1]); print(' '.join([sys.argv[2]] * n)); print(' '.join([sys.argv[2]] * (n + 1)))" "$smax" "$w" >"$tmp/edge"
check "a line of the most pieces translates, one more is refused" 3 "$NB" translate 1 <"$tmp/edge"
has "the second line named, with its pieces" "$tmp/err" "^error: standard input line 2 has $((smax + 1)) BPE pieces, more than the $smax this model takes"
if grep -q "line 1 " "$tmp/err"; then not_ok "the first is not refused" "$(cat "$tmp/err")"; else ok "the first is not refused"; fi
[ -n "$(sed -n 1p "$tmp/out")" ] && [ -z "$(sed -n 2p "$tmp/out")" ] && ok "line 1 translated, line 2 empty" || not_ok "line 1 translated, line 2 empty" "$(cat "$tmp/out")"

# batching by length changes no translation: 79 lines of varied lengths translated in the
# default batches and one line a batch (--batch-tokens = the longest line) give the same
python3 - "$tmp/short" $words <<'PY'
import random, sys
random.seed(7)
words = sys.argv[2:]
with open(sys.argv[1], 'w') as f:
    for i in range(79):
        f.write(' '.join(random.choice(words) for _ in range(random.randint(1, 12))) + '\n')
PY
for r in 1 2; do
    check "run $r: 79 lines, default batches" 0 "$NB" translate $r <"$tmp/short"
    cp "$tmp/out" "$tmp/b0"
    check "run $r: one line a batch (--batch-tokens $smax)" 0 "$NB" translate $r --batch-tokens "$smax" <"$tmp/short"
    [ "$(wc -l <"$tmp/b0")" = 79 ] && cmp -s "$tmp/b0" "$tmp/out" && ok "run $r: the same 79 translations in input order" || not_ok "run $r: the same 79 translations in input order" "$(diff "$tmp/b0" "$tmp/out" | head)"
done

# --batch-tokens that cannot hold one line of the longest is refused before any input is read
check "--batch-tokens below the longest line is refused" 1 sh -c "echo ka | '$NB' translate 1 --batch-tokens $((smax - 1))"
has "naming the option and what it must be" "$tmp/err" "^error: --batch-tokens $((smax - 1)) cannot hold one line of the $smax pieces this model takes"
has "the hint names translate's option only" "$tmp/err" "^hint: give --batch-tokens $smax or more"
[ ! -s "$tmp/out" ] && ok "nothing written" || not_ok "nothing written"
check "--batch-tokens 0 is a usage error" 2 "$NB" translate 1 --batch-tokens 0
check "--dim is not translate's" 2 "$NB" translate 1 --dim 8

# Not text: a NUL byte is refused naming its line, as `bleu` refuses it
check "a NUL byte on line 2 is refused" 1 sh -c "printf 'ka lo\nmi\000zu\nte\n' | '$NB' translate 1"
has "naming line 2" "$tmp/err" "^error: standard input line 2 holds a NUL byte: not text$"
printf 'ka lo\nmi zu\nte\n' >"$tmp/ref"
check "bleu refuses it too" 1 sh -c "printf 'ka lo\nmi\000zu\nte\n' | '$NB' bleu '$tmp/ref'"
has "naming line 2" "$tmp/err" "line 2 holds a NUL byte"
# invalid UTF-8 and control bytes are words, for translate as for bleu
check "invalid UTF-8 and control bytes translate" 0 sh -c "printf '\377\376 ka\001 lo\n\300\n' | '$NB' translate 1"
[ "$(wc -l <"$tmp/out")" = 2 ] && ok "two lines out" || not_ok "two lines out"
check "bleu reads them too" 0 sh -c "printf '\377\376 ka\001 lo\n\300\n' | '$NB' bleu '$tmp/ref' 2>/dev/null; printf '\377\376 ka\001 lo\n\300\nx\n' | '$NB' bleu '$tmp/ref'"

# 2 MB of random bytes: refused at its first NUL byte; without NUL bytes, every line out (the
# long ones empty), exit 3 (the old build was still at it after 9 minutes: a timeout bounds both,
# 60 s, or 600 s for an AddressSanitizer build, which decodes the ~4,000 short lines, each up to
# Nematus' 200 tokens, several times slower)
hang=60
[ "$asan" = 1 ] && hang=600
head -c 2000000 /dev/urandom >"$tmp/rnd"
first=$(python3 -c "import sys; d = open(sys.argv[1], 'rb').read(); print(d[:d.index(b'\0')].count(b'\n') + 1)" "$tmp/rnd")
check "2 MB of random bytes are refused" 1 timeout $hang "$NB" translate 1 <"$tmp/rnd"
has "at the line of the first NUL byte ($first)" "$tmp/err" "^error: standard input line $first holds a NUL byte: not text$"
tr -d '\000' <"$tmp/rnd" >"$tmp/rnd2"
lines=$(python3 -c "import sys; d = open(sys.argv[1], 'rb').read(); print(d.count(b'\n') + (not d.endswith(b'\n')))" "$tmp/rnd2")
check "the same bytes without NUL: exit 3" 3 timeout $hang "$NB" translate 1 <"$tmp/rnd2"
[ "$(wc -l <"$tmp/out")" = "$lines" ] && ok "one output line per input line ($lines)" || not_ok "one output line per input line ($(wc -l <"$tmp/out") for $lines)"

# Memory, under `ulimit -v` (AddressSanitizer cannot start under it: skipped there). The old
# translate built its model for the longest line x 80 lines x beam: 79 short lines and one of
# 1,000 words asked for gigabytes. Now the long line is refused and the rest translate within
# 1 GB of address space, for both models. (One BLAS thread, and a timeout: OpenBLAS retries
# forever when its own buffers do not fit.)
python3 - "$tmp/mix" "$w" <<'PY'
import sys
with open(sys.argv[1], 'w') as f:
    for i in range(80):
        f.write(' '.join([sys.argv[2]] * (1000 if i == 39 else 5)) + '\n')
PY
if [ $asan = 1 ]; then
    for i in $(seq 12); do n=$((n + 1)); echo "ok $n # skip AddressSanitizer build: no ulimit -v"; done
else
    for r in 1 2; do
        ( ulimit -v 1000000; OPENBLAS_NUM_THREADS=1 exec timeout 60 "$NB" translate $r ) <"$tmp/mix" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [ "$rc" = 3 ] && ok "run $r: 79 short lines and one of 1,000 words under ulimit -v 1 GB: exit 3" || not_ok "run $r: under ulimit -v 1 GB: exit $rc, want 3" "$(cat "$tmp/err")"
        has "run $r: line 40 refused" "$tmp/err" "^error: standard input line 40 has"
        [ "$(grep -c . "$tmp/out")" = 79 ] && [ -z "$(sed -n 40p "$tmp/out")" ] && ok "run $r: 79 translations and an empty line 40" || not_ok "run $r: 79 translations and an empty line 40" "$(cat "$tmp/out")"
    done
    # a model whose default batch (the run's --eval-batch 300 lines) needs about 1 GiB: refused
    # up front under the limit, naming --batch-tokens and a value that fits, which then works
    check "a Transformer run with --eval-batch 300" 0 "$NB" run mt --model transformer --layers 1 --dec-layers 2 --dim 256 --heads 4 --ffn 512 --dataset synthetic --batch 8 --eval-batch 300 --steps 1 --eval-every 1 --val-bleu-max 2 --test-max 2 --threads 2 --quiet
    big=$(sqlite3 "$NORMBENCH_DB" "select max(id) from runs")
    ( ulimit -v 1000000; OPENBLAS_NUM_THREADS=1 exec timeout 60 "$NB" translate $big ) <"$tmp/short" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" = 1 ] && ok "its default batches are refused under ulimit -v 1 GB" || not_ok "its default batches are refused under ulimit -v 1 GB (exit $rc)" "$(cat "$tmp/err")"
    has "before they are built, naming the option, the size and the limit" "$tmp/err" "^error: --batch-tokens [0-9]+ \(300 lines a batch\) needs about [0-9.]+ (GiB|MiB), more than the [0-9]+ MiB left in the address-space limit \(ulimit -v\)$"
    [ ! -s "$tmp/out" ] && ok "nothing written" || not_ok "nothing written"
    fit=$(sed -n 's/^hint: give --batch-tokens \([0-9]*\) or less.*/\1/p' "$tmp/err")
    ( ulimit -v 1000000; OPENBLAS_NUM_THREADS=1 exec timeout 60 "$NB" translate $big --batch-tokens "$fit" ) <"$tmp/short" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" = 0 ] && [ "$(wc -l <"$tmp/out")" = 79 ] && ok "the --batch-tokens the hint gives ($fit) translates under the same limit" || not_ok "--batch-tokens '$fit' under the same limit (exit $rc)" "$(cat "$tmp/err")"
    # random bytes without NUL under the same limit
    ( ulimit -v 1000000; OPENBLAS_NUM_THREADS=1 exec timeout 60 "$NB" translate 2 ) <"$tmp/rnd2" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" = 3 ] && ok "random bytes through the Transformer under ulimit -v 1 GB: exit 3" || not_ok "random bytes under ulimit -v 1 GB: exit $rc, want 3" "$(tail -n 3 "$tmp/err")"
fi

echo "1..$n"
[ "$fails" -eq 0 ]
