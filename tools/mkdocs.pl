#!/usr/bin/perl
# tools/mkdocs.pl [--check] [--root DIR] BINARY — the generated parts of the documentation.
#
# 1. Generated blocks. In README.md and every docs/**/*.md, a block is the lines between
#      <!-- generated: COMMAND -->
#      <!-- end generated -->
#    where COMMAND is a normbench command exactly as a user would type it in the repository's
#    root (e.g. `normbench report --db docs/results/mnist-fashion.db --format md`). The block is
#    COMMAND's stdout: verbatim when COMMAND asks for markdown (`--format md`), else in a
#    ```text fence; a blank line on either side. COMMAND runs with BINARY in the place of
#    `normbench`, in DIR (default: the current directory), without NORMBENCH_DB in its
#    environment; it must exit 0.
# 2. docs/commands.md, whole: `normbench --help` and every command's `--help` (run's lists every
#    task's options), as tools/mkman.pl makes the man page from the same texts.
# 3. Links: every relative link of those pages must name a file that exists, and an anchor
#    (#...) a heading of the target page (GitHub's anchors) or an `id`.
#
# Without --check it rewrites the pages whose blocks differ (atomically) and docs/commands.md
# (`make docs`). With --check it writes nothing, prints a unified diff of every block that
# differs from what its command prints now, and exits 1 if any does, if docs/commands.md is not
# what the help says, or if a link is broken (tests/cli/90-docs.t; `make test`). Exit 2: usage,
# or a command that failed.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Find;
use File::Temp qw(tempfile);
use Encode qw(decode);

