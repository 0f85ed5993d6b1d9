#!/bin/bash
# The source's layers (docs/source-tour.md), checked on the tree (TAP, for prove): the commands
# parse and print while a run, the benchmarks and MPI live below them; nothing re-enters a
# command through an argument vector; <mpi.h> is included by one file; no function of the run
# and benchmark layers is longer than 150 lines; cmd/ stays under 5,000 lines.
set -u
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1

hits=$(grep -rn 'nb_run_exec\|nb_run_host' --include='*.c' --include='*.h' cmd run bench report tasks tests 2>/dev/null)
[ -z "$hits" ] && ok "no command re-entered through nb_run_exec" || not_ok "nb_run_exec is gone" "$hits"
hits=$(grep -rln '^#include <mpi.h>' --include='*.c' --include='*.h' . | grep -v '^./build')
[ "$hits" = "./run/mpi.c" ] && ok "<mpi.h> is included by run/mpi.c alone" || not_ok "<mpi.h> by one file" "$hits"
hits=$(grep -ln '"cmd/' run/*.[ch] bench/*.[ch] report/*.[ch] 2>/dev/null)
[ -z "$hits" ] && ok "run/, bench/ and report/ include nothing from cmd/" || not_ok "no include of cmd/ below it" "$hits"
[ -f run/job.h ] && grep -q 'int nb_job_exec(nb_job \*j);' run/job.h && grep -q 'nb_job_from_store' run/job.h \
    && ok "a run is a value: run/job.h builds and executes nb_job" || not_ok "run/job.h declares nb_job's entry points"
# no mutable file-scope variable in bench/: what steers a benchmark is its nb_bench
hits=$(grep -n '^static [^(]*[;=]' bench/*.c | grep -v 'static const' )
[ -z "$hits" ] && ok "bench/ keeps no mutable file-scope state" || not_ok "bench/ keeps no mutable file-scope state" "$hits"
# function lengths: from a definition's first line (column 0, ends in '{' or continues) to its '}'
long=$(awk 'FNR == 1 { start = 0 }
    /^[a-z].*\(/ && !/;$/ { start = FNR; name = $0 }
    /^}/ && start { if (FNR - start > 150) print FILENAME ": " name " (" FNR - start " lines)"; start = 0 }' \
    run/*.c bench/*.c)
[ -z "$long" ] && ok "no function in run/ or bench/ is longer than 150 lines" || not_ok "functions of at most 150 lines" "$long"
lines=$(cat cmd/*.c | wc -l)
[ "$lines" -lt 5000 ] && ok "cmd/ has $lines lines (< 5,000)" || not_ok "cmd/ under 5,000 lines ($lines)"
# no import circle among cmd/ files: a command file calls no function that main.c defines
defs=$(grep -o '^[a-z][a-z_ ]* \**\(nb_[a-z_]*\)(' cmd/main.c | sed 's/.*\(nb_[a-z_]*\)(/\1/')
hits=$(for d in $defs; do grep -ln "\b$d(" cmd/*.c | grep -v 'cmd/main.c'; done)
[ -z "$hits" ] && ok "no command calls back into cmd/main.c" || not_ok "no command calls back into cmd/main.c" "$hits"

echo "1..$n"
[ "$fails" -eq 0 ]
