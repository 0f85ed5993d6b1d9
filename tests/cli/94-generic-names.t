#!/bin/bash
# Generic kernels under their real names (issue 32, part 4; nn/real.h, nn/f64names.h), checked on
# the tree (TAP, for prove): no FN()/NB_FN() name macro in nn/; every generic function declared in
# a header has a definition a grep for 'NAME(' finds; tools/f64names.sh, which the library's build
# runs, passes on the built objects and fails on a double object that exports a float name, on
# unmatched #define/#undef lists and on a renamed name nn/ no longer has.
set -u
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1

hits=$(grep -rnE '(^|[^A-Za-z0-9_])(NB_)?FN\(' nn --include='*.c' --include='*.h' --include='*.cu')
[ -z "$hits" ] && ok "no FN()/NB_FN() name macro in nn/" || not_ok "no FN()/NB_FN() name macro in nn/" "$(echo "$hits" | head -5)"

# every renamed name declared as a function in a header is defined in a .c at column 0
names=$(sed -n 's/^#define \(nb_[A-Za-z0-9_]*\) \1_f64$/\1/p' nn/f64names.h)
nfun=0
missing=
for s in $names; do
    grep -qE "[ *]$s\(" nn/*.h nn/norms/*.h || continue
    nfun=$((nfun + 1))
    grep -qE "^[A-Za-z_][A-Za-z0-9_ ]*[ *]$s\(" nn/*.c nn/norms/*.c || missing="$missing $s"
done
[ "$nfun" -gt 100 ] && [ -z "$missing" ] && ok "each of $nfun generic functions has a definition grep finds by its name" \
    || not_ok "generic functions defined under their names ($nfun found)" "no definition:$missing"
grep -q '^void nb_layernorm_forward(real \*out' nn/norm.c && grep -q '^void nb_layernorm_forward(NB_REAL \*out' nn/norm.h \
    && ok "nb_layernorm_forward: defined in nn/norm.c, declared in nn/norm.h" || not_ok "nb_layernorm_forward found by grep"

# the build's check: on the objects of the binary under test (./normbench: build/; else its folder)
bdir=$(cd "$(dirname "$NB")" && pwd)
[ "$bdir" = "$root" ] && bdir=$root/build
objs=$(ls "$bdir"/nn/*_f64.o "$bdir"/nn/norms/*_f64.o 2>/dev/null)
if [ -n "$objs" ]; then
    # shellcheck disable=SC2086
    check "tools/f64names.sh passes on the built objects" 0 sh tools/f64names.sh nn/f64names.h $objs
else
    not_ok "the built double objects (*_f64.o) under $bdir"
fi
printf 'int nb_probe(int x) { return x + 1; }\n' >"$tmp/probe.c"
if cc -c -o "$tmp/probe.o" "$tmp/probe.c" && cp "$tmp/probe.o" "$tmp/probe_f64.o"; then
    check "a double object exporting a float name fails the check" 1 sh tools/f64names.sh nn/f64names.h "$tmp/probe_f64.o"
    has "... saying which name to rename, and where" "$tmp/err" "probe_f64.o defines nb_probe, a float name: add '#define nb_probe nb_probe_f64' and '#undef nb_probe' to nn/f64names.h"
else
    not_ok "cc compiles a probe object"
fi
grep -v '^#undef nb_tf_logits$' nn/f64names.h >"$tmp/undo.h"
check "a rename without its #undef fails the check" 1 sh tools/f64names.sh "$tmp/undo.h"
has "... naming it" "$tmp/err" '^< nb_tf_logits$'
sed 's/^#define nb_tf_logits nb_tf_logits_f64$/&\n#define nb_gone nb_gone_f64/; s/^#undef nb_tf_logits$/&\n#undef nb_gone/' nn/f64names.h >"$tmp/stale.h"
check "a rename of a name nn/ no longer has fails the check" 1 sh tools/f64names.sh "$tmp/stale.h"
has "... naming it" "$tmp/err" 'renames nb_gone, which nn/ no longer names'

echo "1..$n"
[ "$fails" -eq 0 ]
