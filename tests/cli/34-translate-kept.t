#!/bin/bash
# Command-line tests of the model a finished mt run keeps for `translate`: it records the run and
# the store it belongs to and the codes and vocabularies it was kept with, and translate refuses
# it in another run or store, with changed files, damaged, or kept by an older normbench (format
# 1, which records none of it) — instead of printing another run's translations as this run's
# (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DATA=$tmp/data
tiny="--dataset synthetic --dim-word 16 --dim 32 --batch 16 --steps 20 --eval-every 20 --val-bleu-max 10 --test-max 10 --threads 2 --quiet"

# two stores, each with a run 1 of the same shape (seeds 1 and 2: different parameters), and a
# run 2 of that shape in the first
check "store A, run 1" 0 "$NB" run mt $tiny --seed 1 --db "$tmp/a.db"
check "store A, run 2" 0 "$NB" run mt $tiny --seed 2 --db "$tmp/a.db"
check "store B, run 1" 0 "$NB" run mt $tiny --seed 2 --db "$tmp/b.db"
A=$tmp/a.db-checkpoints/run-1.model
A2=$tmp/a.db-checkpoints/run-2.model
B=$tmp/b.db-checkpoints/run-1.model
printf 'mo ke ta\nsu rany zany\n' >"$tmp/in"
check "A's run 1 translates" 0 "$NB" translate 1 --db "$tmp/a.db" <"$tmp/in"
cp "$tmp/out" "$tmp/a1"
check "B's run 1 translates" 0 "$NB" translate 1 --db "$tmp/b.db" <"$tmp/in"
cp "$tmp/out" "$tmp/b1"
cmp -s "$tmp/a1" "$tmp/b1" && not_ok "the two models translate differently (else the swap test proves nothing)" || ok "the two models translate differently"

# B's params in A's run 1: refused (the old translate printed B's translations as A's)
cp -a "$A" "$tmp/a1.keep"
cp "$B/params" "$A/params"
check "another store's params in run 1's model are refused" 1 "$NB" translate 1 --db "$tmp/a.db" <"$tmp/in"
has "naming the model and the store it was written for" "$tmp/err" "^error: the model '.*/a\.db-checkpoints/run-1\.model/params' belongs to another run: it was written for store [0-9a-f]+, this store is [0-9a-f]+"
has "with a hint" "$tmp/err" "^hint: it was copied from another store or run"
[ ! -s "$tmp/out" ] && ok "no translation printed" || not_ok "no translation printed" "$(cat "$tmp/out")"
# B's whole model directory: refused the same way
rm -rf "$A" && cp -a "$B" "$A"
check "another store's whole model is refused" 1 "$NB" translate 1 --db "$tmp/a.db" <"$tmp/in"
has "as belonging to another store" "$tmp/err" "belongs to another run: it was written for store"
# run 2's model (same store, same shape) in run 1's place
rm -rf "$A" && cp -a "$A2" "$A"
check "run 2's model in run 1's place is refused" 1 "$NB" translate 1 --db "$tmp/a.db" <"$tmp/in"
has "naming both runs" "$tmp/err" "belongs to another run: it belongs to run 2, not 1"
# the right model back: it translates as before
rm -rf "$A" && cp -a "$tmp/a1.keep" "$A"
check "run 1's own model translates again" 0 "$NB" translate 1 --db "$tmp/a.db" <"$tmp/in"
cmp -s "$tmp/out" "$tmp/a1" && ok "as before" || not_ok "as before"

# a changed vocabulary (two pieces swapped): refused, naming the file
cp "$A/src.vocab" "$tmp/sv"
awk 'NR == 2 { l = $0; next } NR == 3 { print; print l; next } { print }' "$tmp/sv" >"$A/src.vocab"
check "a changed src.vocab is refused" 1 "$NB" translate 1 --db "$tmp/a.db" <"$tmp/in"
has "naming it" "$tmp/err" "^error: '.*/run-1\.model/src\.vocab' is not the file the model '.*/params' was kept with"
cp "$tmp/sv" "$A/src.vocab"
# a damaged parameter: refused
cp "$A/params" "$tmp/p"
python3 -c "import sys; p = sys.argv[1]; d = bytearray(open(p, 'rb').read()); d[len(d) // 2] ^= 0x40; open(p, 'wb').write(d)" "$A/params"
check "a damaged params is refused" 1 "$NB" translate 1 --db "$tmp/a.db" <"$tmp/in"
has "as damaged" "$tmp/err" "^error: the model '.*/params' is damaged"
cp "$tmp/p" "$A/params"

# a model kept by an older normbench (format 1: the magic, "N HASH", the parameters; no run or
# store recorded) is refused, saying how to get one that can be checked
python3 - "$A/params" <<'PY'
import struct, sys
p = sys.argv[1]
d = open(p, 'rb').read()
magic = b"normbench-mt-params 3\n"
head = 128 + 8 + 24 + 8 + 16
n = struct.unpack_from('<Q', d, len(magic) + 128 + 8 + 24)[0]
floats = d[len(magic) + head:len(magic) + head + 4 * n]
h = 1469598103934665603
for b in floats:
    h = ((h ^ b) * 1099511628211) & 0xffffffffffffffff
open(p, 'wb').write(b"normbench-mt-params 1\n" + b"%d %016x\n" % (n, h) + floats)
PY
check "a format-1 model is refused" 1 "$NB" translate 1 --db "$tmp/a.db" <"$tmp/in"
has "saying it was kept by an older normbench" "$tmp/err" "^error: the model '.*/params' was kept by an older normbench \(format 1, which does not record the run it belongs to\): it cannot be checked"
has "and how to get a new one" "$tmp/err" "^hint: train the run again"

echo "1..$n"
[ "$fails" -eq 0 ]
