#!/bin/bash
# Command-line tests of `normbench fetch` and `normbench datasets` (TAP, for prove), offline:
# a generated top4.zip (pickle names only, not parsed here) imported with --from and served by
# tests/fetch_server.py on 127.0.0.1; fetches interrupted by SIGINT and SIGKILL at random points
# must leave the data directory valid, and the next fetch must finish the job.
set -u
. "$(dirname "$0")/lib.sh"
# valid DESC DIR: the dataset directory is absent, or complete with every file as its manifest says
valid() {
    if [ ! -e "$2" ] || (cd "$2" && sha256sum --quiet -c MANIFEST.sha256 >/dev/null 2>&1); then
        ok "$1"
    else
        not_ok "$1" "$(ls -la "$2" 2>&1)"
    fi
}
export NORMBENCH_DATA=$tmp/data NORMBENCH_DB=$tmp/nb.db
unset NORMBENCH_MIRROR

# A top4.zip with the seven pickle names (content: bytes to compare, not real pickles).
mkdir -p "$tmp/srv/~rkiros" "$tmp/gen"
python3 - "$tmp/srv/~rkiros/top4.zip" "$tmp/gen" <<'PY'
import os, sys, zipfile
names = ["dict.pkl", "train4_pass.pkl", "train4_qs.pkl", "train4_ans.pkl",
         "valid4_pass.pkl", "valid4_qs.pkl", "valid4_ans.pkl"]
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_STORED) as z:
    for i, nm in enumerate(names):
        data = os.urandom(3000000 if nm == "train4_pass.pkl" else 1000 + i)
        open(os.path.join(sys.argv[2], nm), "wb").write(data)
        z.writestr("top4/" + nm, data)
PY
zip=$tmp/srv/~rkiros/top4.zip

check "datasets exits 0" 0 "$NB" datasets
for d in cifar10 mnist fashion-mnist coco-oe cnn-top4; do has "datasets lists $d" "$tmp/out" "^$d\$"; done
has "datasets says where data lives" "$tmp/out" "location: $tmp/data/cifar10"
has "datasets names trust on first use" "$tmp/out" "trust on first use \(nothing recorded yet\)"
has "datasets shows CIFAR's pinned MD5 kind" "$tmp/out" "MD5 of the download pinned"
check "fetch without a dataset is a usage error" 2 "$NB" fetch
check "fetch of an unknown dataset is a usage error" 2 "$NB" fetch imagenet
has "unknown dataset lists the datasets" "$tmp/err" "hint: .*cifar10 mnist fashion-mnist coco-oe cnn-top4"
check "fetch --help exits 0" 0 "$NB" fetch --help
has "fetch --help shows --from" "$tmp/out" "--from"

