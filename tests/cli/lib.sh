# tests/cli/lib.sh — what every command-line test file shares (sourced; TAP helpers for prove).
# Sets NB (the binary), tmp (a temporary directory removed at exit), and the counters n, fails;
# a file server that fetch_server started (srv_pid) is stopped at exit too.
NB=${NORMBENCH_BIN:-./normbench}
tmp=$(mktemp -d)
srv_pid=
trap '[ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
n=0
fails=0
# asan: 1 when the binary under test is an AddressSanitizer build (make asan), where the
# slowest files do less, each saying what
asan=0
grep -q __asan_init "$NB" 2>/dev/null && asan=1
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; [ -n "${2:-}" ] && echo "$2" | sed 's/^/# /'; }
# check DESC EXPECTED_RC CMD...: runs CMD, stdout in $tmp/out, stderr in $tmp/err
check() {
    local desc=$1 want=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then ok "$desc"; else not_ok "$desc (exit $rc, want $want)" "$(tail -n 5 "$tmp/err")"; fi
}
# tst DESC CMD...: ok when CMD succeeds
tst() { if "${@:2}"; then ok "$1"; else not_ok "$1"; fi; }
# mt_mkdata DIR: a small Multi30k-shaped data directory, DIR/multi30k/*.gz: per split N pairs of
# 3 to 10 words (train 300, val 40, the two tests 30), the German side the English words with an x
mt_mkdata() {
    mkdir -p "$1/multi30k"
    for s in train:300 val:40 test_2016_flickr:30 test_2017_flickr:30; do
        awk -v n="${s#*:}" -v seed="${#s}" 'BEGIN {
            split("a the dog cat runs jumps over red big small man woman street park ball", w, " ")
            srand(seed)
            for (i = 0; i < n; i++) {
                k = 3 + int(rand() * 8); e = ""; g = ""
                for (j = 0; j < k; j++) { x = w[1 + int(rand() * 15)]; e = e x " "; g = g x "x " }
                print e "." > "/dev/stdout"; print g "." > "/dev/stderr"
            } }' >"$1/multi30k/${s%%:*}.en" 2>"$1/multi30k/${s%%:*}.de"
    done
    gzip -n -f "$1"/multi30k/*.en "$1"/multi30k/*.de
}
# has DESC FILE REGEX
has() { if grep -q -E -- "$3" "$2"; then ok "$1"; else not_ok "$1" "$(head -n 5 "$2")"; fi; }
# fetch_server TIMEOUT: starts tests/fetch_server.py on 127.0.0.1 serving $tmp/srv, for at most
# TIMEOUT seconds; sets srv_pid, and port (empty when the server did not start within 10 s).
fetch_server() {
    python3 "$(dirname "${BASH_SOURCE[0]}")/../fetch_server.py" --root "$tmp/srv" --timeout "$1" >"$tmp/port" &
    srv_pid=$!
    for i in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
    port=$(head -n 1 "$tmp/port")
}
# mpi_local: skips the file (TAP plan 1..0) where mpirun is missing; else sets Open MPI up for one
# machine: root allowed, no shared-memory single copy (refused in containers), more ranks than
# cores, and MPIRUN without core binding.
mpi_local() {
    if ! command -v mpirun >/dev/null 2>&1; then
        echo "1..0 # skip mpirun is not installed (Debian: openmpi-bin libopenmpi-dev)"
        exit 0
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
    MPIRUN="mpirun --bind-to none"
}
