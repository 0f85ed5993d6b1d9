#!/bin/bash
# CLI tests of `normbench report --format html` (TAP, run by prove): one self-contained page
# (no script, no reference outside itself), with the tables, the figures as inline SVG, the
# provenance and the runs; stable bytes; stored strings inert; gnuplot's SVG sanitized; written
# atomically; and, where Debian's chromium is installed, rendered by a real browser (the page's
# text, the figures' size, no console message), its screenshot kept in $NORMBENCH_ARTIFACTS
# (make test: build/artifacts/report.png), and printed to PDF (report.pdf beside it).
set -u
. "$(dirname "$0")/lib.sh"
case $NB in /*) ;; *) NB=$PWD/$NB ;; esac
unset NORMBENCH_DB
ART=${NORMBENCH_ARTIFACTS:-$tmp/artifacts}
S="--dataset synthetic --threads 1 --quiet --subset 300 --steps 20 --log-every 2"
cd "$tmp" || exit 1
mkdir tmpd
export TMPDIR=$tmp/tmpd # where the figures are drawn: must be left empty
have_gnuplot=0
command -v gnuplot >/dev/null && have_gnuplot=1

for run in "layer --seed 1" "rms --seed 1" "layer --seed 2" "rms --seed 2"; do
    # shellcheck disable=SC2086
    "$NB" run mnist $S --db s.db --norm $run >/dev/null 2>&1 || not_ok "run mnist --norm $run"
done

# What a self-contained, inert page is, checked with Python's HTML parser: no element that loads
# or runs anything, no event handler, no reference that leaves the page.
cat >check_html.py <<'EOF'
import sys
from html.parser import HTMLParser
bad_tags = {"script", "link", "iframe", "img", "object", "embed", "image", "foreignobject",
            "audio", "video", "source", "base", "form", "frame", "applet"}
class P(HTMLParser):
    def __init__(self):
        super().__init__()
        self.problems, self.text, self.svgs, self.tables = [], [], 0, 0
    def handle_starttag(self, tag, attrs):
        if tag in bad_tags:
            self.problems.append("element <%s>" % tag)
        if tag == "svg":
            self.svgs += 1
        if tag == "table":
            self.tables += 1
        for k, v in attrs:
            v = v or ""
            if k.startswith("on"):
                self.problems.append("handler %s" % k)
            if k in ("href", "xlink:href", "src", "action") and not v.startswith("#"):
                self.problems.append("%s=%r" % (k, v))
            if "url(" in v.replace(" ", "") and "url(#" not in v.replace(" ", ""):
                self.problems.append("url() in %s" % k)
    def handle_data(self, d):
        self.text.append(d)
p = P()
page = open(sys.argv[1], encoding="utf-8").read()
p.feed(page)
for needle in ("@import", "url(http", "url(//", "url(file"):
    if needle in page:
        p.problems.append(needle)
mode = sys.argv[2]
text = "".join(p.text)
if mode == "inert":
    assert not p.problems, p.problems
elif mode == "svgs":
    print(p.svgs)
elif mode == "tables":
    print(p.tables)
elif mode == "text":
    for s in sys.argv[3:]:
        assert s in text, "missing text: %r" % s
EOF
html() { python3 check_html.py "$@" 2>"$tmp/pyerr"; }

# ---- the page
check "report --format html --out r.html exits 0" 0 "$NB" report --db s.db --format html --out r.html
tst "  stdout names the file" test "$(cat "$tmp/out")" = r.html
tst "  the file starts as an HTML5 document" bash -c "head -n 1 r.html | grep -qx '<!DOCTYPE html>'"
tst "  no temporary file is left beside it" bash -c "! ls -a | grep -q '\.tmp'"
tst "  the file is readable by others (not mkstemp's 0600)" bash -c "[ \$(stat -c %a r.html) = 644 ] || [ \$(umask) != 0022 ]"
tst "  nothing in it loads or runs anything (no script, handler, outside reference)" html r.html inert
tst "  a Content-Security-Policy forbids loading anything else" grep -q "default-src 'none'" r.html
tst "  it has a print style" grep -q "@media print" r.html
tst "  the report's table: its headers and both norms" \
    html r.html text "ms/step" "speed-up" "steps to val_error<=0.15" "layer" "rms" "test_error"
tst "  the speed sentence and what the papers report" \
    html r.html text "per step than layer" "What the papers report" "LN paper"
rev=$("$NB" --version | sed -n 's/.*(git \([^)]*\)).*/\1/p' | sed 's/-dirty$//')
tst "  the provenance: machine, threads, BLAS, git revision" \
    html r.html text "machine" "threads" "OpenBLAS" "$rev" "$(hostname)"
tst "  the runs with their configuration (shared and per run)" \
    html r.html text "Configuration shared by these runs" "optimizer=adam" "subset=300" "finished"
tst "  tables: the report, the provenance, the runs" test "$(html r.html tables)" -eq 3
if [ $have_gnuplot = 1 ]; then
    tst "  one figure, inline SVG" test "$(html r.html svgs)" -eq 1
    tst "  the figure draws the lines (paths) and its titles" \
        bash -c "[ \$(grep -c '<path' r.html) -gt 10 ] && grep -q 'training loss against training steps' r.html"
    tst "  no temporary file or directory is left" test -z "$(ls -A tmpd)"
