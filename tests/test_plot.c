/* tests/test_plot.c — the numbers behind `normbench plot` (smoothing, alignment, thinning),
 * checked against values computed by hand, and the data files a figure is drawn from.
 *
 * Run with "--fixture FILE" it writes the fixture store the CLI test (tests/cli/70-plot.t)
 * draws, and exits. */
#include "tests/testutil.h"

#include <sys/stat.h>
#include <unistd.h>

#include "plots/plot.h"
#include "results/store.h"
#include "util/text.h"

/* ---- smoothing -------------------------------------------------------------------------- */

static void test_ema_by_hand(void **state) {
    double y[3] = {1, 2, 3}, out[4];
    nb_plot_ema(y, 3, 0.5, out);
    /* m1 = .5 -> .5/.5 = 1; m2 = .25 + 1 = 1.25 -> 1.25/.75; m3 = .625 + 1.5 -> 2.125/.875 */
    assert_close(out[0], 1.0, 1e-15, 0);
    assert_close(out[1], 1.25 / 0.75, 1e-15, 0);
    assert_close(out[2], 2.125 / 0.875, 1e-15, 0);
    /* weight 0 copies */
    nb_plot_ema(y, 3, 0, out);
    for (int i = 0; i < 3; i++)
        assert_close(out[i], y[i], 0, 0);
    /* debiased: a constant stays that constant from the first point on (a plain EMA started
     * at 0 would give 0.5, 0.95, ...) */
    double c[4] = {5, 5, 5, 5};
    nb_plot_ema(c, 4, 0.9, out);
    for (int i = 0; i < 4; i++)
        assert_close(out[i], 5.0, 1e-13, 0);
    /* in place */
    nb_plot_ema(y, 3, 0.5, y);
    assert_close(y[2], 2.125 / 0.875, 1e-15, 0);
}

static void test_finite_prefix(void **state) {
    double a[4] = {1, 2, NAN, 3};
    assert_int_equal(nb_plot_finite_prefix(a, 4), 2);
    double b[2] = {INFINITY, 1};
    assert_int_equal(nb_plot_finite_prefix(b, 2), 0);
    double c[3] = {1, -INFINITY, 2};
    assert_int_equal(nb_plot_finite_prefix(c, 3), 1);
    assert_int_equal(nb_plot_finite_prefix(a, 0), 0);
    assert_int_equal(nb_plot_finite_prefix(a, 2), 2);
}

/* ---- alignment -------------------------------------------------------------------------- */

static void test_align_by_hand(void **state) {
    /* series 1: y = x on [0, 10]; series 2: y = 1 on [5, 15] */
    double x1[2] = {0, 10}, y1[2] = {0, 10}, x2[2] = {5, 15}, y2[2] = {1, 1};
    const double *xs[2] = {x1, x2}, *ys[2] = {y1, y2};
    int n[2] = {2, 2};
    double grid[6] = {-1, 0, 5, 10, 15, 16}, mean[6], sd[6], lo[6], hi[6];
    int cnt[6];
    nb_plot_align(2, xs, ys, n, grid, 6, mean, sd, lo, hi, cnt);
    assert_int_equal(cnt[0], 0); /* before both */
    assert_true(isnan(mean[0]) && isnan(sd[0]));
    assert_int_equal(cnt[1], 1); /* only series 1 */
    assert_close(mean[1], 0, 0, 0);
    assert_close(sd[1], 0, 0, 0);
    assert_int_equal(cnt[2], 2); /* 5 and 1: mean 3, sample sd sqrt((4 + 4) / 1) */
    assert_close(mean[2], 3, 1e-15, 0);
    assert_close(sd[2], sqrt(8.0), 1e-14, 0);
    assert_int_equal(cnt[3], 2); /* 10 and 1: mean 5.5, sd sqrt(2 * 4.5^2) */
    assert_close(mean[3], 5.5, 1e-15, 0);
    assert_close(sd[3], 4.5 * sqrt(2.0), 1e-14, 0);
    /* the range of the covering series' values, for the band's clipping */
    assert_true(isnan(lo[0]) && isnan(hi[0]) && isnan(lo[5]));
    assert_close(lo[1], 0, 0, 0);
    assert_close(hi[1], 0, 0, 0);
    assert_close(lo[2], 1, 0, 0);
    assert_close(hi[2], 5, 1e-15, 0);
    assert_close(lo[3], 1, 0, 0);
    assert_close(hi[3], 10, 0, 0);
    assert_int_equal(cnt[4], 1); /* only series 2, at its last point */
    assert_close(mean[4], 1, 0, 0);
    assert_int_equal(cnt[5], 0);

    /* linear interpolation between points, and exact hits */
    double x3[3] = {0, 1, 3}, y3[3] = {2, 4, 0};
    const double *xs3[1] = {x3}, *ys3[1] = {y3};
    int n3[1] = {3};
    double g3[4] = {0.5, 1, 2, 2.5}, m3[4], s3[4];
    int c3[4];
    nb_plot_align(1, xs3, ys3, n3, g3, 4, m3, s3, NULL, NULL, c3);
    assert_close(m3[0], 3, 1e-15, 0);
    assert_close(m3[1], 4, 0, 0);
    assert_close(m3[2], 2, 1e-15, 0);
    assert_close(m3[3], 1, 1e-15, 0);
}

