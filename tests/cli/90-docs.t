#!/bin/bash
# The documentation's generated parts (issue 33; tools/mkdocs.pl, `make docs`): every
# `<!-- generated: COMMAND -->` block of README.md and docs/ is what its normbench command prints
# now from the stores kept in docs/results/, docs/commands.md is the binary's help, every
# relative link holds; and the check fails on a block edited by hand, on a stored metric changed
# by one unit in its last place, on a broken link. Also the README's own bar: at most 20 KB, the
# two commands and the start of the answer table on its first screen (TAP, for prove).
set -u
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdocs() { perl "$root/tools/mkdocs.pl" "$@"; }
page=docs/results/mnist.md
store=docs/results/mnist-fashion.db
report_block="normbench report --db $store --paper --format md"

# 1. The tree as it is: up to date.
check "every generated block, docs/commands.md and every link are up to date" 0 mkdocs --check --root "$root" "$NB"
[ -s "$tmp/out" ] && grep -q "all up to date" "$tmp/out" || echo "$(head -n 60 "$tmp/out")" | sed 's/^/# /'
has "it checked the blocks and the links" "$tmp/out" "^mkdocs: [1-9][0-9]* generated blocks, docs/commands.md and [1-9][0-9]* links checked"
grep -qF -- "<!-- generated: $report_block -->" "$root/$page" && ok "$page has the report block of its store" \
    || not_ok "$page has the report block of its store"

# A copy of the pages and stores to spoil.
fresh() {
    rm -rf "$tmp/tree"
    mkdir -p "$tmp/tree"
    cp -R "$root/README.md" "$root/docs" "$tmp/tree/"
    rm -rf "$tmp/tree"/docs/results/*.db-wal "$tmp/tree"/docs/results/*.db-shm "$tmp/tree"/docs/results/*-checkpoints
}

# 2. A number edited by hand inside a generated block: found, and `make docs` puts it back.
fresh
perl -0pi -e 's/(<!-- generated: normbench report[^\n]*\n(?:(?!<!-- end generated).*\n)*?\| layer \| \d+ \| \d\.\d{3})(\d)/$1.(($2 + 1) % 10)/e' "$tmp/tree/$page"
if cmp -s "$tmp/tree/$page" "$root/$page"; then not_ok "the hand edit was made"; else ok "the hand edit was made"; fi
check "a block edited by hand fails the check" 1 mkdocs --check --root "$tmp/tree" "$NB"
has "naming the page, the line and the command" "$tmp/out" "^docs/results/mnist\.md:[0-9]+: the block of '$report_block' differs"
has "with the difference" "$tmp/out" '^\+\| layer \| '
check "make docs' rewrite" 0 mkdocs --root "$tmp/tree" "$NB"
cmp -s "$tmp/tree/$page" "$root/$page" && ok "restores the block as it was" || not_ok "restores the block as it was"
check "and the check passes again" 0 mkdocs --check --root "$tmp/tree" "$NB"

# 3. A stored metric changed by one unit in its last place: one more test image wrong for run 4
# (test_error is a count over the 10,000 test images: 4 decimals).
fresh
sqlite3 "$tmp/tree/$store" "update metrics set value = value + 0.0001 where rowid = (select rowid from metrics where run = 4 and name = 'test_error' order by step desc limit 1)"
check "a stored metric changed by one unit in its last place fails the check" 1 mkdocs --check --root "$tmp/tree" "$NB"
has "in the block printed from that store" "$tmp/out" "^docs/results/mnist\.md:[0-9]+: the block of '$report_block' differs"

# 4. docs/commands.md edited by hand; a broken link; a command that fails.
fresh
sed -i 's/results store/result store/' "$tmp/tree/docs/commands.md"
check "docs/commands.md edited by hand fails the check" 1 mkdocs --check --root "$tmp/tree" "$NB"
has "naming it" "$tmp/out" "^docs/commands\.md differs from what the help texts say now"
fresh
printf '\nSee [nothing](nowhere.md) and [the guide](guide.md#no-such-heading).\n' >>"$tmp/tree/docs/speed.md"
check "a broken link fails the check" 1 mkdocs --check --root "$tmp/tree" "$NB"
has "a missing file is named" "$tmp/out" "^docs/speed\.md:[0-9]+: link to 'nowhere\.md': no file 'docs/nowhere\.md'"
has "a missing anchor is named" "$tmp/out" "^docs/speed\.md:[0-9]+: link to 'guide\.md#no-such-heading': no heading or id 'no-such-heading' in docs/guide\.md"
fresh
printf '\n<!-- generated: normbench report --db docs/results/no-such.db --format md -->\n<!-- end generated -->\n' >>"$tmp/tree/docs/speed.md"
check "a block whose command fails is an error" 2 mkdocs --check --root "$tmp/tree" "$NB"
has "naming the page and the command" "$tmp/err" "^docs/speed\.md:[0-9]+: 'normbench report --db docs/results/no-such\.db --format md' exited 1"
fresh
printf '\n<!-- generated: echo 0.1234 -->\n<!-- end generated -->\n' >>"$tmp/tree/docs/speed.md"
check "a block whose command is not normbench is refused" 2 mkdocs --check --root "$tmp/tree" "$NB"

# 5. The README: at most 20 KB; its first screen holds the two commands and the answer table.
size=$(wc -c <"$root/README.md")
[ "$size" -le 20480 ] && ok "README.md is at most 20 KB ($size bytes)" || not_ok "README.md is at most 20 KB ($size bytes)"
head -n 40 "$root/README.md" >"$tmp/screen"
has "its first 40 lines hold 'make demo'" "$tmp/screen" '^ +make demo'
has "and 'make test'" "$tmp/screen" '^ +make test'
has "and the answer table" "$tmp/screen" '^\| \[mnist\]'
grep -E '^\| \[' "$tmp/screen" | grep -oE '\]\[[a-z]+\]' | sort -u | tr -d '[]' >"$tmp/labels"
bad=""
for l in $(cat "$tmp/labels"); do grep -qE "^\[$l\]: docs/results/[a-z-]+\.md" "$root/README.md" || bad="$bad $l"; done
[ -s "$tmp/labels" ] && [ -z "$bad" ] && ok "whose cells link to the results pages ($(tr '\n' ' ' <"$tmp/labels"))" \
    || not_ok "whose cells link to the results pages (labels not in docs/results/:$bad)"

# 6. Every mnist cell of the README's answer table is a number of the generated report block
# (the test error's mean ± std of a norm's row; "X× faster|slower" of its sentence).
perl -e '
    my ($readme, $page) = @ARGV;
    open(my $r, "<", $readme) or die;
    my @rows = grep { /^\| \[mnist\]\[m\]/ } <$r>;
    open(my $p, "<", $page) or die;
    local $/;
    my ($block) = <$p> =~ /<!-- generated: normbench report[^\n]*\n(.*?)<!-- end generated -->/s;
    die "no report block in $page\n" unless defined $block;
    my @norms = qw(none batch weight layer rms prms dyt);
    my ($cells, $bad) = (0, 0);
    for my $row (@rows) {
        my @c = split /\s*\|\s*/, $row;
        splice(@c, 0, 2);
        for my $i (0 .. 6) {
            next unless defined $c[$i] && $c[$i] =~ /^\[(.+)\]\[m\]$/;
            my $v = $1;
            $cells++;
            my $found = $v =~ /^\d\.\d+ ± \d\.\d+$/ ? $block =~ /^\| $norms[$i] \| \d+ \| \Q$v\E \|/m
                : $v =~ /× (faster|slower)$/ ? $block =~ /^- $norms[$i] ran \Q$v\E per step than layer$/m : 0;
            if (!$found) { print "$norms[$i]: \x27$v\x27 is not in the report block of $page\n"; $bad++; }
        }
    }
    print "$cells cells\n";
    exit($bad || $cells < 10 ? 1 : 0);