my ($check, $root, $bin) = (0, '.');
while (@ARGV) {
    my $a = shift @ARGV;
    if ($a eq '--check') { $check = 1; }
    elsif ($a eq '--root') { $root = shift @ARGV // usage(); }
    elsif ($a =~ /^-/) { usage(); }
    else { usage() if defined $bin; $bin = $a; }
}
usage() unless defined $bin;
sub usage { print STDERR "usage: tools/mkdocs.pl [--check] [--root DIR] BINARY\n"; exit 2; }
$bin = abs_path($bin) // die "mkdocs: no binary '$bin'\n";
-x $bin or die "mkdocs: '$bin' is not executable (run make first)\n";
chdir $root or die "mkdocs: cannot enter '$root': $!\n";
delete $ENV{NORMBENCH_DB};
$ENV{LC_ALL} = 'C';

my @pages = ('README.md');
find({ no_chdir => 1, wanted => sub { push @pages, $_ if /\.md$/ && -f $_ } }, 'docs');
@pages = sort @pages;
my $failed = 0;

# ---- running a command ----------------------------------------------------------------------
# A command line split as the shell would split these: words, '...' and "..." quoting.
sub split_words {
    my ($s) = @_;
    my @w;
    while ($s =~ /\G\s*((?:'[^']*'|"(?:[^"\\]|\\.)*"|[^\s'"]+)+)/gc) {
        my $word = $1;
        my $out  = '';
        while ($word =~ /\G(?:'([^']*)'|"((?:[^"\\]|\\.)*)"|([^\s'"]+))/gc) {
            if (defined $1) { $out .= $1; }
            elsif (defined $2) { (my $d = $2) =~ s/\\(.)/$1/g; $out .= $d; }
            else { $out .= $3; }
        }
        push @w, $out;
    }
    die "mkdocs: cannot split the command '$s'\n" if ($s =~ /\G\s*(\S)/gc);
    return @w;
}

sub run_capture {
    my (@argv) = @_;
    my ($efh, $efile) = tempfile(UNLINK => 1);
    my $pid = open(my $fh, '-|') // die "mkdocs: fork: $!\n";
    if (!$pid) {
        open(STDERR, '>&', $efh) or die;
        exec { $argv[0] } @argv or die "mkdocs: cannot run $argv[0]: $!\n";
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    my $rc = $? >> 8;
    seek($efh, 0, 0);
    my $err = <$efh> // '';
    return ($rc, $out, $err);
}

sub block_text {
    my ($cmd, $where) = @_;
    my @w = split_words($cmd);
    if (!@w || $w[0] ne 'normbench') {
        print STDERR "$where: a generated block's command must start with 'normbench': '$cmd'\n";
        exit 2;
    }
    my ($rc, $out, $err) = run_capture($bin, @w[1 .. $#w]);
    if ($rc != 0) {
        print STDERR "$where: '$cmd' exited $rc:\n$err";
        exit 2;
    }
    $out .= "\n" if length($out) && $out !~ /\n\z/;
    my $md = $cmd =~ /--format[ =]md\b/;
    return "\n" . ($md ? $out : "```text\n$out```\n") . "\n";
}

# ---- writing a file atomically --------------------------------------------------------------
sub write_file {
    my ($path, $text) = @_;
    my $tmp = "$path.tmp.$$";
    open(my $fh, '>', $tmp) or die "mkdocs: cannot write $tmp: $!\n";
    print $fh $text;
    close($fh) or die "mkdocs: cannot write $tmp: $!\n";
    rename($tmp, $path) or die "mkdocs: cannot rename $tmp to $path: $!\n";
}

sub read_file {
    my ($path) = @_;
    open(my $fh, '<', $path) or die "mkdocs: cannot read $path: $!\n";
    local $/;
    my $t = <$fh>;
    return $t // '';
}

sub show_diff {
    my ($label, $old, $new) = @_;
    my ($a, $af) = tempfile(UNLINK => 1);
    my ($b, $bf) = tempfile(UNLINK => 1);
    print $a $old;
    print $b $new;
    close $a;
    close $b;
    my (undef, $d) = run_capture('diff', '-u', '--label', "$label (in the page)", '--label',
        "$label (what its command prints now)", $af, $bf);
    print $d;
}

# ---- 1. generated blocks --------------------------------------------------------------------
my $blocks = 0;
for my $page (@pages) {
    next if $page eq 'docs/commands.md';
    my @lines = split /(?<=\n)/, read_file($page);
    my @out;
    my $changed = 0;
    for (my $i = 0; $i < @lines; $i++) {
        my $line = $lines[$i];
        push @out, $line;
        next unless $line =~ /^<!-- generated: (.*?) -->\s*$/;
        my $cmd = $1;
        my $start = $i + 1;
        my $j = $start;
        $j++ while $j < @lines && $lines[$j] !~ /^<!-- (end generated|generated: .*) -->\s*$/;
        if ($j >= @lines || $lines[$j] !~ /^<!-- end generated -->/) {
            print STDERR "$page:$start: the block of '$cmd' has no '<!-- end generated -->' line\n";
            exit 2;
        }
        my $old = join('', @lines[$start .. $j - 1]);
        my $new = block_text($cmd, "$page:$start");
        $blocks++;
        if ($old ne $new) {
            $changed = 1;
            if ($check) {
                print "$page:$start: the block of '$cmd' differs from what the command prints now:\n";
                show_diff("$page:$start", $old, $new);
                $failed = 1;
            }
        }
        push @out, $new, $lines[$j];
        $i = $j;
    }
    if ($changed && !$check) {
        write_file($page, join('', @out));
        print "mkdocs: $page rewritten\n";
    }
}

# ---- 2. docs/commands.md --------------------------------------------------------------------
sub help {
    my @args = @_;
    my ($rc, $out, $err) = run_capture($bin, @args);
    die "mkdocs: 'normbench @args' exited $rc: $err" if $rc != 0;
    return $out;
}
my $main = help('--help');
my @commands;
if ($main =~ /\ncommands:\n(.*?)\n\n/s) {
    for (split /\n/, $1) { push @commands, $1 if /^  (\S+)\s/ && $1 ne 'help'; }
}
die "mkdocs: no commands found in 'normbench --help'\n" unless @commands;
my $cmd_md = "# normbench commands\n\n"
    . "<!-- Made by tools/mkdocs.pl (`make docs`) from the binary's own help texts, as the man page is made by\n"
    . "tools/mkman.pl: do not edit; change the help in cmd/ and run `make docs`. -->\n\n"
    . "Every command's help as `normbench COMMAND --help` prints it (also `normbench help COMMAND`, and\n"
    . "`man normbench` once installed). `normbench help run TASK` prints one task's options only.\n\n"
    . "Commands: " . join(' · ', map { "[$_](#normbench-$_)" } @commands) . "\n\n"
    . "## normbench\n\n```text\n$main```\n";
for my $c (@commands) {
    $cmd_md .= "\n## normbench $c\n\n```text\n" . help($c, '--help') . "```\n";
}
my $cmd_path = 'docs/commands.md';
my $cmd_old = -e $cmd_path ? read_file($cmd_path) : '';
if ($cmd_old ne $cmd_md) {
    if ($check) {
        print "$cmd_path differs from what the help texts say now (run 'make docs'):\n";
        show_diff($cmd_path, $cmd_old, $cmd_md);
        $failed = 1;
    } else {
        write_file($cmd_path, $cmd_md);
        print "mkdocs: $cmd_path rewritten\n";
    }
}

# ---- 3. links -------------------------------------------------------------------------------
my %anchors;    # page => { anchor => 1 }
sub anchors_of {
    my ($page) = @_;
    return $anchors{$page} if $anchors{$page};
    my %a;
    my %seen;
    my $fence = 0;
    for my $line (split /\n/, decode("UTF-8", read_file($page))) {
        if ($line =~ /^(```|~~~)/) { $fence = !$fence; next; }
        next if $fence;
        if ($line =~ /^#{1,6}\s+(.*?)\s*#*\s*$/) {
            my $s = lc $1;
            $s =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;    # a link in a heading keeps its text
            $s =~ s/[^\p{L}\p{N}\s_-]//g;
            $s =~ s/ /-/g;
            my $n = $seen{$s}++;
            $a{$n ? "$s-$n" : $s} = 1;
        }
        $a{$1} = 1 while $line =~ /\b(?:id|name)="([^"]+)"/g;
    }
    return $anchors{$page} = \%a;
}
my $links = 0;
for my $page (@pages) {
    (my $dir = $page) =~ s{[^/]*$}{};
    my $fence = 0;
    my $n = 0;
    for my $line (split /\n/, read_file($page)) {
        $n++;
        if ($line =~ /^\s*(```|~~~)/) { $fence = !$fence; next; }
        next if $fence;
        (my $text = $line) =~ s/`[^`]*`//g;    # code spans hold no links
        my @targets;
        push @targets, $1 while $text =~ /\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g;
        push @targets, $1 if $text =~ /^\s{0,3}\[[^\]]+\]:\s+(\S+)/;    # [label]: target
        for my $target (@targets) {
            next if $target =~ m{^[a-z][a-z0-9+.-]*:}i;    # http:, mailto:
            $links++;
            my ($file, $anchor) = $target =~ /^([^#]*)(?:#(.*))?$/;
            my $path = length $file ? $dir . $file : $page;
            1 while $path =~ s{(^|/)(?!\.\./)[^/]+/\.\./}{$1};    # a/b/../c -> a/c
            $path =~ s{^\./}{};
            if (!-e $path) {
                print "$page:$n: link to '$target': no file '$path'\n";
                $failed = 1;
                next;
            }
            next unless defined $anchor && length $anchor;
            if ($path !~ /\.md$/ || !anchors_of($path)->{decode("UTF-8", $anchor)}) {
                print "$page:$n: link to '$target': no heading or id '$anchor' in $path\n";
                $failed = 1;
            }
        }
    }
}

if ($check) {
    print $failed ? "mkdocs: the documentation is not what its sources say (see above; 'make docs' rewrites the generated parts)\n"
        : "mkdocs: $blocks generated blocks, docs/commands.md and $links links checked: all up to date\n";
}
exit($failed ? 1 : 0);
