#!/bin/bash
# Damaged gzip files are refused (issue 30, item 5): libarchive's gzip filter never checks a
# member's trailer, so one flipped bit that still inflates used to be read as good data (bleu
# printed 100.00 against a damaged reference, run mt trained on it). Every gzip stream is now
# read to its end with each member's CRC-32 and length checked; a mismatch names the file.
# Runs on small files made here with gzip; the real Multi30k and Debian's Fashion-MNIST are used
# too where present (NB_TEST_MULTI30K; dataset-fashion-mnist).
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DATA=$tmp/data NORMBENCH_DB=$tmp/nb.db
unset NORMBENCH_MIRROR
# flip SRC DST text|bin: DST = SRC with the first bit from the middle on whose flip still
# inflates to the end, to other bytes of the same length (text: the same lines, no NUL), so
# that only the CRC-32 tells; prints the offset and how many lines differ
cat >"$tmp/flip.py" <<'PY'
import sys, zlib
src, dst, text = sys.argv[1], sys.argv[2], sys.argv[3] == "text"
d = open(src, "rb").read()
flg, p = d[3], 10
if flg & 4:
    p += 2 + (d[p] | d[p + 1] << 8)
if flg & 8:
    p = d.index(b"\0", p) + 1
if flg & 16:
    p = d.index(b"\0", p) + 1
if flg & 2:
    p += 2
