#!/bin/bash
# Command-line tests of `normbench fetch multi30k` (TAP, for prove), offline: the eight published
# files served by tests/fetch_server.py on 127.0.0.1 (from NB_TEST_MULTI30K, default the files
# beside the repository when present; skipped otherwise), a drop mid-transfer that the next
# fetch resumes, a corrupted file refused, and `--from DIR`.
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DB=$tmp/nb.db
unset NORMBENCH_MIRROR NORMBENCH_DATA
# the published files, from NB_TEST_MULTI30K (make test passes it; CI sets it)
src=${NB_TEST_MULTI30K:-}
files="train.en.gz train.de.gz val.en.gz val.de.gz test_2016_flickr.en.gz test_2016_flickr.de.gz test_2017_flickr.en.gz test_2017_flickr.de.gz"
if [ -z "$src" ] || [ ! -r "$src/train.en.gz" ]; then
    echo "1..0 # SKIP the Multi30k files are not here (set NB_TEST_MULTI30K)"
    exit 0
fi
raw=$tmp/srv/multi30k/dataset/raw/master/data/task1/raw
mkdir -p "$raw" "$tmp/from"
for f in $files; do cp "$src/$f" "$raw/$f"; cp "$src/$f" "$tmp/from/$f"; done
valid() {
    if (cd "$2" && sha256sum --quiet -c MANIFEST.sha256 >/dev/null 2>&1); then ok "$1"; else not_ok "$1" "$(ls -la "$2" 2>&1)"; fi
}

check "datasets lists multi30k" 0 "$NB" datasets --data-dir "$tmp/d0"
has "multi30k is in the registry" "$tmp/out" "^multi30k\$"
has "wmt14-en-de is in the registry" "$tmp/out" "^wmt14-en-de\$"
has "multi30k's SHA-256 is pinned" "$tmp/out" "SHA-256 pinned"

fetch_server 120

# ok: the eight files, verified against the pinned digests, installed with a manifest
check "fetch multi30k through a mirror" 0 "$NB" fetch multi30k --mirror "http://127.0.0.1:$port/ok" --data-dir "$tmp/d1"
valid "the installed files match the manifest" "$tmp/d1/multi30k"
same=1
for f in $files; do cmp -s "$src/$f" "$tmp/d1/multi30k/$f" || same=0; done
[ "$same" = 1 ] && ok "the eight files are the published bytes" || not_ok "the eight files are the published bytes"

# drop: the server closes every file's first transfer halfway; the fetch retries with a range
check "a fetch through drops mid-transfer resumes and completes" 0 env NORMBENCH_TEST_BACKOFF_MS=10 "$NB" fetch multi30k --mirror "http://127.0.0.1:$port/drop" --data-dir "$tmp/d2"
valid "the resumed dataset matches its manifest" "$tmp/d2/multi30k"
cmp -s "$src/train.de.gz" "$tmp/d2/multi30k/train.de.gz" && ok "the resumed train.de.gz is the published file" || not_ok "the resumed train.de.gz is the published file"
ranged=$(python3 -c 'import json, sys, urllib.request
c = json.load(urllib.request.urlopen(sys.argv[1]))
print(c.get("/drop/multi30k/dataset/raw/master/data/task1/raw/train.de.gz", 0))' "http://127.0.0.1:$port/count")
[ "$ranged" -ge 2 ] && ok "train.de.gz took a second, resumed request ($ranged)" || not_ok "train.de.gz took a second, resumed request ($ranged)"

# a partial download left by a killed fetch is resumed by the next one
mkdir -p "$tmp/d3/.downloads"
head -c 300000 "$src/train.en.gz" >"$tmp/d3/.downloads/train.en.gz.part"
check "a fetch resumes a partial download" 0 "$NB" fetch multi30k --mirror "http://127.0.0.1:$port/ok" --data-dir "$tmp/d3"
valid "the dataset from a resumed partial matches its manifest" "$tmp/d3/multi30k"

# a corrupted file on the mirror is refused: nothing installed, the digest named
printf 'x' | dd of="$raw/val.de.gz" bs=1 seek=100 conv=notrunc 2>/dev/null
check "a corrupted file is refused" 1 env NORMBENCH_TEST_RETRIES=1 "$NB" fetch multi30k --mirror "http://127.0.0.1:$port/ok" --data-dir "$tmp/d4"
has "the refusal names the file and the expected SHA-256" "$tmp/err" "checksum mismatch for 'val.de.gz' .*expected SHA-256 f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"
[ ! -e "$tmp/d4/multi30k" ] && ok "a corrupted download installs nothing" || not_ok "a corrupted download installs nothing"
[ ! -e "$tmp/d4/.downloads/val.de.gz.part" ] && ok "the bad download is deleted" || not_ok "the bad download is deleted"
cp "$src/val.de.gz" "$raw/val.de.gz"

# --from DIR: the directory holding the eight files, as a user without network would
check "fetch multi30k --from DIR" 0 "$NB" fetch multi30k --from "$tmp/from" --data-dir "$tmp/d5"
valid "the imported dataset matches its manifest" "$tmp/d5/multi30k"
[ ! -e "$tmp/d5/.trust" ] && ok "pinned files record no trust-on-first-use digest" || not_ok "pinned files record no trust-on-first-use digest"
check "fetch multi30k --from a file is refused" 1 "$NB" fetch multi30k --from "$tmp/from/train.en.gz" --data-dir "$tmp/d6"
has "the refusal asks for the directory" "$tmp/err" "must be a directory for dataset 'multi30k'"
mkdir -p "$tmp/from-bad"
cp "$tmp"/from/*.gz "$tmp/from-bad/"
printf 'x' >>"$tmp/from-bad/test_2017_flickr.en.gz"
check "--from a directory with a damaged file is refused" 1 "$NB" fetch multi30k --from "$tmp/from-bad" --data-dir "$tmp/d7"
has "the damaged file is named" "$tmp/err" "test_2017_flickr.en.gz"
[ ! -e "$tmp/d7/multi30k" ] && ok "a damaged import installs nothing" || not_ok "a damaged import installs nothing"
rm "$tmp/from-bad/test_2017_flickr.en.gz"
check "--from a directory missing a file is refused" 1 "$NB" fetch multi30k --from "$tmp/from-bad" --data-dir "$tmp/d8"
has "the missing file is named" "$tmp/err" "test_2017_flickr.en.gz"

echo "1..$n"
[ "$fails" -eq 0 ]
