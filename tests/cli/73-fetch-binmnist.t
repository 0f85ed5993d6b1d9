#!/bin/bash
# Command-line tests of `normbench fetch binarized-mnist` and `normbench datasets` (TAP, for
# prove), offline: three small .amat files (fetch checks bytes, not the format: the reader is
# tests/test_amat.c's) served by tests/fetch_server.py on 127.0.0.1 as Larochelle's URLs would
# serve them, trust on first use recorded and enforced, and `--from DIR`.
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DB=$tmp/nb.db
unset NORMBENCH_MIRROR NORMBENCH_DATA
files="binarized_mnist_train.amat binarized_mnist_valid.amat binarized_mnist_test.amat"
srv=$tmp/srv/~larocheh/public/datasets/binarized_mnist
mkdir -p "$srv" "$tmp/from"
for f in $files; do
    awk -v n=3 -v s="${#f}" 'BEGIN { srand(s); for (i = 0; i < n; i++) { l = "";
        for (j = 0; j < 784; j++) l = l (j ? " " : "") int(rand() * 2); print l } }' >"$srv/$f"
    cp "$srv/$f" "$tmp/from/$f"
done
valid() {
    if (cd "$2" && sha256sum --quiet -c MANIFEST.sha256 >/dev/null 2>&1); then ok "$1"; else not_ok "$1" "$(ls -la "$2" 2>&1)"; fi
}
# the lines of `datasets` about binarized-mnist
entry() { sed -n '/^binarized-mnist$/,/^$/p' "$tmp/out" >"$tmp/entry"; }

check "datasets lists binarized-mnist" 0 "$NB" datasets --data-dir "$tmp/d0"
has "binarized-mnist is in the registry" "$tmp/out" "^binarized-mnist\$"
entry
has "its source is Larochelle's URL" "$tmp/entry" "source:   http://www.cs.toronto.edu/~larocheh/public/datasets/binarized_mnist/binarized_mnist_train.amat \(and more\)"
has "it has three files" "$tmp/entry" "download: unknown \(3 files\)"
has "no checksum is published: trust on first use" "$tmp/entry" "checksum: none published: trust on first use \(nothing recorded yet\)"
has "its format is named" "$tmp/entry" "format:   amat text"
has "it is absent" "$tmp/entry" "status:   absent"

fetch_server 120

check "fetch binarized-mnist through a mirror" 0 "$NB" fetch binarized-mnist --mirror "http://127.0.0.1:$port/ok" --data-dir "$tmp/d1"
valid "the installed files match the manifest" "$tmp/d1/binarized-mnist"
same=1
for f in $files; do cmp -s "$srv/$f" "$tmp/d1/binarized-mnist/$f" || same=0; done
[ "$same" = 1 ] && ok "the three files are the served bytes" || not_ok "the three files are the served bytes"
rec=1
for f in $files; do [ -s "$tmp/d1/.trust/$f.sha256" ] || rec=0; done
[ "$rec" = 1 ] && ok "the first download records each file's SHA-256" || not_ok "the first download records each file's SHA-256"
grep -q "$(sha256sum "$srv/binarized_mnist_valid.amat" | cut -c1-64)" "$tmp/d1/.trust/binarized_mnist_valid.amat.sha256" &&
    ok "the recorded digest is the file's" || not_ok "the recorded digest is the file's"
check "datasets after the fetch" 0 "$NB" datasets --data-dir "$tmp/d1"
entry
has "it is present" "$tmp/entry" "status:   present"
has "its digests are recorded" "$tmp/entry" "trust on first use \(SHA-256 recorded\)"

# upstream changes a file: refused against the recorded digest, nothing installed
rm -rf "$tmp/d1/binarized-mnist"
sed -i '2s/^0/1/; 2s/^1/0/' "$srv/binarized_mnist_test.amat"
check "a changed file is refused" 1 env NORMBENCH_TEST_RETRIES=1 "$NB" fetch binarized-mnist --mirror "http://127.0.0.1:$port/ok" --data-dir "$tmp/d1"
has "the refusal names the file and the recorded digest" "$tmp/err" "checksum mismatch for 'binarized_mnist_test.amat' .*recorded at its first download"
has "the hint says how to accept the new file" "$tmp/err" "^hint: .*delete '$tmp/d1/.trust/binarized_mnist_test.amat.sha256'"
[ ! -e "$tmp/d1/binarized-mnist" ] && ok "a changed download installs nothing" || not_ok "a changed download installs nothing"

# --from DIR: the three files as a user without network has them
check "fetch binarized-mnist --from DIR" 0 "$NB" fetch binarized-mnist --from "$tmp/from" --data-dir "$tmp/d2"
valid "the imported dataset matches its manifest" "$tmp/d2/binarized-mnist"
cmp -s "$tmp/from/binarized_mnist_train.amat" "$tmp/d2/binarized-mnist/binarized_mnist_train.amat" &&
    ok "the imported train file is the given one" || not_ok "the imported train file is the given one"
[ -s "$tmp/d2/.trust/binarized_mnist_train.amat.sha256" ] && ok "the import records trust too" || not_ok "the import records trust too"
rm "$tmp/from/binarized_mnist_valid.amat"
check "--from a directory missing a file is refused" 1 "$NB" fetch binarized-mnist --from "$tmp/from" --data-dir "$tmp/d3"
has "the missing file is named" "$tmp/err" "binarized_mnist_valid.amat"
[ ! -e "$tmp/d3/binarized-mnist" ] && ok "an incomplete import installs nothing" || not_ok "an incomplete import installs nothing"

echo "1..$n"
[ "$fails" -eq 0 ]