else
    for i in 1 2 3; do n=$((n + 1)); echo "ok $n # skip gnuplot is not installed"; done
fi
"$NB" report --db s.db --format html --out r2.html >/dev/null 2>&1
tst "  the same store gives the same bytes (diffable)" cmp -s r.html r2.html
check "without --out the page goes to stdout" 0 "$NB" report --db s.db --format html
tst "  the same page" cmp -s "$tmp/out" r.html
check "report --task mnist --format html exits 0" 0 "$NB" report --db s.db --task mnist --format html --out t.html
tst "  its title names the task" grep -q "<title>normbench report: mnist</title>" t.html

# ---- refused
check "--out with a newline is a usage error" 2 "$NB" report --db s.db --format html --out $'x\n.html'
has "  the message shows it escaped" "$tmp/err" "invalid --out 'x\\\\n.html'"
tst "  nothing was written" bash -c "! ls -a | grep -q '^x'"
check "--out without --format html is a usage error" 2 "$NB" report --db s.db --out r3.html
check "--out into a missing directory fails" 1 "$NB" report --db s.db --format html --out nodir/r.html
has "  naming it" "$tmp/err" "nodir/r.html"
echo old >keep.html
chmod a-w .
if [ "$(id -u)" != 0 ]; then
    check "--out in a read-only directory fails" 1 "$NB" report --db s.db --format html --out keep.html
    tst "  and the file there is untouched" test "$(cat keep.html)" = old
else
    for i in 1 2; do n=$((n + 1)); echo "ok $n # skip a read-only mode does not bind root"; done
fi
chmod u+w .

# ---- a hostile store: tags and names with markup and quotes, written with sqlite3
cp s.db h.db
sqlite3 h.db "INSERT INTO tags(run, key, value) VALUES (1, 'variant', '<script>alert(1)</script>\"q''s&amp;');
              UPDATE runs SET norm = '<img src=x onerror=alert(2)>' WHERE id = 2;
              UPDATE runs SET dataset = 'syn\"><b>bold</b>' WHERE id = 3" ||
    not_ok "sqlite3 could write the hostile labels"
check "report --format html of a hostile store exits 0" 0 "$NB" report --db h.db --format html --out h.html
tst "  the page is still inert" html h.html inert
tst "  no raw <script>, <img> or <b> from the store" bash -c "! grep -q '<script\|<img\|<b>bold' h.html"
tst "  the stored strings are shown as text" \
    html h.html text '<script>alert(1)</script>"q'"'"'s&amp;' '<img src=x onerror=alert(2)>' 'syn"><b>bold</b>'
if [ $have_gnuplot = 1 ]; then
    tst "  and the figures still come" test "$(html h.html svgs)" -ge 2
else
    n=$((n + 1)); echo "ok $n # skip gnuplot is not installed"
fi

# ---- gnuplot's SVG is sanitized: a gnuplot that writes scripts, handlers and outside links
mkdir fakebin
cat >fakebin/gnuplot <<'EOF'
#!/bin/sh
# writes a hostile SVG where normbench asked for one (out_svg = '...' in its -e argument)
out=$(printf '%s' "$2" | sed -n "s/.*out_svg = '\([^']*\)'.*/\1/p")
cat >"$out" <<'SVG'
<?xml version="1.0"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg width="600" height="400" viewBox="0 0 600 400" onload="alert(3)" xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">
<script xlink:href="gnuplot_svg.js"/>
<script type="text/javascript"><![CDATA[ alert(4) ]]></script>
<defs><clipPath id="clip1"><rect x="0" y="0" width="10" height="10"/></clipPath></defs>
<g id="canvas" onmouseover='alert(5)' style="background:url(http://evil.example/x)">
<rect x="0" y="0" width="600" height="400" fill="#ffffff" filter="url(http://evil.example/f)"/>
<path d="M0,0 L600,400" stroke="red" clip-path="url(#clip1)"/>
<use xlink:href="http://evil.example/sprite.svg#a"/><use xlink:href="#clip1"/>
<a xlink:href="http://evil.example/"><text>link</text></a>
<image xlink:href="http://evil.example/i.png" width="10" height="10"/>
<foreignObject><div xmlns="http://www.w3.org/1999/xhtml"><iframe src="http://evil.example/"></iframe></div></foreignObject>
<text x="10" y="20">a &amp; b &lt; c</text>
</g>
</svg>
SVG
EOF
chmod +x fakebin/gnuplot
check "report --format html with that gnuplot exits 0" 0 env PATH="$tmp/fakebin:$PATH" "$NB" report --db s.db --format html --out f.html
tst "  the page is inert" html f.html inert
tst "  nothing of evil.example, gnuplot_svg.js, alert or the DTD is left" \
    bash -c "! grep -q 'evil\.example\|gnuplot_svg\|alert\|DTD\|<!DOCTYPE svg' f.html"
