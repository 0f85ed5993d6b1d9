#!/bin/bash
# Below cmd/ nothing prints (docs/source-tour.md), checked on the tree (TAP, for prove): run/,
# bench/ and report/ write no stdout or stderr of their own (their tables and pages go to a
# stream the command gives, their messages through the command's hooks: nb_job_io, nb_bench_io,
# nb_mpi_set_say, nb_report_io),
# and a sweep starts its jobs without running normbench again.
set -u
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1

# printf, puts, putchar, fputs/fputc/fprintf/vfprintf to stdout or stderr, perror
hits=$(grep -nE '(^|[^a-z_])(printf|puts|putchar|perror|vprintf)\(|(fputs|fputc|fprintf|vfprintf|fwrite)\([^;]*\b(stdout|stderr)\b' run/*.c bench/*.c report/*.c)
[ -z "$hits" ] && ok "run/, bench/ and report/ print nothing themselves" || not_ok "run/, bench/ and report/ print nothing" "$hits"
hits=$(grep -nE '\b(stdout|stderr)\b' run/*.c bench/*.c report/*.c | grep -v 'fflush(stderr)')
[ -z "$hits" ] && ok "... nor name stdout or stderr (but to flush before a fork)" || not_ok "no stdout or stderr below cmd/" "$hits"
hits=$(grep -n 'execv\|/proc/self/exe' cmd/cmd_sweep.c)
[ -z "$hits" ] && ok "sweep builds its jobs and executes them: no exec of normbench" || not_ok "sweep execs no normbench" "$hits"

echo "1..$n"
exit $((fails > 0))