static void test_union_grid(void **state) {
    double a[3] = {0, 2, 4}, b[3] = {1, 2, 5};
    const double *xs[2] = {a, b};
    int n[2] = {3, 3};
    double grid[6];
    int ng = nb_plot_union_grid(2, xs, n, grid);
    assert_int_equal(ng, 5);
    double want[5] = {0, 1, 2, 4, 5};
    for (int i = 0; i < 5; i++)
        assert_close(grid[i], want[i], 0, 0);
    int z[1] = {0};
    assert_int_equal(nb_plot_union_grid(1, xs, z, grid), 0);
}

static void test_downsample(void **state) {
    int idx[16];
    assert_int_equal(nb_plot_downsample(10, 4, idx), 4);
    int w1[4] = {0, 3, 6, 9};
    for (int i = 0; i < 4; i++)
        assert_int_equal(idx[i], w1[i]);
    assert_int_equal(nb_plot_downsample(5, 10, idx), 5); /* fewer than max: all */
    for (int i = 0; i < 5; i++)
        assert_int_equal(idx[i], i);
    assert_int_equal(nb_plot_downsample(7, 3, idx), 3);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 3);
    assert_int_equal(idx[2], 6);
    /* 1000 of 2145: first and last kept, strictly increasing */
    int *big = malloc(2145 * sizeof *big);
    assert_non_null(big);
    assert_int_equal(nb_plot_downsample(2145, 1000, big), 1000);
    assert_int_equal(big[0], 0);
    assert_int_equal(big[999], 2144);
    for (int i = 1; i < 1000; i++)
        assert_true(big[i] > big[i - 1]);
    free(big);
}

/* ---- the data files of a figure --------------------------------------------------------- */

static char tmpdir[256];

