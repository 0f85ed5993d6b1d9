#!/bin/bash
# CLI tests of what `make install` puts on a Debian user's machine (TAP, run by prove): the
# binary, the man page normbench(1) generated from the help texts (every command and option of
# every help in it; rendered by man or groff without a warning) and the bash completion script
# (sourced in bash, its function called with COMP_WORDS as bash does); `normbench --version`
# with the git revision and the BLAS. Installs with `make install-files` (what `make install`
# runs once everything is built) into a DESTDIR under a temporary directory.
set -u
. "$(dirname "$0")/lib.sh"
case $NB in /*) ;; *) NB=$PWD/$NB ;; esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# the build directory of the binary under test: ./normbench is build's, build-asan/normbench
# build-asan's
case $NB in
"$ROOT/normbench") BUILD=build ;;
"$ROOT"/*/normbench) BUILD=${NB#"$ROOT/"} BUILD=${BUILD%/normbench} ;;
*) echo "1..0 # skip $NB is not a build of $ROOT"; exit 0 ;;
esac
D=$tmp/dest
make -s -C "$ROOT" install-files BUILD="$BUILD" DESTDIR="$D" PREFIX=/usr >"$tmp/out" 2>"$tmp/err"
rc=$?
tst "make install-files DESTDIR=... PREFIX=/usr exits 0" test $rc -eq 0
[ $rc -eq 0 ] || sed 's/^/# /' "$tmp/err"
BIN=$D/usr/bin/normbench MAN=$D/usr/share/man/man1/normbench.1
COMP=$D/usr/share/bash-completion/completions/normbench
tst "  the binary is installed, executable" test -x "$BIN"
tst "  the man page is installed in man1, readable by all" bash -c "[ \$(stat -c %a '$MAN') = 644 ]"
tst "  the bash completion is installed under the name of the command" test -s "$COMP"

# ---- --version
check "normbench --version exits 0" 0 "$BIN" --version
has "  it names the version and the git revision" "$tmp/out" '^normbench [0-9]+\.[0-9]+\.[0-9]+ \(git ([0-9a-f]{7,}(-dirty)?|unknown)\)$'
has "  and the BLAS in use (OpenBLAS's configuration) and the headers it was built against" \
    "$tmp/out" '^BLAS: OpenBLAS [0-9]+\.[0-9]+\.[0-9]+ .*\(built against .*\)$'
has "  and the compiler" "$tmp/out" '^compiler: '
rev=$(sed -n 's/.*(git \([^)]*\)).*/\1/p' "$tmp/out")
if git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1 && [ "$rev" != unknown ]; then
    tst "  the revision is a commit of this repository" git -C "$ROOT" cat-file -e "${rev%-dirty}^{commit}"
else
    n=$((n + 1)); echo "ok $n # skip not a git checkout"
fi

