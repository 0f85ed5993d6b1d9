#!/bin/bash
# Command-line tests of mt's BPE cache (issue 30, items 7 and 10): each cache file carries the
# hash of what it was made from and of its own text; a damaged, foreign or linked file is
# rebuilt (and the run says so), no symbolic link is followed out of the data directory, a
# directory in a cache file's place is refused by name, and a run resumed on other data than it
# started with is refused (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DB=$tmp/cache.db
sql() { sqlite3 "$NORMBENCH_DB" "$1" 2>/dev/null; }
last() { sql "select value from params where key = '$1' and run = (select max(id) from runs)"; }

D=$tmp/d
mt_mkdata "$D" # lib.sh
m30="mt --data-dir $D --no-fetch --bpe-merges 50 --dim-word 16 --dim 32 --batch 16 --threads 1 --quiet --val-bleu-max 4 --test-max 4"
short="--steps 2 --eval-every 2"

check "a first run learns and caches BPE" 0 "$NB" run $m30 $short
src0=$(last data_source)
pairs0=$(last train_pairs)
hash0=$(last data_hash)
C=$(ls -d "$D"/.cache/mt/multi30k-*)
case "$src0" in *"BPE 50 merges, cache "*")") ok "its data_source names the cache ($src0)" ;; *) not_ok "its data_source names the cache" "$src0" ;; esac
head -n 1 "$C/codes" >"$tmp/head"
has "each cache file starts with what it was made from and its text's hash" "$tmp/head" '^#normbench-mt-cache 1 inputs=[0-9a-f]{64} body=[0-9a-f]{64}$'

# 1. codes emptied to its version line: rebuilt, not "BPE 0 merges"
echo '#version: 0.2' >"$C/codes"
check "a run after codes was emptied" 0 "$NB" run $m30 $short
s=$(last data_source)
case "$s" in *"BPE 50 merges, cache "*", rebuilt: 'codes' was not written by this normbench"*) ok "it rebuilt the cache and says so" ;; *) not_ok "it rebuilt the cache and says so" "$s" ;; esac
[ "$(last train_pairs)" = "$pairs0" ] && [ "$(last data_hash)" = "$hash0" ] && ok "and trains on the same data" || not_ok "and trains on the same data" "$(last train_pairs) $(last data_hash)"
# one merge line changed: the text no longer matches its hash
sed -i '3s/.*/q z/' "$C/codes"
check "a run after one merge was changed" 0 "$NB" run $m30 $short
case "$(last data_source)" in *"rebuilt: 'codes' was changed since it was made"*) ok "rebuilt: its text did not match its hash" ;; *) not_ok "rebuilt: its text did not match its hash" "$(last data_source)" ;; esac
[ "$(last data_hash)" = "$hash0" ] && ok "the same data again" || not_ok "the same data again"

# 2. src.vocab a symbolic link out of the data directory: not followed, replaced
printf 'root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1\n' >"$tmp/outside"
cp "$tmp/outside" "$tmp/outside.orig"
rm "$C/src.vocab"
ln -s "$tmp/outside" "$C/src.vocab"
check "a run with src.vocab linked out of the data directory" 0 "$NB" run $m30 $short
case "$(last data_source)" in *"rebuilt: 'src.vocab' was a symbolic link"*) ok "the link is not read: the cache is rebuilt" ;; *) not_ok "the link is not read: the cache is rebuilt" "$(last data_source)" ;; esac
[ "$(last train_pairs)" = "$pairs0" ] && ok "no <unk> flood: $pairs0" || not_ok "no <unk> flood" "$(last train_pairs)"
[ -f "$C/src.vocab" ] && [ ! -L "$C/src.vocab" ] && ok "the link was replaced by a file" || not_ok "the link was replaced by a file"
cmp -s "$tmp/outside" "$tmp/outside.orig" && ok "the link's target is untouched" || not_ok "the link's target is untouched"

# 3. a directory named codes: refused by name, not "free some space"
rm "$C/codes"
mkdir "$C/codes"
check "a directory in codes' place fails" 1 "$NB" run $m30 $short
has "it says what is there" "$tmp/err" "^error: '$C/codes' is a directory, not a cache file"
has "and what to do" "$tmp/err" "^hint: remove it: normbench rebuilds its cache"
if grep -q "free some space" "$tmp/err"; then not_ok "no word of disk space"; else ok "no word of disk space"; fi
rmdir "$C/codes"

# 4. a cache directory linked elsewhere: refused, nothing written there
mkdir "$tmp/elsewhere"
mv "$D/.cache/mt" "$tmp/mt.kept"
ln -s "$tmp/elsewhere" "$D/.cache/mt"
check "a linked cache directory fails" 1 "$NB" run $m30 $short
has "naming the link" "$tmp/err" "^error: '$D/.cache/mt' is a symbolic link"
[ -z "$(ls -A "$tmp/elsewhere")" ] && ok "nothing was written through it" || not_ok "nothing was written through it" "$(ls -A "$tmp/elsewhere")"
rm "$D/.cache/mt"
mv "$tmp/mt.kept" "$D/.cache/mt"

# 5. a run interrupted after its first epoch's checkpoint, resumed after the cache changed: the
# cache is rebuilt, the run goes on with the same data; resumed on other data: refused
interrupt() {
    "$NB" run $m30 --epochs 4 --eval-every 1000 >/dev/null 2>&1 &
    local pid=$!
    id=$(($(sql "select count(*) from runs") + 1))
    for _ in $(seq 1 600); do [ -e "$NORMBENCH_DB-checkpoints/run-$id.ckpt" ] && break; sleep 0.05; done
    kill -INT $pid
    wait $pid
}
interrupt
[ "$(sql "select status from runs where id = $id")" = interrupted ] && ok "run $id interrupted with a checkpoint" || not_ok "run $id interrupted with a checkpoint" "$(sql "select status from runs where id = $id")"
echo '#version: 0.2' >"$C/codes"
check "resumed after its cache was emptied" 0 "$NB" run --resume $id --quiet
[ "$(sql "select status from runs where id = $id")" = finished ] && ok "it finishes" || not_ok "it finishes"
[ "$(sql "select value from params where run = $id and key = 'data_hash'")" = "$hash0" ] && ok "on the data it started with" || not_ok "on the data it started with"
interrupt
cp "$D/multi30k/val.en.gz" "$tmp/val.en.gz"
{ gzip -dc "$tmp/val.en.gz"; echo "the dog runs ."; } | gzip -n >"$D/multi30k/val.en.gz"
cp "$D/multi30k/val.de.gz" "$tmp/val.de.gz"
{ gzip -dc "$tmp/val.de.gz"; echo "thex dogx runsx ."; } | gzip -n >"$D/multi30k/val.de.gz"
check "resumed on other data: refused" 1 "$NB" run --resume $id --quiet
has "it says the data differs from what the run started with" "$tmp/err" "^error: the data differs from what this run started with"
[ "$(sql "select status from runs where id = $id")" = failed ] && ok "recorded as failed" || not_ok "recorded as failed"
[ -e "$NORMBENCH_DB-checkpoints/run-$id.ckpt" ] && ok "its checkpoint is kept" || not_ok "its checkpoint is kept"
cp "$tmp/val.en.gz" "$tmp/val.de.gz" "$D/multi30k/"
check "with its data restored it resumes" 0 "$NB" run --resume $id --quiet
[ "$(sql "select status from runs where id = $id")" = finished ] && ok "and finishes" || not_ok "and finishes"

echo "1..$n"
[ "$fails" -eq 0 ]