static int setup(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nb-plot-test.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A run in memory (no store): norm, seed, status, and one series of n points at steps
 * 10, 20, ... with wall = step * wall_per_step. */
static nb_run_detail *mem_run(int64_t id, const char *norm, int64_t seed, const char *status,
                              const char *metric, const double *v, int n, double wall_per_step) {
    nb_run_detail *d = calloc(1, sizeof *d);
    assert_non_null(d);
    d->info.id = id;
    d->info.seed = seed;
    d->info.task = strdup("mnist");
    d->info.dataset = strdup("synthetic");
    d->info.norm = strdup(norm);
    d->info.status = strdup(status);
    d->info.host = strdup("h");
    d->config = strdup("{}");
    d->provenance = strdup("{}");
    d->nseries = 1;
    d->series = calloc(1, sizeof *d->series);
    assert_non_null(d->series);
    nb_series *s = &d->series[0];
    s->name = strdup(metric);
    s->n = n;
    s->step = calloc((size_t)n, sizeof *s->step);
    s->wall = calloc((size_t)n, sizeof *s->wall);
    s->value = calloc((size_t)n, sizeof *s->value);
    assert_non_null(s->value);
    for (int i = 0; i < n; i++) {
        s->step[i] = 10 * (i + 1);
        s->wall[i] = (double)s->step[i] * wall_per_step;
        s->value[i] = v[i];
    }
    return d;
}

/* Reads the rows (6 columns) of a data file; returns how many. */
static int read_dat(const char *path, double rows[][6], int max, int *has_nonfinite_text) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    int n = 0;
    *has_nonfinite_text = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        for (char *p = line; *p; p++)
            if (*p == 'n' || *p == 'i' || *p == 'N' || *p == 'I') *has_nonfinite_text = 1;
        if (n < max && sscanf(line, "%lf %lf %lf %lf %lf %lf", &rows[n][0], &rows[n][1],
                              &rows[n][2], &rows[n][3], &rows[n][4], &rows[n][5]) == 6)
            n++;
    }
    fclose(f);
    return n;
}

/* Smoothing comes before thinning: two runs of 10 points drawn with at most 2 points per line.
 * Run A: 1, 2, ..., 10; run B: 2 throughout. The debiased EMA (w = 1/2) of 1..10 at the last
 * point is 9217/1023 (= sum_t 2^-(11-t) t / (1 - 2^-10)); had the series been thinned to its
 * two ends first, it would be 7. */
