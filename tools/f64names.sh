#!/bin/sh
# Checks nn/f64names.h, the double-precision renames of the generic names (nn/real.h, nn/nn.h),
# against the objects built from the generic sources: run by the Makefile before it archives the
# library, so that a generic name without its rename fails the build.
#
#   tools/f64names.sh NAMES.h OBJ_f64.o...
#
# For each double object X_f64.o (beside it its float object X.o): every external symbol it
# defines ends in _f64 and, without the suffix, is one X.o defines (a float-only definition under
# #ifndef NB_F64 is allowed). And NAMES.h's #define list (name name_f64) and #undef list name the
# same names, each of which occurs somewhere in nn/ outside NAMES.h.
set -u
NAMES=${1:?usage: tools/f64names.sh NAMES.h OBJ_f64.o...}
shift
TMP=$(mktemp -d) || exit 2
trap 'rm -rf "$TMP"' EXIT
bad=0

syms() { # the external symbols an object defines, sorted
  nm -g --defined-only "$1" | awk 'NF == 3 { print $3 }' | LC_ALL=C sort -u
}

for o64 in "$@"; do
  o32=${o64%_f64.o}.o
  if [ ! -f "$o64" ] || [ ! -f "$o32" ]; then
    echo "tools/f64names.sh: no $o64 or no $o32 beside it" >&2
    exit 2
  fi
  syms "$o64" >"$TMP/64" || exit 2
  syms "$o32" >"$TMP/32" || exit 2
  if grep -v '_f64$' "$TMP/64" >"$TMP/plain"; then
    while read -r s; do
      echo "$o64 defines $s, a float name: add '#define $s ${s}_f64' and '#undef $s' to $NAMES" >&2
    done <"$TMP/plain"
    bad=1
  fi
  sed -n 's/_f64$//p' "$TMP/64" | LC_ALL=C sort | LC_ALL=C comm -23 - "$TMP/32" >"$TMP/odd"
  while read -r s; do
    echo "$o64 defines ${s}_f64 but $o32 defines no $s" >&2
    bad=1
  done <"$TMP/odd"
done

sed -n 's/^#define \(nb_[A-Za-z0-9_]*\) \1_f64$/\1/p' "$NAMES" | LC_ALL=C sort >"$TMP/def"
sed -n 's/^#undef \(nb_[A-Za-z0-9_]*\)$/\1/p' "$NAMES" | LC_ALL=C sort >"$TMP/undef"
n=$(grep -c -e '^#define' -e '^#undef' "$NAMES")
if [ "$n" -ne $(($(wc -l <"$TMP/def") + $(wc -l <"$TMP/undef"))) ]; then
  echo "$NAMES: a #define or #undef line not of the form '#define nb_x nb_x_f64' / '#undef nb_x'" >&2
  bad=1
fi
if ! LC_ALL=C cmp -s "$TMP/def" "$TMP/undef"; then
  echo "$NAMES: the #define and #undef lists differ (< only defined, > only undone):" >&2
  LC_ALL=C diff "$TMP/def" "$TMP/undef" | grep '^[<>]' >&2
  bad=1
fi
grep -rhow -f "$TMP/def" --include='*.c' --include='*.h' --exclude="$(basename "$NAMES")" nn |
  LC_ALL=C sort -u | LC_ALL=C comm -23 "$TMP/def" - >"$TMP/stale"
while read -r s; do
  echo "$NAMES renames $s, which nn/ no longer names: remove its two lines" >&2
  bad=1
done <"$TMP/stale"
[ $bad -eq 0 ] || echo "tools/f64names.sh: nn/f64names.h does not match the generic sources (see nn/real.h)" >&2
exit $bad
