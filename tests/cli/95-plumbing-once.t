#!/bin/bash
# Plumbing written once, in util/ (issue 32), checked on the tree (TAP, for prove): JSON is read
# by util/json.c's reader alone (the run layer and its MPI agreements scan no JSON by hand);
# every loader that takes a whole file into memory does it through util/file.c's nb_read_file
# (one reader, with a size cap); below cmd/ no file is written but through util/file.c (download's
# .part aside), and a file is renamed into place there alone.
set -u
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1

# JSON: no hand-written scanner (a loop over quotes) below cmd/ but util/json.c
hits=$(grep -n "'\"'" run/*.c report/json.c results/*.c 2>/dev/null)
[ -z "$hits" ] && ok "run/, report/json.c and results/ scan no JSON by hand" || not_ok "no JSON scanner but util/json.c" "$hits"
for f in run/job.c run/mpi.c report/html.c; do
    grep -q 'nb_json_read_object' "$f" && ok "$f reads JSON with util/json.h's reader" \
        || not_ok "$f reads JSON with util/json.h's reader"
done

# whole files: through nb_read_file
for f in datasets/bpe.c datasets/binmnist.c datasets/chars.c datasets/coco.c datasets/pickle.c \
    datasets/top4.c tasks/mt.c run/mpi.c report/html.c plots/plot.c; do
    grep -q 'nb_read_file(' "$f" && ok "$f reads whole files with nb_read_file" \
        || not_ok "$f reads whole files with nb_read_file"
done
# atomic writes: no library file writes a file with fopen (download.c appends to its .part, the
# one file written in pieces as they come); nb_atomic / nb_write_atomic do
hits=$(grep -n 'fopen([^;]*"[wa]' datasets/*.c nn/*.c tasks/*.c results/*.c plots/*.c report/*.c run/*.c bench/*.c 2>/dev/null | grep -v '^datasets/download.c:.*"ab"')
[ -z "$hits" ] && ok "below cmd/ no file is written through fopen" || not_ok "no fopen for writing below cmd/" "$hits"
# atomic writes: the one rename
hits=$(grep -rn '\brename(' --include='*.c' util datasets nn tasks results plots report run bench cmd | grep -v '^util/file.c:')
[ -z "$hits" ] && ok "a file is renamed into place in util/file.c alone" || not_ok "one rename" "$hits"

echo "1..$n"
exit $((fails > 0))