static void test_render_smooths_before_thinning(void **state) {
    double a[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, b[10];
    for (int i = 0; i < 10; i++)
        b[i] = 2;
    nb_run_detail *runs[2] = {mem_run(1, "rms", 1, "finished", "train_loss", a, 10, 0.1),
                              mem_run(2, "rms", 2, "finished", "train_loss", b, 10, 0.2)};
    nb_plot_figure fig = {"mnist", "synthetic", NULL, runs, 2};
    char base[512], png[600];
    snprintf(base, sizeof base, "%s/fig", tmpdir);
    snprintf(png, sizeof png, "%s/fig.png", tmpdir);
    const char *metrics[1] = {"train_loss"};
    nb_plot_opts o = {.metrics = metrics,
                      .nmetrics = 1,
                      .x_step = 1,
                      .x_time = 1,
                      .smooth = 0.5,
                      .max_points = 2,
                      .png = png,
                      .base = base,
                      .gnuplot = "gnuplot"};
    nb_err err;
    nb_err_clear(&err);
    char *text = NULL;
    int rc = nb_plot_render(&fig, &o, &text, &err);
    if (rc) print_error("render: %s (%s)\n", err.msg, err.hint);
    assert_int_equal(rc, 0);
    assert_null(text);

    double rows[8][6];
    int bad;
    char path[700];
    snprintf(path, sizeof path, "%s/fig-data/train_loss-step-rms.dat", tmpdir);
    assert_int_equal(read_dat(path, rows, 8, &bad), 2);
    double A = 9217.0 / 1023.0;
    /* step 10: A = 1, B = 2 */
    assert_close(rows[0][0], 10, 0, 0);
    assert_close(rows[0][1], 1.5, 1e-7, 0);
    /* the band, mean -/+ sd = 1.5 -/+ 0.71, is clipped to the runs' own values [1, 2] */
    assert_close(rows[0][2], 1, 1e-7, 0);
    assert_close(rows[0][3], 2, 1e-7, 0);
    assert_close(rows[0][4], 1.5, 1e-7, 0);
    assert_close(rows[0][5], 2, 0, 0);
    /* step 100: smoothed A = 9217/1023, B = 2; unsmoothed mean (10 + 2)/2 */
    assert_close(rows[1][0], 100, 0, 0);
    assert_close(rows[1][1], (A + 2) / 2, 1e-7, 0);
    assert_close(rows[1][3], A, 1e-7, 0); /* mean + sd clipped to the larger run */
    assert_close(rows[1][2], 2, 1e-7, 0);
    assert_close(rows[1][4], 6, 1e-7, 0);

    /* seconds: A spans 1..10 s, B 2..20 s; the grid is what both finished runs cover, [2, 10]
     * s, thinned to its ends. At 2 s A is at its 2nd point (EMA of 1, 2 = 1.25/.75) and B = 2;
     * at 10 s A is at its last point and B = 2. */
    snprintf(path, sizeof path, "%s/fig-data/train_loss-time-rms.dat", tmpdir);
    assert_int_equal(read_dat(path, rows, 8, &bad), 2);
    assert_close(rows[0][0], 2, 1e-12, 0);
    assert_close(rows[0][1], (1.25 / 0.75 + 2) / 2, 1e-7, 0);
    assert_close(rows[0][4], (2 + 2) / 2.0, 1e-7, 0);
    assert_close(rows[1][0], 10, 1e-12, 0);
    assert_close(rows[1][1], (A + 2) / 2, 1e-7, 0);
    assert_close(rows[1][4], (10 + 2) / 2.0, 1e-7, 0);

    /* the PNG exists, whole, and no temporary file is left */
    FILE *f = fopen(png, "rb");
    assert_non_null(f);
    unsigned char sig[8];
    assert_int_equal(fread(sig, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q tmp", tmpdir);
    assert_int_not_equal(system(cmd), 0);
    for (int i = 0; i < 2; i++)
        nb_run_detail_free(runs[i]);
}

/* A diverged run ends at its first non-finite value, and no NaN or Inf reaches the data;
 * evaluation metrics are not smoothed. */
static void test_render_diverged_and_eval(void **state) {
    double d[4] = {1, 2, INFINITY, 3}, e[3] = {0.5, 0.3, 0.2};
    nb_run_detail *runs[2] = {mem_run(1, "layer", 1, "diverged", "train_loss", d, 4, 0.1),
                              mem_run(2, "layer", 2, "finished", "val_error", e, 3, 0.1)};
    nb_plot_figure fig = {"mnist", "synthetic", NULL, runs, 2};
    char base[512], svg[600];
    snprintf(base, sizeof base, "%s/d", tmpdir);
    snprintf(svg, sizeof svg, "%s/d.svg", tmpdir);
    const char *metrics[2] = {"train_loss", "val_error"};
    nb_plot_opts o = {.metrics = metrics,
                      .nmetrics = 2,
                      .x_step = 1,
                      .smooth = 0.9,
                      .max_points = 1000,
                      .svg = svg,
                      .base = base,
                      .gnuplot = "gnuplot"};
    nb_err err;
    nb_err_clear(&err);
    char *text = NULL;
    int rc = nb_plot_render(&fig, &o, &text, &err);
    if (rc) print_error("render: %s (%s)\n", err.msg, err.hint);
    assert_int_equal(rc, 0);
    double rows[8][6];
    int bad = 1;
    char path[700];
    snprintf(path, sizeof path, "%s/d-data/train_loss-step-layer.dat", tmpdir);
    assert_int_equal(read_dat(path, rows, 8, &bad), 2); /* steps 10 and 20 only */
    assert_int_equal(bad, 0);
    assert_close(rows[1][0], 20, 0, 0);
    assert_close(rows[1][1], (0.9 * 0.1 + 0.1 * 2) / (1 - 0.81), 1e-7, 0);
    snprintf(path, sizeof path, "%s/d-data/val_error-step-layer.dat", tmpdir);
    assert_int_equal(read_dat(path, rows, 8, &bad), 3);
    for (int i = 0; i < 3; i++) {
        assert_close(rows[i][1], e[i], 1e-9, 0); /* as measured */
        assert_close(rows[i][4], e[i], 1e-9, 0);
    }
    struct stat st;
    assert_int_equal(stat(svg, &st), 0);
    assert_true(st.st_size > 0);
    for (int i = 0; i < 2; i++)
        nb_run_detail_free(runs[i]);
}

/* A missing gnuplot is an error that says how to install it, and writes no image. */
static void test_render_missing_gnuplot(void **state) {
    double a[2] = {1, 2};
    nb_run_detail *r = mem_run(1, "rms", 1, "finished", "train_loss", a, 2, 0.1);
    nb_plot_figure fig = {"mnist", "synthetic", NULL, &r, 1};
    char base[512], png[600];
    snprintf(base, sizeof base, "%s/m", tmpdir);
    snprintf(png, sizeof png, "%s/m.png", tmpdir);
    const char *metrics[1] = {"train_loss"};
    nb_plot_opts o = {.metrics = metrics,
                      .nmetrics = 1,
                      .x_step = 1,
                      .smooth = 0.6,
                      .max_points = 1000,
                      .png = png,
                      .base = base,
                      .gnuplot = "normbench-no-such-gnuplot"};
    nb_err err;
    nb_err_clear(&err);
    char *text = NULL;
    assert_int_equal(nb_plot_render(&fig, &o, &text, &err), -1);
    assert_non_null(strstr(err.msg, "not installed"));
    assert_non_null(strstr(err.hint, "apt-get install gnuplot-nox"));
    assert_int_equal(access(png, F_OK), -1);
    nb_run_detail_free(r);
}

/* Stored strings reach the script only as quoted gnuplot strings with control characters
 * escaped: a variant, norm and metric with newlines, a quote and a '!' shell escape give a
 * script whose every line is a command normbench wrote (none starts with '!', none holds a
 * control character), with the label quoted in the title. A file name with a newline is refused
 * before anything is written. gnuplot itself is not needed: the script is written before it
 * runs. */
static void test_render_quotes_stored_strings(void **state) {
    double a[2] = {1, 2};
    nb_run_detail *r = mem_run(1, "x\n!touch /tmp/nb-plot-injected\n#'", 1, "finished",
                               "train_loss\n!touch /tmp/nb-plot-injected", a, 2, 0.1);
    char variant[] = "v\n!touch /tmp/nb-plot-injected\n#\\";
    nb_plot_figure fig = {"mnist", "synthetic", variant, &r, 1};
    char base[512], png[600];
    snprintf(base, sizeof base, "%s/q", tmpdir);
    snprintf(png, sizeof png, "%s/q.png", tmpdir);
    const char *metrics[1] = {"train_loss\n!touch /tmp/nb-plot-injected"};
    nb_plot_opts o = {.metrics = metrics,
                      .nmetrics = 1,
                      .x_step = 1,
                      .smooth = 0.6,
                      .max_points = 1000,
                      .png = png,
                      .base = base,
                      .gnuplot = "normbench-no-such-gnuplot",
                      .command = "normbench plot --variant 'v\n!touch /tmp/nb-plot-injected'"};
    nb_err err;
    nb_err_clear(&err);
    char *text = NULL;
    assert_int_equal(nb_plot_render(&fig, &o, &text, &err), -1); /* no gnuplot */
    char path[700];
    snprintf(path, sizeof path, "%s/q.gp", tmpdir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    int lines = 0, title = 0, key = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        size_t n = strlen(line);
        assert_true(n > 0 && line[n - 1] == '\n');
        for (size_t i = 0; i + 1 < n; i++)
            if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
                fail_msg("control char: %s", line);
        const char *p = line + strspn(line, " \t");
        if (*p == '!') fail_msg("a shell escape reached the script: %s", line);
        /* the only continued lines are normbench's own plot commands ("..., \\") */
        if (n >= 2 && line[n - 2] == '\\' && !(n >= 4 && strcmp(line + n - 4, ", \\\n") == 0))
            fail_msg("a line ends in a backslash: %s", line);
        title |=
            strstr(line, "'mnist / synthetic [v\\n!touch /tmp/nb-plot-injected\\n#\\]'") != NULL;
        key |=
            strstr(line, "'x\\n!touch /tmp/nb-plot-injected\\n#'.\"'\".' (1 run, seed 1)'") != NULL;
    }
    fclose(f);
    assert_true(lines > 10);
    assert_true(title);
    assert_true(key);

    /* a file name with a control character: refused, nothing written */
    snprintf(base, sizeof base, "%s/bad\nname", tmpdir);
    snprintf(png, sizeof png, "%s/bad\nname.png", tmpdir);
    nb_err_clear(&err);
    assert_int_equal(nb_plot_render(&fig, &o, &text, &err), -1);
    assert_non_null(strstr(err.msg, "control characters"));
    snprintf(path, sizeof path, "%s/bad\nname-data", tmpdir);
    assert_int_equal(access(path, F_OK), -1);
    nb_run_detail_free(r);
}

/* The quoting of labels for gnuplot (nb_plot_gp_str), proved through gnuplot itself: every byte
 * 0x01-0xff alone, doubled, tripled and between letters; every pair of printable ASCII
 * characters; every triple of the characters that mean something to gnuplot or a shell (quotes,
 * backquote, @, backslash, $, #, ;, !, braces...); UTF-8 text and long runs of apostrophes. Each
 * string is printed by gnuplot from the script; what it prints must be the string escaped as a
 * terminal shows it (util/text.h), line for line: no string ends its quotes early, runs a
 * command or breaks the script. Skipped where gnuplot is not installed. */
static void test_gp_str_every_byte_class(void **state) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) skip();
    nb_buf script = {0}, want = {0};
    char path[600], out[600];
    snprintf(path, sizeof path, "%s/q.gp", tmpdir);
    snprintf(out, sizeof out, "%s/q.out", tmpdir);
    nb_buf_puts(&script, "set print ");
    nb_plot_gp_str(&script, out);
    nb_buf_puts(&script, "\n");
    int count = 0;
    char s[16];
#define ADD(str)                                                                                   \
    do {                                                                                           \
        nb_buf_puts(&script, "print ");                                                            \
        nb_plot_gp_str(&script, (str));                                                            \
        nb_buf_puts(&script, "\n");                                                                \
        nb_buf_escaped(&want, (str));                                                              \
        nb_buf_puts(&want, "\n");                                                                  \
        count++;                                                                                   \
    } while (0)
    for (int b = 1; b <= 0xff; b++) {
        char c = (char)b;
        char forms[4][8] = {{c, 0}, {c, c, 0}, {c, c, c, 0}, {'a', c, 'z', 0}};
        for (int k = 0; k < 4; k++)
            ADD(forms[k]);
    }
    for (int a = 0x20; a < 0x7f; a++)
        for (int b = 0x20; b < 0x7f; b++) {
            snprintf(s, sizeof s, "%c%c", a, b);
            ADD(s);
        }
    static const char special[] = "'\"`@\\$#;!{}(),. |&<>~%^*";
    for (const char *a = special; *a; a++)
        for (const char *b = special; *b; b++)
            for (const char *c = special; *c; c++) {
                snprintf(s, sizeof s, "%c%c%c", *a, *b, *c);
                ADD(s);
            }
    static const char *const texts[] = {
        "rock''n''roll",
        "''",
        "'",
        "'a'",
        "\\'",
        "'\\",
        "a\\",
        "\\",
        "é ü ß — € 😀 β=0.5",
        "`touch INJECTED`",
        "@x",
        "\"'\"'\"",
        "' . system('touch INJECTED') . '",
        "caf\xe9",
        "\xc2\x85",
        "\xed\xa0\x80",
        "a\nb\r\tc\x1b[31m",
        "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        ADD(texts[i]);
#undef ADD
    assert_false(script.oom || want.oom);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(script.p, f);
    fclose(f);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot q.gp 2>q.err", tmpdir);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "head -c 2000 '%s/q.err' >&2", tmpdir);
        (void)system(cmd);
    }
    assert_int_equal(rc, 0);
    snprintf(cmd, sizeof cmd, "%s/INJECTED", tmpdir);
    assert_int_equal(access(cmd, F_OK), -1);
    f = fopen(out, "rb");
    assert_non_null(f);
    nb_buf got = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk - 1, f)) > 0) {
        chunk[n] = '\0';
        nb_buf_puts(&got, chunk);
    }
    fclose(f);
    assert_non_null(got.p);
    /* the first line that differs, for the message */
    const char *g = got.p, *w = want.p;
    int line = 1;
    while (*g && *w && *g == *w) {
        if (*g == '\n') line++;
        g++;
        w++;
    }
    if (*g || *w)
        fail_msg("gnuplot printed line %d of %d differently: got '%.40s', want '%.40s'", line,
                 count, g, w);
    nb_buf_free(&script);
    nb_buf_free(&want);
    nb_buf_free(&got);
}

