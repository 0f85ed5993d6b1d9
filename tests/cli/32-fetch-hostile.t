#!/bin/bash
# fetch against endless or hostile input (issue 30, items 4 and 10): a --from that is a device, a
# FIFO, a directory or a symbolic link to /dev/zero is refused at once, naming the file; a file
# larger than the dataset's can be is refused before it is read; SIGTERM and SIGINT stop a long
# hash within a moment (exit 143, 130); a mirror that drips one byte every 0.7 s is dropped by
# the minimum rate, and a download past --timeout is given up with its partial file kept.
set -u
. "$(dirname "$0")/lib.sh"
export NORMBENCH_DATA=$tmp/data NORMBENCH_DB=$tmp/nb.db
unset NORMBENCH_MIRROR NORMBENCH_FETCH_MIN_RATE NORMBENCH_FETCH_RATE_WINDOW NORMBENCH_FETCH_TIMEOUT
# quick CMD...: check with a 20 s cap (an endless read would otherwise hang the suite: exit 124)
T="timeout -s KILL 20"
# nothing_installed DESC DIR: no dataset, temporary directory or stray file appeared in DIR
nothing_installed() {
    local extra
    extra=$(find "$2" -mindepth 1 -not -path "$2/.downloads" -not -path "$2/.downloads/*.lock" 2>/dev/null)
    [ -z "$extra" ] && ok "$1" || not_ok "$1" "$extra"
}

# Item 4: the issue's commands, each refused at once with the file named.
mkdir -p "$tmp/FR"
ln -s /dev/zero "$tmp/FR/train.en.gz"
check "multi30k --from a directory whose train.en.gz links to /dev/zero is refused" 1 $T "$NB" fetch multi30k --from "$tmp/FR" --quiet
has "the refusal names the file and what it is" "$tmp/err" "'$tmp/FR/train.en.gz' is not a regular file: it is a character device, through a symbolic link to '/dev/zero'"
nothing_installed "nothing is installed" "$tmp/data"
check "cifar10 --from /dev/zero is refused" 1 $T "$NB" fetch cifar10 --from /dev/zero --quiet
has "the refusal names /dev/zero" "$tmp/err" "'/dev/zero' is not a regular file: it is a character device"
mkfifo "$tmp/fifo"
check "cifar10 --from a FIFO is refused without waiting for a writer" 1 $T "$NB" fetch cifar10 --from "$tmp/fifo" --quiet
has "the refusal says it is a named pipe" "$tmp/err" "'$tmp/fifo' is not a regular file: it is a named pipe"
mkdir -p "$tmp/MN/train-images-idx3-ubyte.gz"
check "mnist --from a directory holding a directory in a file's place is refused" 1 $T "$NB" fetch mnist --from "$tmp/MN" --quiet
has "the refusal names it a directory" "$tmp/err" "'$tmp/MN/train-images-idx3-ubyte.gz' is not a regular file: it is a directory"
rmdir "$tmp/MN/train-images-idx3-ubyte.gz"
ln -s /dev/zero "$tmp/MN/train-images-idx3-ubyte.gz"
check "mnist --from a directory with a link to /dev/zero is refused" 1 $T "$NB" fetch mnist --from "$tmp/MN" --quiet
has "the refusal names the link" "$tmp/err" "'$tmp/MN/train-images-idx3-ubyte.gz' is not a regular file: it is a character device"
# larger than the registry allows: refused from its size, before a byte is read (sparse: free)
truncate -s 200000000 "$tmp/big.tar.gz"
check "cifar10 --from a file larger than the archive is refused" 1 $T "$NB" fetch cifar10 --from "$tmp/big.tar.gz" --quiet
has "the refusal gives both sizes" "$tmp/err" "'$tmp/big.tar.gz' has 200000000 bytes, more than the 170052171 expected for it"
nothing_installed "nothing is installed after the refusals" "$tmp/data"

# SIGTERM and SIGINT while hashing a large file (WMT14 is not pinned: 2 GiB allowed per training
# file; sparse, so the disk is not used): the stop flag ends the hash within a moment.
mkdir -p "$tmp/W"
for f in train.en train.de; do truncate -s 2000000000 "$tmp/W/wmt14-$f"; done
for f in newstest2013.en newstest2013.de newstest2014.en newstest2014.de; do echo "a line" >"$tmp/W/wmt14-$f"; done
for sig in TERM INT; do
    want=$([ $sig = TERM ] && echo 143 || echo 130)
    : >"$tmp/err-sig"
    $T "$NB" fetch wmt14-en-de --from "$tmp/W" --data-dir "$tmp/d-sig" >/dev/null 2>"$tmp/err-sig" &
    pid=$!
    # once it is hashing (the handler is installed before the first stage is announced)
    for i in $(seq 200); do grep -q "^verify wmt14-train.en" "$tmp/err-sig" && break; sleep 0.05; done
    sleep 0.3
    t0=$(date +%s%N)
    kill -s $sig $pid
    wait $pid
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ $rc = $want ] && ok "SIG$sig while hashing: exit $want" || not_ok "SIG$sig while hashing: exit $want (got $rc)" "$(cat "$tmp/err-sig")"
    [ $ms -lt 2000 ] && ok "SIG$sig: it stopped ${ms} ms after the signal" || not_ok "SIG$sig: it stopped ${ms} ms after the signal (at most 2000)"
    has "SIG$sig: it says the hash was interrupted" "$tmp/err-sig" "interrupted"
    nothing_installed "SIG$sig: nothing is installed" "$tmp/d-sig"