orig = zlib.decompress(d, 31)
for off in range(max(p, len(d) // 2), len(d) - 8):
    for bit in range(8):
        c = bytearray(d)
        c[off] ^= 1 << bit
        o = zlib.decompressobj(-15)
        try:
            x = o.decompress(bytes(c[p:]))
        except zlib.error:
            continue
        if not o.eof or x == orig or len(x) != len(orig):
            continue
        if text and (b"\0" in x or x.count(b"\n") != orig.count(b"\n")):
            continue
        open(dst, "wb").write(c)
        print(off, sum(a != b for a, b in zip(x.split(b"\n"), orig.split(b"\n"))))
        sys.exit(0)
sys.exit(1)
PY
flip() { python3 "$tmp/flip.py" "$@"; }
# corrupt DESC FILE: a damaged-gzip refusal naming FILE in $tmp/err
corrupt() { has "$1" "$tmp/err" "'[^']*$(basename "$2")' is damaged: gzip CRC-32 or length mismatch"; }

# Small text made here: 3,000 lines, 2 gzip files.
awk 'BEGIN { for (i = 1; i <= 3000; i++) printf "a man number %d rides a %s bike near the %s house\n", i, (i % 3 ? "red" : "blue"), (i % 7 ? "old" : "new") }' >"$tmp/en.txt"
awk 'BEGIN { for (i = 1; i <= 3000; i++) printf "ein mann nummer %d faehrt ein %s rad am %s haus\n", i, (i % 3 ? "rotes" : "blaues"), (i % 7 ? "alten" : "neuen") }' >"$tmp/de.txt"
gzip -n -c "$tmp/en.txt" >"$tmp/en.gz"
gzip -n -c "$tmp/de.txt" >"$tmp/de.gz"
at=$(flip "$tmp/de.gz" "$tmp/bad.gz" text) && ok "a bit flip that still inflates found ($at)" || not_ok "a bit flip that still inflates found"
gzip -t "$tmp/bad.gz" 2>"$tmp/gz-err" && not_ok "gzip -t rejects it" || ok "gzip -t rejects it ($(tr -d '\n' <"$tmp/gz-err"))"
check "bleu against the intact reference: 100" 0 "$NB" bleu "$tmp/de.gz" <"$tmp/de.txt"
has "it scores 100.00" "$tmp/out" "^BLEU 100.00"
check "bleu with the damaged reference is refused" 1 "$NB" bleu "$tmp/bad.gz" <"$tmp/de.txt"
corrupt "the refusal names bad.gz and the CRC" "$tmp/bad.gz"
[ ! -s "$tmp/out" ] && ok "no score is printed" || not_ok "no score is printed" "$(cat "$tmp/out")"
# the trailer itself damaged (the data intact): CRC-32 field, then length field
size=$(stat -c %s "$tmp/de.gz")
cp "$tmp/de.gz" "$tmp/tcrc.gz"
printf '\x55' | dd of="$tmp/tcrc.gz" bs=1 seek=$((size - 6)) conv=notrunc status=none
check "a damaged trailer CRC-32 is refused" 1 "$NB" bleu "$tmp/tcrc.gz" <"$tmp/de.txt"
corrupt "it names tcrc.gz" "$tmp/tcrc.gz"
cp "$tmp/de.gz" "$tmp/tlen.gz"
printf '\x01' | dd of="$tmp/tlen.gz" bs=1 seek=$((size - 1)) conv=notrunc status=none
check "a damaged trailer length is refused" 1 "$NB" bleu "$tmp/tlen.gz" <"$tmp/de.txt"
corrupt "it names tlen.gz" "$tmp/tlen.gz"
head -c $((size - 3)) "$tmp/de.gz" >"$tmp/short.gz"
check "a truncated stream is refused" 1 "$NB" bleu "$tmp/short.gz" <"$tmp/de.txt"
has "it names short.gz" "$tmp/err" "short.gz"
{ cat "$tmp/de.gz"; printf 'junk after the stream'; } >"$tmp/junk.gz"
check "bytes after the last member are refused" 1 "$NB" bleu "$tmp/junk.gz" <"$tmp/de.txt"
corrupt "it names junk.gz" "$tmp/junk.gz"
# several members (cat a.gz b.gz, as gzip itself reads them): each one checked
cat "$tmp/de.gz" "$tmp/de.gz" >"$tmp/two.gz"
cat "$tmp/de.txt" "$tmp/de.txt" >"$tmp/two.txt"
check "two concatenated members are read" 0 "$NB" bleu "$tmp/two.gz" <"$tmp/two.txt"
has "as the text of both" "$tmp/out" "^BLEU 100.00"
head -n 1500 "$tmp/de.txt" | gzip -n >"$tmp/split.gz"
: | gzip -n >>"$tmp/split.gz"
tail -n 1500 "$tmp/de.txt" | gzip -n >>"$tmp/split.gz"
check "three members, one empty, are read" 0 "$NB" bleu "$tmp/split.gz" <"$tmp/de.txt"
cat "$tmp/bad.gz" "$tmp/de.gz" >"$tmp/badfirst.gz"
check "a damaged first member of two is refused" 1 "$NB" bleu "$tmp/badfirst.gz" <"$tmp/two.txt"
corrupt "it names badfirst.gz" "$tmp/badfirst.gz"

# run mt on a Multi30k laid out by hand (not fetched: the loader checks the files) with a damaged
# train.de.gz: refused before training, naming it
d=$tmp/dd/multi30k
mkdir -p "$d"
for s in train val test_2016_flickr test_2017_flickr; do
    cp "$tmp/en.gz" "$d/$s.en.gz"
    cp "$tmp/de.gz" "$d/$s.de.gz"
done
cp "$tmp/bad.gz" "$d/train.de.gz"
small="--dim-word 16 --dim 16 --batch 16 --threads 2 --steps 1 --quiet"
check "run mt on a damaged train.de.gz is refused" 1 timeout 120 "$NB" run mt --data-dir "$tmp/dd" $small
corrupt "it names train.de.gz" "$d/train.de.gz"

# The real Multi30k: the issue's case (a flip in the middle of train.de.gz, 5 lines differ).
m30k=${NB_TEST_MULTI30K:-}
if [ -n "$m30k" ] && [ -f "$m30k/train.de.gz" ]; then
    mkdir -p "$tmp/M" "$tmp/dm/multi30k"
    cp "$m30k"/*.gz "$tmp/M/"
    at=$(flip "$m30k/train.de.gz" "$tmp/M/train.de.gz" text) && ok "Multi30k train.de.gz: a flip found ($at)" || not_ok "Multi30k train.de.gz: a flip found"
    zcat "$m30k/train.de.gz" >"$tmp/train.de"
    check "bleu with the damaged train.de.gz as reference is refused" 1 "$NB" bleu "$tmp/M/train.de.gz" <"$tmp/train.de"
    corrupt "it names train.de.gz" "$tmp/M/train.de.gz"
    check "fetch multi30k --from the damaged copy is refused" 1 "$NB" fetch multi30k --from "$tmp/M" --data-dir "$tmp/dmf" --quiet
    has "it names train.de.gz" "$tmp/err" "train.de.gz"
    [ ! -e "$tmp/dmf/multi30k" ] && ok "nothing is installed" || not_ok "nothing is installed"
    cp "$tmp/M"/*.gz "$tmp/dm/multi30k/"
    check "run mt on it is refused" 1 timeout 120 "$NB" run mt --data-dir "$tmp/dm" $small
    corrupt "it names train.de.gz" "$tmp/dm/multi30k/train.de.gz"
else
    for i in 1 2 3 4 5 6 7 8; do n=$((n + 1)); echo "ok $n # skip no Multi30k copy (NB_TEST_MULTI30K unset)"; done
fi

# IDX files: Debian's Fashion-MNIST with a label flipped (the flip inflates; only the CRC tells)
fm=/usr/share/datasets/fashion-mnist
if [ -f "$fm/t10k-labels-idx1-ubyte.gz" ]; then
    mkdir -p "$tmp/F" "$tmp/df/fashion-mnist"
    cp "$fm"/*.gz "$tmp/F/"
    at=$(flip "$fm/t10k-labels-idx1-ubyte.gz" "$tmp/F/t10k-labels-idx1-ubyte.gz" bin) && ok "Fashion-MNIST labels: a flip found ($at)" || not_ok "Fashion-MNIST labels: a flip found"
    check "fetch fashion-mnist --from the damaged copy is refused" 1 "$NB" fetch fashion-mnist --from "$tmp/F" --data-dir "$tmp/dff" --quiet
    corrupt "it names the labels file" "$tmp/F/t10k-labels-idx1-ubyte.gz"
    cp "$tmp/F"/*.gz "$tmp/df/fashion-mnist/"
    check "run mnist on it is refused" 1 "$NB" run mnist --dataset fashion-mnist --data-dir "$tmp/df" --steps 1 --subset 256 --quiet
    corrupt "it names the labels file" "$tmp/df/fashion-mnist/t10k-labels-idx1-ubyte.gz"
else
    for i in 1 2 3 4 5; do n=$((n + 1)); echo "ok $n # skip dataset-fashion-mnist is not installed"; done
fi

echo "1..$n"
[ "$fails" -eq 0 ]