/* ---- the fixture store for tests/cli/70-plot.t ------------------------------------------ */

static int fixture_run(nb_store *s, const char *dataset, const char *norm, int64_t seed,
                       const char *status, int steps, double speed, int diverge_at) {
    nb_err err;
    int64_t id;
    nb_run_spec spec = {"mnist", dataset, norm, seed, "{}"};
    if (nb_run_create(s, &spec, &id, &err)) return -1;
    /* a falling loss with a little seed-dependent wobble; val_error every 100 steps */
    for (int st = 10; st <= steps; st += 10) {
        double v = 0.3 + 2.0 * exp(-st / 80.0) + 0.05 * sin(st * 0.37 + (double)seed);
        if (diverge_at && st >= diverge_at) v = st == diverge_at ? NAN : INFINITY;
        nb_metric m = {"train_loss", st, st * speed, v};
        if (nb_metrics_add(s, id, &m, 1, &err)) return -1;
        if (diverge_at && st >= diverge_at) break;
        if (st % 100 == 0) {
            nb_metric e = {"val_error", st, st * speed + 0.05, 0.1 + 0.5 * exp(-st / 60.0)};
            if (nb_metrics_add(s, id, &e, 1, &err)) return -1;
        }
    }
    nb_metric ms = {"ms_per_step", steps, steps * speed, 1000 * speed};
    if (nb_metrics_add(s, id, &ms, 1, &err)) return -1;
    return nb_run_finish(s, id, status, NULL, &err);
}