tst "  the drawing is kept, with its ids prefixed and references to them" \
    bash -c "grep -q 'id=\"f1-clip1\"' f.html && grep -q 'clip-path=\"url(#f1-clip1)\"' f.html && grep -q 'xlink:href=\"#f1-clip1\"' f.html"
tst "  its text is kept, escaped" grep -q '<text x="10" y="20">a &amp; b &lt; c</text>' f.html
cat >fakebin/gnuplot <<'EOF'
#!/bin/sh
echo "gnuplot: broken" >&2
exit 1
EOF
check "report --format html with a failing gnuplot writes the page and exits 1" 1 env PATH="$tmp/fakebin:$PATH" "$NB" report --db s.db --format html --out g.html
has "  with an error naming the figure" "$tmp/err" "^error: the figure of mnist / synthetic failed: gnuplot failed"
tst "  the page says why in place of the figure" grep -q "Error: the figure failed:</b> gnuplot failed" g.html

# ---- a real browser: Debian's chromium, headless, loading the file from disk
CHROMIUM=${NORMBENCH_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -n "$CHROMIUM" ]; then
    mkdir -p "$ART"
    cp r.html "$ART/report.html"
    chrome() {
        local prof
        prof=$(mktemp -d "$tmp/profile.XXXXXX")
        timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
            --disable-background-networking --disable-component-update --disable-sync \
            --disable-dev-shm-usage --user-data-dir="$prof" --enable-logging=stderr "$@"
    }
    chrome --dump-dom "file://$tmp/r.html" >dom.html 2>chrome.err
    rc=$?
    tst "chromium loads the page (exit 0)" test $rc -eq 0
    tst "  the rendered page has the tables' text" \
        html dom.html text "ms/step" "layer" "rms" "OpenBLAS" "Configuration shared by these runs"
    tst "  and no console message (errors, blocked loads)" bash -c "! grep -q 'CONSOLE' chrome.err"
    # the figures' size: a page beside it (allowed to read files) measures the report in a frame
    cat >measure.html <<'EOF'
<!DOCTYPE html><html><body><pre id="out">not measured</pre>
<iframe id="f" src="r.html" style="width:1280px;height:4000px;border:0"></iframe>
<script>
document.getElementById("f").addEventListener("load", function () {
  var d = this.contentDocument, o = [];
  d.querySelectorAll("svg").forEach(function (s) {
    var r = s.getBoundingClientRect(); o.push("svg " + Math.round(r.width) + " " + Math.round(r.height)); });
  d.querySelectorAll("table").forEach(function (t) { o.push("table " + t.rows.length); });
  document.getElementById("out").textContent = o.join("\n");
});
</script></body></html>
EOF
    chrome --allow-file-access-from-files --virtual-time-budget=10000 --dump-dom \
        "file://$tmp/measure.html" >measured.html 2>measure.err
    sed -n '/<pre id="out">/,/<\/pre>/p' measured.html | sed 's/<[^>]*>//g' >sizes
    cp sizes "$ART/report-sizes.txt"
    if [ $have_gnuplot = 1 ]; then
        tst "  the figure is drawn at a readable size (at least 800 x 500 px)" \
            awk '$1 == "svg" { n++; if ($2 < 800 || $3 < 500) bad = 1 } END { exit !(n == 1 && !bad) }' sizes
    else
        n=$((n + 1)); echo "ok $n # skip gnuplot is not installed"
    fi
    tst "  the tables are laid out with their rows (report 3, provenance 2, runs 5)" \
        bash -c "grep -c '^table' sizes | grep -qx 3 && grep -q '^table 3$' sizes && grep -q '^table 5$' sizes"
    rm -f "$ART/report.png"
    chrome --window-size=1280,2200 --hide-scrollbars --screenshot="$ART/report.png" \
        "file://$tmp/r.html" >/dev/null 2>shot.err
    tst "  a screenshot is kept: $ART/report.png" \
        bash -c "[ \"\$(head -c 8 '$ART/report.png' | od -An -tx1 | tr -d ' \n')\" = 89504e470d0a1a0a ]"
    chrome --no-pdf-header-footer --print-to-pdf="$ART/report.pdf" "file://$tmp/r.html" \
        >/dev/null 2>pdf.err
    tst "  it prints: a PDF with the block and the runs on pages of their own (2 or more pages)" \
        bash -c "head -c 5 '$ART/report.pdf' | grep -q '%PDF-' && [ \$(grep -a -c '/Type /Page\\b' '$ART/report.pdf') -ge 2 ]"
    chrome --dump-dom "file://$tmp/h.html" >hdom.html 2>hchrome.err
    tst "  the hostile page renders its strings as text, and runs nothing" \
        bash -c "! grep -q CONSOLE hchrome.err && python3 check_html.py hdom.html text '<script>alert(1)</script>' '<img src=x onerror=alert(2)>'"
else
    for i in 1 2 3 4 5 6 7 8; do
        n=$((n + 1)); echo "ok $n # skip chromium is not installed (Debian: apt-get install chromium)"
    done
fi

echo "1..$n"
exit $((fails > 0))
