#!/bin/bash
# report/ prints nothing itself (issue 32): the HTML page's messages (a figure gnuplot failed to
# draw, a report with no figures for want of gnuplot) go through the command's hook
# (report/report.h's nb_report_io), which prints them on stderr once each, never into the page
# or onto stdout (TAP, for prove). tests/cli/94-layers-print.t checks the tree.
set -u
. "$(dirname "$0")/lib.sh"
case $NB in /*) ;; *) NB=$PWD/$NB ;; esac
unset NORMBENCH_DB
cd "$tmp" || exit 1
for norm in layer rms; do
    "$NB" run mnist --dataset synthetic --threads 1 --quiet --subset 300 --steps 10 --log-every 2 \
        --db s.db --norm $norm >/dev/null 2>&1 || not_ok "run mnist --norm $norm"
done

# no gnuplot on PATH: a note on the page, one warning on stderr
mkdir -p nognu
check "report --format html without gnuplot exits 0" 0 env PATH="$tmp/nognu" "$NB" report --db s.db --format html --out a.html
has "  one warning on stderr" "$tmp/err" '^warning: the report has no figures: '
c=$(grep -c . "$tmp/err")
[ "$c" = 1 ] && ok "  and nothing else on stderr" || not_ok "  one line on stderr ($c)" "$(cat "$tmp/err")"
[ "$(cat "$tmp/out")" = a.html ] && ok "  stdout names the page alone" || not_ok "  stdout names the page" "$(cat "$tmp/out")"
check "the page to stdout without gnuplot exits 0" 0 env PATH="$tmp/nognu" "$NB" report --db s.db --format html
has "  the warning on stderr" "$tmp/err" '^warning: the report has no figures: '
if grep -q 'warning:' "$tmp/out"; then not_ok "  the page holds no message line"; else ok "  the page holds no message line"; fi
has "  the page is whole" "$tmp/out" '</html>$'

# a gnuplot that fails: the page says so in place of the figure, stderr once, exit 1
mkdir -p fakebin
printf '#!/bin/sh\ncat >/dev/null\necho "gnuplot: broken" >&2\nexit 1\n' >fakebin/gnuplot
chmod +x fakebin/gnuplot
check "a failing gnuplot: exit 1" 1 env PATH="$tmp/fakebin:$PATH" "$NB" report --db s.db --format html --out b.html
c=$(grep -c '^error: the figure of mnist / synthetic failed: ' "$tmp/err")
[ "$c" = 1 ] && ok "  the figure's error once on stderr" || not_ok "  the figure's error once ($c)" "$(cat "$tmp/err")"
has "  and the command's summary" "$tmp/err" "^error: 'b.html' was written without 1 figure"
tst "  the page says why in place of the figure" grep -q "Error: the figure failed:</b>" b.html

echo "1..$n"
exit $((fails > 0))