/* mnist/synthetic: none, layer, rms with 3 finished seeds each (rms 20% faster per step), plus
 * a diverged layer run (NaN at step 80) and an interrupted rms run (stopped at step 120);
 * mnist/fashion-mnist: one finished layer run (a second figure). */
static int build_fixture(const char *path) {
    nb_err err;
    nb_store *s = NULL;
    if (nb_store_open(&s, path, 0, &err)) {
        fprintf(stderr, "fixture: %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    const char *norms[3] = {"none", "layer", "rms"};
    const double speed[3] = {0.008, 0.010, 0.008};
    for (int k = 0; k < 3; k++)
        for (int seed = 1; seed <= 3; seed++)
            bad |= fixture_run(s, "synthetic", norms[k], seed, "finished", 300,
                               speed[k] * (1 + 0.05 * seed), 0);
    bad |= fixture_run(s, "synthetic", "layer", 4, "diverged", 300, 0.01, 80);
    bad |= fixture_run(s, "synthetic", "rms", 4, "interrupted", 120, 0.008, 0);
    bad |= fixture_run(s, "fashion-mnist", "layer", 1, "finished", 200, 0.01, 0);
    nb_store_close(s);
    if (bad) fprintf(stderr, "fixture: cannot write '%s'\n", path);
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--fixture") == 0) return build_fixture(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ema_by_hand),
        cmocka_unit_test(test_finite_prefix),
        cmocka_unit_test(test_align_by_hand),
        cmocka_unit_test(test_union_grid),
        cmocka_unit_test(test_downsample),
        cmocka_unit_test(test_render_smooths_before_thinning),
        cmocka_unit_test(test_render_diverged_and_eval),
        cmocka_unit_test(test_render_missing_gnuplot),
        cmocka_unit_test(test_render_quotes_stored_strings),
        cmocka_unit_test(test_gp_str_every_byte_class),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