# --from: import a copy; the files land flattened under fixed names; trust recorded.
check "fetch cnn-top4 --from FILE" 0 "$NB" fetch cnn-top4 --from "$zip"
valid "imported dataset matches its manifest" "$tmp/data/cnn-top4"
same=1
for f in "$tmp"/gen/*.pkl; do cmp -s "$f" "$tmp/data/cnn-top4/$(basename "$f")" || same=0; done
[ "$same" = 1 ] && ok "imported files are the archive's bytes" || not_ok "imported files are the archive's bytes"
[ -s "$tmp/data/.trust/top4.zip.sha256" ] && ok "first import records the SHA-256" || not_ok "first import records the SHA-256"
check "datasets after the import" 0 "$NB" datasets
has "datasets shows it present" "$tmp/out" "status:   present"
has "datasets says the digest is recorded" "$tmp/out" "SHA-256 recorded"
check "a second fetch re-verifies and succeeds" 0 "$NB" fetch cnn-top4
# --from on the installed copy is never silently ignored: refused, the copy untouched
cp "$zip" "$tmp/new.zip"
check "fetch --from on an installed dataset is refused" 1 "$NB" fetch cnn-top4 --from "$tmp/new.zip"
has "the refusal names the directory and --from" "$tmp/err" "installed already in '$tmp/data/cnn-top4': '--from $tmp/new.zip' was not used"
has "the refusal says how to replace it" "$tmp/err" "^hint: .*remove '$tmp/data/cnn-top4'"
valid "the installed copy is untouched" "$tmp/data/cnn-top4"
# datasets reports a damaged dataset and exits 1
cp -a "$tmp/data" "$tmp/data-dmg"
printf 'x' >>"$tmp/data-dmg/cnn-top4/dict.pkl"
check "datasets --verify exits 1 on a damaged dataset" 1 "$NB" datasets --verify --data-dir "$tmp/data-dmg"
has "datasets --verify reports it damaged" "$tmp/out" "status:   damaged"
has "datasets --verify says so on stderr" "$tmp/err" "^error: 1 dataset is damaged"
check "datasets --verify exits 0 on a sound one" 0 "$NB" datasets --verify
check "--from a missing file fails" 1 "$NB" fetch cnn-top4 --from "$tmp/nope.zip" --data-dir "$tmp/d-nope"
has "missing --from file is named" "$tmp/err" "nope.zip"
printf 'PK\003\004garbage' >"$tmp/bad.zip"
check "--from a damaged zip fails" 1 "$NB" fetch cnn-top4 --from "$tmp/bad.zip" --data-dir "$tmp/d-bad"
[ ! -e "$tmp/d-bad/cnn-top4" ] && ok "a damaged zip installs nothing" || not_ok "a damaged zip installs nothing"

# Offline: names the URL and the file, hints --from.
check "unreachable mirror fails at run time" 1 "$NB" fetch cifar10 --mirror http://127.0.0.1:1 --data-dir "$tmp/d-off"
has "offline error names the URL" "$tmp/err" "http://127.0.0.1:1/~kriz/cifar-10-binary.tar.gz"
has "offline error names the file" "$tmp/err" "cifar-10-binary.tar.gz'"
has "offline hint says --from" "$tmp/err" "^hint: .*normbench fetch cifar10 --from FILE"
[ ! -e "$tmp/d-off/cifar10" ] && ok "offline leaves no dataset" || not_ok "offline leaves no dataset"

# Fashion-MNIST from Debian's package (verified by content digest), and a run's first use.
if [ -d /usr/share/datasets/fashion-mnist ]; then
    check "fetch fashion-mnist from Debian's package" 0 "$NB" fetch fashion-mnist --data-dir "$tmp/d-fm"
    valid "fashion-mnist installed and matches its manifest" "$tmp/d-fm/fashion-mnist"
    check "run with --no-fetch does not install" 0 "$NB" run mnist --dataset fashion-mnist --steps 2 --subset 256 --data-dir "$tmp/d-nf" --no-fetch --quiet
    [ ! -e "$tmp/d-nf/fashion-mnist" ] && ok "--no-fetch installed nothing" || not_ok "--no-fetch installed nothing"
    check "run fetches its dataset on first use" 0 "$NB" run mnist --dataset fashion-mnist --steps 2 --subset 256 --data-dir "$tmp/d-run" --quiet
    valid "the run's dataset is installed and verified" "$tmp/d-run/fashion-mnist"
else
    for i in 1 2 3 4 5 6; do echo "ok - # SKIP dataset-fashion-mnist not installed"; n=$((n + 1)); done
fi
check "synthetic never fetches" 0 "$NB" run mnist --dataset synthetic --steps 2 --subset 256 --data-dir "$tmp/d-syn" --quiet
[ ! -e "$tmp/d-syn" ] && ok "synthetic left the data directory alone" || not_ok "synthetic left the data directory alone"

# The local server: mirror, and interruptions at random points (slow mode, about 1 MiB/s).
fetch_server 90
check "fetch through a mirror (NORMBENCH_MIRROR)" 0 env NORMBENCH_MIRROR="http://127.0.0.1:$port/ok" "$NB" fetch cnn-top4 --data-dir "$tmp/d-mirror"
valid "mirrored dataset matches its manifest" "$tmp/d-mirror/cnn-top4"
cp "$zip" "$tmp/gen/top4.zip"
dd=$tmp/d-intr
kept=0
psize() { stat -c %s "$dd/.downloads/top4.zip.part" 2>/dev/null || echo 0; }
for sig in INT KILL INT KILL; do
    delay=$(awk -v s=$RANDOM 'BEGIN { srand(s); printf "%.2f", 0.05 + rand() * 0.5 }')
    before=$(psize)
    "$NB" fetch cnn-top4 --mirror "http://127.0.0.1:$port/slow" --data-dir "$dd" >/dev/null 2>"$tmp/err-intr" &
    pid=$!
    # SIGINT: once this fetch is downloading (a background job of a script starts with SIGINT
    # ignored until normbench installs its handler); SIGKILL: at any point from the start
    if [ "$sig" = INT ]; then
        for i in $(seq 200); do [ "$(psize)" -gt "$before" ] && break; sleep 0.05; done
    fi
    sleep "$delay"
    kill -s "$sig" "$pid" 2>/dev/null
    { wait "$pid"; } 2>/dev/null
    rc=$?
    valid "SIG$sig after ${delay}s (exit $rc) leaves the data directory valid" "$dd/cnn-top4"
    if [ ! -e "$dd/cnn-top4" ]; then
        part=$(stat -c %s "$dd/.downloads/top4.zip.part" 2>/dev/null || echo 0)
        [ "$part" -gt "$kept" ] && kept=$part
        if [ "$sig" = INT ]; then
            has "SIGINT says the fetch was interrupted" "$tmp/err-intr" "interrupted"
        fi
    fi
done
# 3 MB at about 1 MiB/s: the first interruption (at most 0.55 s into the download) falls
# mid-download
[ "$kept" -gt 0 ] && ok "an interrupted fetch kept its partial download ($kept bytes)" || not_ok "an interrupted fetch kept its partial download"
check "a fetch after the interruptions completes" 0 "$NB" fetch cnn-top4 --mirror "http://127.0.0.1:$port/slow" --data-dir "$dd"
valid "the resumed dataset matches its manifest" "$dd/cnn-top4"
cmp -s "$tmp/gen/train4_pass.pkl" "$dd/cnn-top4/train4_pass.pkl" && ok "the resumed dataset holds the archive's bytes" || not_ok "the resumed dataset holds the archive's bytes"
ls -d "$dd"/.cnn-top4.tmp-* >/dev/null 2>&1 && not_ok "no temporary directory is left" || ok "no temporary directory is left"
[ ! -e "$dd/.downloads/top4.zip.part" ] && ok "the partial download is gone once installed" || not_ok "the partial download is gone once installed"

# A mirror that declares 100 GiB is refused before anything is written (the declared length is
# checked against the dataset's size, or for trust-on-first-use datasets its members' caps).
check "a mirror declaring 100 GiB is refused" 1 env NORMBENCH_TEST_RETRIES=1 "$NB" fetch cnn-top4 \
    --mirror "http://127.0.0.1:$port/huge" --data-dir "$tmp/d-huge"
has "the refusal says the file is larger than expected" "$tmp/err" "larger than the [0-9]+ bytes expected"
sent=$(python3 -c 'import json, sys, urllib.request
c = json.load(urllib.request.urlopen(sys.argv[1]))
print(sum(v for k, v in c.items() if k.startswith("sent:")))' "http://127.0.0.1:$port/count")
[ "$sent" -lt $((16 << 20)) ] && ok "the client stopped reading at once ($sent bytes taken of 64 MiB)" || not_ok "the client stopped reading at once ($sent bytes taken)"
[ ! -s "$tmp/d-huge/.downloads/top4.zip.part" ] && ok "nothing of the huge download is kept" || not_ok "nothing of the huge download is kept"
[ ! -e "$tmp/d-huge/cnn-top4" ] && ok "the huge download installs nothing" || not_ok "the huge download installs nothing"

echo "1..$n"
[ "$fails" -eq 0 ]