# ---- the man page: made from the help, so every option of every help is in it
missing=
"$BIN" --help >"$tmp/main"
cmds=$(sed -n '/^commands:/,/^$/s/^  \([a-z]*\) .*/\1/p' "$tmp/main")
tst "the commands are read from --help" test "$(echo "$cmds" | wc -w)" -ge 9
for c in $cmds; do
    [ "$c" = help ] && continue
    grep -qF ".SS \"normbench $c\"" "$MAN" || missing="$missing command:$c"
    for o in $("$BIN" "$c" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
        grep -qF -- "$(printf '%s' "$o" | sed 's/-/\\-/g')" "$MAN" || missing="$missing $c:$o"
    done
done
for t in $("$BIN" __complete tasks); do
    for o in $("$BIN" help run "$t" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
        grep -qF -- "$(printf '%s' "$o" | sed 's/-/\\-/g')" "$MAN" || missing="$missing run $t:$o"
    done
done
tst "every command and every option of every help (and every task's) is in the man page" \
    test -z "$missing"
[ -z "$missing" ] || echo "# missing:$missing"
tst "  an option's help text is there too" grep -qF 'write the html page to FILE (atomically; \- for stdout)' "$MAN"
perl "$ROOT/tools/mkman.pl" "$BIN" >"$tmp/again.1"
tst "  the page is the generator's output for this binary (no date: the same bytes)" cmp -s "$MAN" "$tmp/again.1"
if command -v groff >/dev/null; then
    groff -man -Tutf8 -ww -z "$MAN" 2>"$tmp/gw"
    tst "groff renders it with no warning" test ! -s "$tmp/gw"
    [ -s "$tmp/gw" ] && sed 's/^/# /' "$tmp/gw" | head -5
else
    n=$((n + 1)); echo "ok $n # skip groff is not installed"
fi
if command -v man >/dev/null; then
    MANWIDTH=100 man -l "$MAN" >"$tmp/man.txt" 2>"$tmp/manerr"
    rc=$?
    tst "man -l renders it (exit 0, nothing on stderr)" bash -c "[ $rc = 0 ] && [ ! -s '$tmp/manerr' ]"
    tst "  with its sections and commands" bash -c "grep -q '^NAME' '$tmp/man.txt' && grep -q '^SYNOPSIS' '$tmp/man.txt' && grep -q '^COMMANDS' '$tmp/man.txt' && grep -q '^EXIT STATUS' '$tmp/man.txt' && grep -q 'normbench report' '$tmp/man.txt'"
    tst "  options shown as typed (--format FMT)" grep -q -- '--format FMT' "$tmp/man.txt"
else
    for i in 1 2 3; do n=$((n + 1)); echo "ok $n # skip man is not installed"; done
fi

# ---- the completion: sourced in bash, its function called as bash calls it
cat >"$tmp/complete.sh" <<'EOF'
. "$1"
shift
COMP_WORDS=("$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMPREPLY=()
_normbench
complete -p normbench >/dev/null || echo "not registered"
echo "${COMPREPLY[*]}"
EOF
comp() { bash "$tmp/complete.sh" "$COMP" "$BIN" "$@" 2>&1; }
is() { # is DESC EXPECTED WORDS...
    local want=$2 got
    shift 2
    got=$(comp "$@")
    if [ "$got" = "$want" ]; then ok "completion: normbench $* -> $want"; else not_ok "completion: normbench $* -> $want" "got: $got"; fi
}
is cmds "$(echo $cmds) --help --version" ''
is cmd-prefix "run runs report" r
is tasks "$("$BIN" __complete tasks | xargs)" run ''
tst "  the tasks are those of 'help run'" test "$("$BIN" __complete tasks | xargs)" = \
    "$("$BIN" help run | sed -n 's/^task \([a-z0-9-]*\) (.*/\1/p' | xargs)"
is norms "none batch weight layer rms prms dyt" run mnist --norm ''
is norm-prefix "rms" run mnist --norm r
is norm-equals "rms" run mnist --norm=r
is option-prefix "--norm --no-wn-init --no-ftz --no-fetch" run mnist --n
is task-option "--zca" run cifar --z
is "a task's option is not another's" "" run mnist --z
is task-choices "hw chw" run cifar --norm-axes ''
is task-datasets "cifar10 fashion-mnist mnist synthetic" run cifar --dataset ''
is format-choices "table md csv json html" report --format ''
is term-choices "png+svg png svg dumb" plot --term ''
is plot-task "$("$BIN" __complete tasks | xargs)" plot --task ''
is bench-sub "kernels step" bench ''
is bench-task "$("$BIN" __complete tasks | xargs)" bench step ''
is bench-norms "layer" bench kernels --norms l
is sweep-norms "none batch weight layer rms prms dyt all" sweep mnist --norms ''
is sweep-own-option "--jobs" sweep mnist --j
is sweep-run-option "--no-wn-init" sweep mnist --jobs 2 --no-w
is fetch-datasets "$("$BIN" __complete registry | xargs)" fetch ''
is help-cmds "$(echo $cmds)" help ''
is help-run-task "order" help run o
is "a value is not a positional" "" run mnist --seed 3 ''
mkdir "$tmp/dbdir" && touch "$tmp/dbdir/a.db" "$tmp/dbdir/b.db"
got=$(comp report --db "$tmp/dbdir/" | tr ' ' '\n' | sort | xargs)
tst "completion: normbench report --db DIR/ -> the files in it" test "$got" = "$tmp/dbdir/a.db $tmp/dbdir/b.db"
check "__complete with nothing to list is a usage error" 2 "$BIN" __complete nothing
tst "  help does not list __complete" bash -c "! '$BIN' --help | grep -q __complete"

echo "1..$n"
exit $((fails > 0))