' "$root/README.md" "$root/$page" >"$tmp/out" 2>&1 && ok "the README's mnist cells are the generated block's numbers ($(tail -n 1 "$tmp/out"))" \
    || not_ok "the README's mnist cells are the generated block's numbers" "$(cat "$tmp/out")"

# The README's synthetic mt cells ("here") are the steps-to-target column of that page's block.
perl -e '
    my ($readme, $page) = @ARGV;
    open(my $r, "<", $readme) or die;
    my ($row) = grep { /^\| \[mt RNNSearch\]\[r\] synthetic toy, here/ } <$r>;
    die "no synthetic row in $readme\n" unless $row;
    open(my $p, "<", $page) or die;
    local $/;
    my ($block) = <$p> =~ /<!-- generated: normbench report --db docs\/results\/mt-rnnsearch-synthetic\.db[^\n]*\n(.*?)<!-- end generated -->/s;
    die "no report block of the synthetic store in $page\n" unless defined $block;
    my @norms = qw(none batch weight layer rms prms dyt);
    my @c = split /\s*\|\s*/, $row;
    splice(@c, 0, 2);
    my ($cells, $bad) = (0, 0);
    for my $i (0 .. 6) {
        next unless $c[$i] =~ /^\[(.+)\]\[r\]$/;
        (my $v = $1) =~ s/^never /- /;
        $cells++;
        # the row of the first table: norm | runs | 6 metric columns | speed-up | steps to target
        my ($got) = $block =~ /^\| $norms[$i] \|(?: [^|]+ \|){7} ([^|]+) \|/m;
        if (!defined $got || $got ne $v) { print "$norms[$i]: \x27$v\x27, the block says \x27", $got // "nothing", "\x27\n"; $bad++; }
    }
    print "$cells cells\n";
    exit($bad || $cells < 4 ? 1 : 0);
' "$root/README.md" "$root/docs/results/mt-rnnsearch.md" >"$tmp/out" 2>&1 && ok "the README's synthetic mt cells are the generated block's ($(tail -n 1 "$tmp/out"))" \
    || not_ok "the README's synthetic mt cells are the generated block's" "$(cat "$tmp/out")"

echo "1..$n"
[ $fails -eq 0 ]
