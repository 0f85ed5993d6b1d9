#!/bin/bash
# CLI tests of every --out (report --format html, plot): only a regular file or a new name is
# written, or stdout for report's '-'. A device (/dev/full, a node made with mknod), a named pipe,
# a symbolic link into /proc (/proc/self/fd/1, /dev/stdout) and a directory are refused with an
# error naming what the path is, and left as they were: nothing is written beside them either.
# A symbolic link to a regular file is followed (the file replaced, the link kept); a replaced
# file keeps its mode; no temporary file is left behind.
#
# The system's own /dev/full and /dev/stdout are tried only after the binary has refused a device
# node and a link into /proc made here: a binary that regressed cannot destroy them.
set -u
. "$(dirname "$0")/lib.sh"
case $NB in /*) ;; *) NB=$PWD/$NB ;; esac
unset NORMBENCH_DB
S="--dataset synthetic --threads 1 --quiet --subset 300 --steps 6 --log-every 2"
cd "$tmp" || exit 1
mkdir tmpd
export TMPDIR=$tmp/tmpd
have_gnuplot=0
command -v gnuplot >/dev/null && have_gnuplot=1
T="timeout 60" # a write to a named pipe would block: bounded

for run in "layer --seed 1" "rms --seed 1"; do
    # shellcheck disable=SC2086
    "$NB" run mnist $S --db s.db --norm $run >/dev/null 2>&1 || not_ok "run mnist --norm $run"
done

mkdir w
mkfifo w/fifo w/fifo.png w/pipeimg.svg w/fifo.html
node=0
if mknod w/dev c 1 7 2>/dev/null; then node=1; fi # root: a character device (as /dev/full)
ln -s /proc/self/fd/1 w/lnk
ln -s /proc/self/fd/1 w/lnk.png
mkdir w/dir
kind() { # the kind of a path, without following a link
    if [ "${1#/proc/}" != "$1" ]; then echo "proc" # each process's own
    elif [ -L "$1" ]; then echo "link:$(readlink "$1")"
    elif [ -p "$1" ]; then echo fifo
    elif [ -c "$1" ]; then echo "char:$(stat -c %t,%T "$1")"
    elif [ -d "$1" ]; then echo dir
    elif [ -f "$1" ]; then echo file
    else echo none; fi
}
snapshot() { (cd w && for f in $(ls -A | sort); do echo "$f $(kind "$f")"; done); }
snapshot >before

# refused COMMAND DESC PATH WHAT: exit 1, an error saying what the path is, the path as it was,
# and nothing new in w/
refused() {
    local cmd=$1 desc=$2 path=$3 what=$4 k
    k=$(kind "$path")
    # shellcheck disable=SC2086
    check "$cmd --out $desc is refused" 1 $T "$NB" $cmd --out "$path"
    has "  the error says what it is" "$tmp/err" "$what"
    tst "  it is left as it was ($k)" test "$(kind "$path")" = "$k"
    snapshot >after
    tst "  nothing was written beside it" cmp -s before after
    tst "  nothing was written to stdout" test ! -s "$tmp/out"
}
R="report --db s.db --format html"
P="plot --db s.db --task mnist"
for cmd in "$R" "$P"; do
    c=${cmd%% *}
    refused "$cmd" "a named pipe" w/fifo "is a named pipe, not a regular file"
    if [ $node = 1 ]; then
        refused "$cmd" "a device node (mknod c 1 7)" w/dev "is a character device, not a regular file"
    else
        for i in 1 2 3 4 5; do n=$((n + 1)); echo "ok $n # skip mknod needs root"; done
    fi
    refused "$cmd" "a link to /proc/self/fd/1" w/lnk "leads into a special file system"
    refused "$cmd" "/proc/self/fd/1" /proc/self/fd/1 "is in a special file system"
    refused "$cmd" "a directory" w/dir "is a directory, not a file"
    check "$c --out in a missing directory is refused" 1 "$NB" $cmd --out w/nodir/x
    has "  the error names the directory" "$tmp/err" "'w/nodir' is not an existing directory"
    # the system's devices: only once the binary has refused the ones made here
    if [ "$(kind w/lnk)" = "link:/proc/self/fd/1" ] && [ $node = 0 -o "$(kind w/dev)" = "char:1,7" ] &&
        [ "$(kind w/fifo)" = fifo ]; then
        refused "$cmd" /dev/full /dev/full "'/dev/full' is a character device"
        refused "$cmd" /dev/stdout /dev/stdout "leads into a special file system"
    else
        not_ok "$c: the nodes made here were not left alone: /dev/full and /dev/stdout not tried"
    fi
    tst "  /dev/full is still a character device" test -c /dev/full
    tst "  /dev/stdout is still a link" test -L /dev/stdout
done
# plot: the image names too (FILE.png), and a FILE whose .png or .svg is a pipe or a link
refused "$P" "FILE.png, a named pipe" w/fifo.png "'w/fifo.png' is a named pipe"
refused "$P" "FILE.png, a link to /proc/self/fd/1" w/lnk.png "leads into a special file system"
refused "$P --term svg" "FILE (FILE.svg a named pipe)" w/pipeimg "'w/pipeimg.svg' is a named pipe"
refused "$R" "FILE.html, a named pipe" w/fifo.html "is a named pipe"
tst "no temporary file was left in the directory" bash -c "! ls -A w | grep -q tmp"
tst "nor any figure directory in TMPDIR" test -z "$(ls -A tmpd)"

# stdout
check "report --out - writes the page to stdout" 0 $T "$NB" $R --out -
has "  it is the page" "$tmp/out" '^<!DOCTYPE html>'
tst "  no file named '-' was written" test ! -e ./-
check "report --format csv --out - prints on stdout too" 0 "$NB" report --db s.db --format csv --out -
has "  the csv" "$tmp/out" '^task,dataset,norm,runs,metric'
check "plot --out - is a usage error" 2 "$NB" $P --out -
has "  it says why and what prints on stdout" "$tmp/err" "plot writes files.*--term dumb"
tst "  no file named '-' was written" test ! -e ./- -a ! -e ./-.png -a ! -e ./-.gp

# regular files and links to them
echo old >page.html
chmod 600 page.html
check "report --out an existing file replaces it" 0 "$NB" $R --out page.html
has "  with the page" page.html '^<!DOCTYPE html>'
tst "  keeping its mode (600)" test "$(stat -c %a page.html)" = 600
mkdir -p real sub
echo old >real/target.html
ln -s ../real/target.html sub/link.html
check "report --out a link to a regular file" 0 "$NB" $R --out sub/link.html
tst "  the link is kept" test "$(kind sub/link.html)" = "link:../real/target.html"
has "  the file it leads to holds the page" real/target.html '^<!DOCTYPE html>'
ln -s ../real/nothing.html sub/dangling.html
check "report --out a link that leads nowhere is refused" 1 "$NB" $R --out sub/dangling.html
has "  the error says so" "$tmp/err" "symbolic link that leads nowhere"
tst "  the link is kept, nothing created" test -L sub/dangling.html -a ! -e real/nothing.html
ln -s loop2.html sub/loop1.html
ln -s loop1.html sub/loop2.html
check "report --out a loop of links is refused" 1 "$NB" $R --out sub/loop1.html
has "  the error says so" "$tmp/err" "too many levels of symbolic links"
long=$(printf 'n%.0s' $(seq 1 300))
check "report --out a name longer than a file name can be is refused" 1 "$NB" $R --out "$long.html"
has "  the error says it is too long" "$tmp/err" "file name 'n+\.\.\.' is too long: 305 bytes, at most 255"
if [ $have_gnuplot = 1 ]; then
    echo old >real/fig.svg
    ln -s ../real/fig.svg sub/fig.svg
    check "plot --out a link to a regular file (another directory)" 0 "$NB" $P --out sub/fig.svg
    tst "  the link is kept" test "$(kind sub/fig.svg)" = "link:../real/fig.svg"
    has "  the file it leads to is the image" real/fig.svg '<svg'
    tst "  no temporary file left on either side" bash -c "! ls -A sub real | grep -q tmp"
    check "plot --out a new name writes it" 0 "$NB" $P --out new
    tst "  new.png, new.svg, new.gp and new-data/" test -s new.png -a -s new.svg -a -s new.gp -a -d new-data
    mkfifo new2-data
    check "plot --out whose FILE-data is not a directory is refused" 1 "$NB" $P --out new2
    has "  the error names it" "$tmp/err" "'new2-data'.*is not a directory"
    tst "  and nothing was written" test ! -e new2.png -a ! -e new2.svg -a ! -e new2.gp -a -p new2-data
else
    for i in $(seq 1 10); do n=$((n + 1)); echo "ok $n # skip gnuplot is not installed"; done
fi

echo "1..$n"
exit $((fails > 0))