done

# ... and while re-verifying an installed copy (fetch re-hashes it against its manifest): a
# dataset directory laid out by hand, with sparse files and a manifest naming each
mkdir -p "$tmp/d-rv/wmt14-en-de"
for f in train.en train.de newstest2013.en newstest2013.de newstest2014.en newstest2014.de; do
    truncate -s 2000000000 "$tmp/d-rv/wmt14-en-de/$f"
    printf '%064d  %s\n' 0 "$f" >>"$tmp/d-rv/wmt14-en-de/MANIFEST.sha256"
done
: >"$tmp/err-sig"
$T "$NB" fetch wmt14-en-de --data-dir "$tmp/d-rv" >/dev/null 2>"$tmp/err-sig" &
pid=$!
sleep 1
t0=$(date +%s%N)
kill -s TERM $pid
wait $pid
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 143 ] && ok "SIGTERM while re-verifying: exit 143" || not_ok "SIGTERM while re-verifying: exit 143 (got $rc)" "$(cat "$tmp/err-sig")"
[ $ms -lt 2000 ] && ok "it stopped ${ms} ms after the signal" || not_ok "it stopped ${ms} ms after the signal (at most 2000)"
has "it says the fetch was interrupted" "$tmp/err-sig" "fetch of 'wmt14-en-de' interrupted while verifying"

# Item 10: a mirror that drips one byte every 0.7 s (1.4 bytes/s never counted as a stall by a
# 1 byte/s limit). Small windows and no retries keep this to seconds.
mkdir -p "$tmp/srv/~rkiros"
head -c 4000 /dev/urandom >"$tmp/srv/~rkiros/top4.zip"
fetch_server 60
drip="http://127.0.0.1:$port/drip"
export NORMBENCH_TEST_RETRIES=0
t0=$(date +%s)
check "a drip is dropped by the default minimum rate (window 2 s)" 1 env NORMBENCH_TEST_STALL_S=2 $T "$NB" fetch cnn-top4 --mirror "$drip" --data-dir "$tmp/d-drip" --quiet
has "it says too slow, with the rate" "$tmp/err" "top4.zip'\\): stalled or too slow, less than 1024 bytes/s over 2 s"
[ $(($(date +%s) - t0)) -le 8 ] && ok "within seconds" || not_ok "within seconds ($(($(date +%s) - t0)) s)"
check "--min-rate and --rate-window set the limit" 1 $T "$NB" fetch cnn-top4 --mirror "$drip" --data-dir "$tmp/d-drip" --min-rate 100 --rate-window 2 --quiet
has "the message gives them" "$tmp/err" "stalled or too slow, less than 100 bytes/s over 2 s \\(--min-rate\\)"
t0=$(date +%s)
check "--timeout gives a drip that passes the rate up" 1 $T "$NB" fetch cnn-top4 --mirror "$drip" --data-dir "$tmp/d-drip" --min-rate 1 --rate-window 60 --timeout 2 --quiet
has "it names the deadline and the kept partial file" "$tmp/err" "not done within the 2 s allowed \\(--timeout\\); the partial file '$tmp/d-drip/.downloads/top4.zip.part' is kept"
[ $(($(date +%s) - t0)) -le 6 ] && ok "after about 2 s" || not_ok "after about 2 s ($(($(date +%s) - t0)) s)"
[ -s "$tmp/d-drip/.downloads/top4.zip.part" ] && ok "the partial file holds the bytes dripped so far" || not_ok "the partial file holds the bytes dripped so far"
check "NORMBENCH_FETCH_TIMEOUT is the same deadline (also for run's fetch)" 1 env NORMBENCH_FETCH_TIMEOUT=1 NORMBENCH_FETCH_MIN_RATE=1 $T "$NB" fetch cnn-top4 --mirror "$drip" --data-dir "$tmp/d-drip" --quiet
has "it names the 1 s deadline" "$tmp/err" "not done within the 1 s allowed"
check "run's first-use fetch honours NORMBENCH_FETCH_TIMEOUT" 1 env NORMBENCH_FETCH_TIMEOUT=1 NORMBENCH_FETCH_MIN_RATE=1 NORMBENCH_MIRROR="$drip" $T "$NB" run reader --data-dir "$tmp/d-drip" --steps 1 --quiet
has "run says the deadline" "$tmp/err" "not done within the 1 s allowed"
check "a negative --timeout is a usage error" 2 "$NB" fetch cnn-top4 --timeout -1
check "--min-rate 0 is a usage error" 2 "$NB" fetch cnn-top4 --min-rate 0
check "a malformed NORMBENCH_FETCH_MIN_RATE is a usage error" 2 env NORMBENCH_FETCH_MIN_RATE=fast "$NB" fetch cnn-top4
has "it names the variable" "$tmp/err" "NORMBENCH_FETCH_MIN_RATE 'fast'"
unset NORMBENCH_TEST_RETRIES
check "fetch --help documents the limits" 0 "$NB" fetch --help
has "--min-rate in the help" "$tmp/out" "--min-rate BYTES"
has "--timeout in the help" "$tmp/out" "--timeout SECONDS"

echo "1..$n"
[ "$fails" -eq 0 ]
