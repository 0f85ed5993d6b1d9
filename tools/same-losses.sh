#!/bin/bash
# Every recorded metric of short, fixed-seed runs of each task with each norm it takes, as text:
# two binaries that print the same file train bit-identically (issue 31's check that moving the
# norms behind one interface changed no loss). Wall-time metrics (seconds, ms per step, tokens per
# second) are left out; every other value is printed with 17 significant digits.
#
#   tools/same-losses.sh BINARY OUT.txt [NORMS]
#
# NORMS: a comma-separated list (default: every name --norm takes in BINARY's `run --help`). A
# norm a task refuses is listed as "refused (exit N)". The runs: --dataset synthetic, 20 steps,
# --seed 7, --threads 1, --log-every 1, small sizes (a few minutes in all on one core); each run
# in a fresh store under a temporary directory. ONLY=mnist,cifar,... (the names below) runs only
# those configurations.
set -u
BIN=${1:?usage: tools/same-losses.sh BINARY OUT.txt [NORMS]}
OUT=${2:?usage: tools/same-losses.sh BINARY OUT.txt [NORMS]}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
if [ -n "${3:-}" ]; then
  NORMS=$(echo "$3" | tr ',' ' ')
else
  NORMS=$("$BIN" run --help | sed -n 's/^ *--norm NAME .*(\([a-z|-]*\))$/\1/p' | tr '|' ' ')
fi
[ -n "$NORMS" ] || { echo "same-losses: no norm list from $BIN run --help" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "same-losses: sqlite3 is needed" >&2; exit 2; }
TMP=$(mktemp -d) || exit 2
trap 'rm -rf "$TMP"' EXIT
COMMON="--dataset synthetic --steps 20 --seed 7 --threads 1 --log-every 1 --quiet --no-fetch"
# name|task options
CONFIGS=(
  "mnist|mnist"
  "cifar|cifar --width 0.125 --batch 16 --subset 320"
  "order|order --dim 64 --dim-word 32 --eval-every 10 --batch 16 --subset 320"
  "reader|reader --dim 32 --eval-every 10"
  "mt-rnnsearch|mt --model rnnsearch --dim-word 32 --dim 48 --eval-every 10 --val-bleu-max 8 --test-max 8 --beam 2"
  "mt-transformer-post|mt --model transformer --dim 32 --heads 2 --ffn 64 --layers 2 --norm-position post --eval-every 10 --val-bleu-max 8 --test-max 8 --beam 2"
  "mt-transformer-pre|mt --model transformer --dim 32 --heads 2 --ffn 64 --layers 2 --norm-position pre --eval-every 10 --val-bleu-max 8 --test-max 8 --beam 2"
  "lm-pre|lm --layers 2 --heads 2 --dim 32 --context 32 --norm-position pre --eval-every 10 --eval-windows 8"
  "lm-post|lm --layers 2 --heads 2 --dim 32 --context 32 --norm-position post --eval-every 10 --eval-windows 8"
)
: >"$OUT" || exit 2
for c in "${CONFIGS[@]}"; do
  name=${c%%|*}
  args=${c#*|}
  if [ -n "${ONLY:-}" ] && ! echo ",$ONLY," | grep -q ",$name,"; then continue; fi
  for n in $NORMS; do
    db="$TMP/$name-$n.db"
    # shellcheck disable=SC2086
    (cd "$TMP" && OMP_NUM_THREADS=1 "$BIN" run $args --norm "$n" $COMMON --db "$db" \
      >"$TMP/log" 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
      echo "== $name $n: refused (exit $rc)" >>"$OUT"
      [ $rc -eq 2 ] || { echo "same-losses: $name $n failed (exit $rc):" >&2; tail -3 "$TMP/log" >&2; }
      continue
    fi
    echo "== $name $n" >>"$OUT"
    sqlite3 "$db" "SELECT name, step, kind, printf('%.17g', value) FROM metrics
                   WHERE name NOT LIKE '%seconds%' AND name NOT LIKE 'ms\_%' ESCAPE '\'
                     AND name NOT LIKE '%\_ms' ESCAPE '\' AND name NOT LIKE '%per\_s%' ESCAPE '\'
                     AND name NOT LIKE '%wall%'
                   ORDER BY name, step" >>"$OUT"
  done
done
echo "same-losses: $(grep -c '^== ' "$OUT") runs ($(grep -c 'refused' "$OUT") refused) in $OUT"
