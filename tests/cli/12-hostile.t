#!/bin/bash
# CLI tests of what a store handed to you, or a --db pointing at the wrong thing, must not do
# (TAP, run by prove): a stored label runs no command through gnuplot and reaches the terminal
# escaped; run refuses control characters in --tag/--variant; --out with a newline is refused
# with nothing left behind; a foreign SQLite database is refused and left byte for byte as it
# was; a read-only store is readable; --db to /dev/null, a directory or a pipe is refused.
set -u
. "$(dirname "$0")/lib.sh"
case $NB in /*) ;; *) NB=$PWD/$NB ;; esac
unset NORMBENCH_DB
S="--dataset synthetic --threads 1 --quiet"
cd "$tmp" || exit 1

# files beside PATH that SQLite would create
no_sidecar() { [ ! -e "$1-wal" ] && [ ! -e "$1-shm" ] && [ ! -e "$1-journal" ]; }

# ---- run refuses what would be stored raw
check "run --variant with a newline is a usage error" 2 \
    "$NB" run mnist $S --subset 300 --steps 2 --db bad.db --variant $'v\n!touch INJ\n#'
has "  the message names --variant and shows the value escaped" "$tmp/err" "invalid --variant 'v\\\\n!touch"
check "run --tag with an escape character is a usage error" 2 \
    "$NB" run mnist $S --subset 300 --steps 2 --db bad.db --tag $'k=\e[31mred'
check "run --variant that is not UTF-8 is a usage error" 2 \
    "$NB" run mnist $S --subset 300 --steps 2 --db bad.db --variant $'caf\xe9'
tst "  and no store was created" test ! -e bad.db
check "run --variant with UTF-8 text is accepted" 0 \
    "$NB" run mnist $S --subset 300 --steps 2 --db s.db --variant 'β=0.5 ok'

# ---- a hostile label written into the store directly: the issue's variant, and a norm with a
# quote, a backquoted command, an escape sequence and a trailing backslash
sqlite3 s.db "UPDATE tags SET value = 'v' || char(10) || '!touch $tmp/INJECTED' || char(10) || '#'
              WHERE run = 1 AND key = 'variant';
              UPDATE runs SET norm = 'n''q\`touch $tmp/BQ\`' || char(27) || '[31m\\' WHERE id = 1" ||
    not_ok "sqlite3 could write the hostile labels"
if command -v gnuplot >/dev/null; then
    check "plot of a store with a hostile variant exits 0" 0 "$NB" plot --task mnist --db s.db --out fig
    tst "  gnuplot ran no shell command (no marker file)" test ! -e "$tmp/INJECTED"
    tst "  nor a backquoted one" test ! -e "$tmp/BQ"
    tst "  the label is in the script quoted, with its newlines escaped" \
        grep -qF "'mnist / synthetic [v\\n!touch $tmp/INJECTED\\n#]'" fig.gp
    tst "  the norm is in the key quoted, its quote as \"'\", its escape visible" \
        grep -qF "'n'.\"'\".'q\`touch $tmp/BQ\`\\x1b[31m\\ (1 run, seed 1)'" fig.gp
    tst "  no line of the script starts a shell command" bash -c "! grep -q '^ *!' fig.gp"
    tst "  the script holds no control character" bash -c "! LC_ALL=C grep -q \$'[\\x01-\\x08\\x0b-\\x1f\\x7f]' fig.gp"
    tst "  the image was written" test -s fig.png
else
    for i in 1 2 3 4 5 6 7 8; do n=$((n + 1)); echo "ok $n # skip gnuplot is not installed"; done
fi

# ---- --out with a newline
mkdir outdir
check "plot --out with a newline is a usage error" 2 "$NB" plot --task mnist --db s.db --out $'outdir/a\nb'
has "  the message shows it escaped" "$tmp/err" "invalid --out 'outdir/a\\\\nb'"
tst "  nothing was written (no script, no data directory)" test -z "$(ls -A outdir)"

# ---- show, report and runs escape what they print
ESC=$'\e'
sqlite3 s.db "UPDATE runs SET norm = 'la' || char(27) || ']0;pwned' || char(7) || 'yer' WHERE id = 1"
check "show of the hostile run exits 0" 0 "$NB" show 1 --db s.db
tst "  show prints no raw control character" bash -c "! LC_ALL=C grep -q \$'[\\x01-\\x08\\x0b-\\x1f\\x7f]' '$tmp/out'"
has "  show prints the variant escaped" "$tmp/out" 'variant = v\\n!touch'
has "  show prints the norm escaped" "$tmp/out" 'la\\x1b\]0;pwned\\x07yer'
check "report exits 0" 0 "$NB" report --db s.db
tst "  report prints no raw control character" bash -c "! LC_ALL=C grep -q \$'[\\x01-\\x08\\x0b-\\x1f\\x7f]' '$tmp/out'"
has "  report shows the variant escaped" "$tmp/out" 'synthetic \[v\\n!touch'
check "report --format md exits 0" 0 "$NB" report --db s.db --format md
tst "  Markdown has no raw control character" bash -c "! LC_ALL=C grep -q \$'[\\x01-\\x08\\x0b-\\x1f\\x7f]' '$tmp/out'"
check "runs exits 0" 0 "$NB" runs --db s.db
tst "  runs prints no raw control character" bash -c "! LC_ALL=C grep -q \$'[\\x01-\\x08\\x0b-\\x1f\\x7f]' '$tmp/out'"
has "  runs shows the norm escaped" "$tmp/out" 'la\\x1b\]0;pwned\\x07yer'
for f in "show 1" "runs" "report"; do
    "$NB" $f --db s.db --format json >"$tmp/j" 2>/dev/null
    tst "  $f --format json is valid JSON and keeps the string" python3 -c '
import json, sys
t = open(sys.argv[1]).read()
json.loads(t)
assert "la\\u001b]0;pwned\\u0007yer" in t, t[:200]
' "$tmp/j"
done
"$NB" runs --db s.db --format csv >"$tmp/c" 2>/dev/null
tst "  runs --format csv is valid CSV with the stored norm escaped (no raw ESC)" python3 -c '
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert len(rows) == 2 and rows[1][3] == "la\\x1b]0;pwned\\x07yer", rows
' "$tmp/c"

# ---- a foreign SQLite database is refused and not changed
foreign() { # foreign NAME SQL: an SQLite database and a copy of it to compare with
    rm -f "$1" "$1"-*
    sqlite3 "$1" "$2" >/dev/null && cp "$1" "$1.orig"
}
for kind in rollback wal app; do
    case $kind in
    rollback) foreign f.db "CREATE TABLE t(x); INSERT INTO t VALUES (1)" ;;
    wal) foreign f.db "PRAGMA journal_mode = WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1)" ;;
    app) foreign f.db "PRAGMA application_id = 305419896; CREATE TABLE runs(x); CREATE TABLE params(x);
                       CREATE TABLE metrics(x); CREATE TABLE tags(x); PRAGMA user_version = 1" ;;
    esac
    for c in "runs" "show 1" "report" "plot --task mnist --term dumb" "run mnist $S --subset 300 --steps 2"; do
        check "$c on a foreign database ($kind) is refused" 1 "$NB" $c --db f.db
        has "  with a message saying what it is" "$tmp/err" "'f.db' is an SQLite database but not a normbench results store"
        tst "  the database is byte for byte as it was" cmp -s f.db f.db.orig
        tst "  and nothing was created beside it" no_sidecar f.db
    done
done
printf 'just some text, not a database at all\n' >notes.txt
cp notes.txt notes.orig
check "a text file as --db is refused" 1 "$NB" run mnist $S --subset 300 --steps 2 --db notes.txt
tst "  and left as it was" cmp -s notes.txt notes.orig

# ---- a store made before normbench marked its stores is still one, and is marked
"$NB" run mnist $S --subset 300 --steps 2 --db old.db >/dev/null 2>&1
tst "a new store carries normbench's application_id" test "$(sqlite3 old.db 'PRAGMA application_id')" = 1852797549
sqlite3 old.db "PRAGMA application_id = 0"
check "runs reads a store without the id (identified by its tables)" 0 "$NB" runs --db old.db
tst "  a read-only command leaves it unmarked" test "$(sqlite3 old.db 'PRAGMA application_id')" = 0
check "run records into it" 0 "$NB" run mnist $S --subset 300 --steps 2 --db old.db
tst "  and marks it" test "$(sqlite3 old.db 'PRAGMA application_id')" = 1852797549

# ---- --db that is not a regular file
null_journal_before=$([ -e /dev/null-journal ] && echo yes || echo no)
ln -s /dev/null nul.db
for c in "runs" "run mnist $S --subset 300 --steps 2"; do
    check "$c --db (a symbolic link to /dev/null) is refused" 1 "$NB" $c --db nul.db
    has "  the message says what it is" "$tmp/err" "'nul.db' is a symbolic link to a character device"
done
if [ "$null_journal_before" = no ]; then
    tst "  no /dev/null-journal was created" test ! -e /dev/null-journal
else
    n=$((n + 1)); echo "ok $n # skip /dev/null-journal existed before the test"
fi
mkfifo pipe.db
check "--db a named pipe is refused" 1 "$NB" run mnist $S --subset 300 --steps 2 --db pipe.db
has "  the message says what it is" "$tmp/err" "'pipe.db' is a named pipe"
ln -s nowhere dangling.db
check "--db a symbolic link to nothing is refused" 1 "$NB" run mnist $S --subset 300 --steps 2 --db dangling.db
tst "  and nothing was created where it points" test ! -e nowhere
ln -s old.db link.db
check "--db a symbolic link to a store is followed" 0 "$NB" runs --db link.db

# ---- a read-only store is readable
# chmod does not stop root, so the store goes on a file system mounted read-only, in a user and
# mount namespace of its own (unshare); where that is not allowed, the test is skipped.
mkdir ro
if unshare -rm true 2>/dev/null && unshare -rm sh -c "mount -t tmpfs none '$tmp/ro'" 2>/dev/null; then
    cp s.db ro-src.db
    rm -f ro-src.db-wal ro-src.db-shm
    unshare -rm sh -c "
        mount -t tmpfs none '$tmp/ro' && cp '$tmp/ro-src.db' '$tmp/ro/s.db' &&
        { mount -o remount,ro,bind '$tmp/ro' 2>/dev/null || mount -o remount,ro '$tmp/ro'; } || exit 99
        touch '$tmp/ro/probe' 2>/dev/null && exit 98
        cd '$tmp/ro'
        '$NB' runs --db s.db >'$tmp/ro-runs' 2>&1 || exit 1
        '$NB' show 1 --db s.db >'$tmp/ro-show' 2>&1 || exit 2
        '$NB' report --db s.db >'$tmp/ro-report' 2>&1 || exit 3
        '$NB' plot --task mnist --db s.db --term dumb >'$tmp/ro-plot' 2>&1 || exit 4
        '$NB' run mnist $S --subset 300 --steps 2 --db s.db >'$tmp/ro-run' 2>&1 && exit 5
        ls -A '$tmp/ro' >'$tmp/ro-ls'
        exit 0"
    rc=$?
    tst "runs, show, report and plot read a store on a read-only file system (failed at step $rc)" test $rc -eq 0
    tst "  runs listed the run" grep -q "synthetic" "$tmp/ro-runs"
    tst "  nothing was created there" test "$(cat "$tmp/ro-ls" 2>/dev/null)" = s.db
    tst "  run, which writes, is refused with a message" grep -q "read-only\|readonly" "$tmp/ro-run"
    # a store of the older schema (1: no claims, no process start times) read where it cannot
    # be migrated: shown through temporary objects, the file left as it was
    cp ro-src.db old1.db
    sqlite3 old1.db "DROP TABLE claims; DROP TABLE meta; ALTER TABLE runs DROP COLUMN pid_start; PRAGMA user_version = 1" >/dev/null
    unshare -rm sh -c "
        mount -t tmpfs none '$tmp/ro' && cp '$tmp/old1.db' '$tmp/ro/s.db' &&
        { mount -o remount,ro,bind '$tmp/ro' 2>/dev/null || mount -o remount,ro '$tmp/ro'; } || exit 99
        cd '$tmp/ro'
        '$NB' runs --db s.db >'$tmp/ro1-runs' 2>&1 || exit 1
        '$NB' show 1 --db s.db >'$tmp/ro1-show' 2>&1 || exit 2
        '$NB' report --db s.db >'$tmp/ro1-report' 2>&1 || exit 3
        exit 0"
    rc=$?
    tst "a schema-1 store on a read-only file system is readable (failed at step $rc)" test $rc -eq 0
    tst "  runs listed its run" grep -q "synthetic" "$tmp/ro1-runs"
else
    for i in 1 2 3 4 5 6; do n=$((n + 1)); echo "ok $n # skip unshare cannot mount a read-only file system here"; done
fi
# the same with the file and its directory read-only by mode, where that binds (not as root)
if [ "$(id -u)" != 0 ]; then
    mkdir rodir && cp s.db rodir/s.db && chmod a-w rodir/s.db rodir
    check "runs reads a store whose file and directory are read-only" 0 "$NB" runs --db rodir/s.db
    check "plot reads it" 0 "$NB" plot --task mnist --db rodir/s.db --term dumb
    chmod u+w rodir
else
    for i in 1 2; do n=$((n + 1)); echo "ok $n # skip chmod does not bind root"; done
fi

echo "1..$n"
exit $((fails > 0))
