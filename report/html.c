/* report/html.c — `normbench report --format html`: the report as one self-contained page.
 *
 * The page needs nothing but itself: no script, no font, no style sheet or image from elsewhere
 * (a Content-Security-Policy in the page forbids them too). The figures are gnuplot's SVG,
 * inlined after a pass that keeps only drawing elements and attributes (no script, no event
 * handler, no reference outside the figure) and prefixes the figure's ids so that several
 * figures in one page do not collide. Every stored string is escaped for HTML: a store is
 * untrusted input. The page is stable: the same store gives the same bytes (no time but the
 * runs' own), so two reports can be compared with diff. */
#include "report/report.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buildinfo.h"
#include "util/version.h"
#include "plots/plot.h"
#include "tasks/task.h"
#include "util/file.h"
#include "util/json.h"
#include "util/text.h"

/* ---- HTML text -------------------------------------------------------------------------- */

/* s for HTML text or a quoted attribute: control characters and bytes that are not UTF-8 shown
 * as escapes (util/text.h), then & < > " ' as character references. */
static void h(FILE *f, const char *s) {
    if (!s) return;
    nb_buf b = {0};
    nb_buf_escaped(&b, s);
    for (const char *p = b.p ? b.p : ""; *p; p++) {
        switch (*p) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*p, f);
        }
    }
    nb_buf_free(&b);
}

/* ---- flat JSON objects (a run's configuration and provenance, as stored): util/json.h ------ */

typedef nb_json_object kvlist;

/* The members of a JSON object, in order; what is not an object (or is malformed from some
 * point on) gives the members read until there. */
static void json_members(const char *json, kvlist *l) {
    (void)nb_json_read_object(json, l);
}

/* ---- the runs --------------------------------------------------------------------------- */

typedef struct run {
    nb_run_detail *d;
    const char *variant; /* "MODEL, VARIANT" as the report groups (nb_group_variant); NULL: none */
    char vbuf[512];
    char *group; /* the report's dataset: "DATASET" or "DATASET [VARIANT]" */
    kvlist config, prov;
} run;

static void runs_free(run *r, int n) {
    for (int i = 0; i < n; i++) {
        nb_run_detail_free(r[i].d);
        free(r[i].group);
        nb_json_object_free(&r[i].config);
        nb_json_object_free(&r[i].prov);
    }
    free(r);
}

static int load_runs(nb_store *s, const char *task, run **out, int *nout, nb_err *err) {
    nb_run_info *list = NULL;
    int n = 0, k = 0;
    if (nb_runs_list(s, &list, &n, err) != 0) return -1;
    run *r = calloc((size_t)(n ? n : 1), sizeof *r);
    if (!r) {
        nb_runs_free(list, n);
        return nb_errf(err, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        if (task && strcmp(list[i].task, task) != 0) continue;
        run *x = &r[k];
        if (nb_run_get(s, list[i].id, &x->d, err) != 0) {
            runs_free(r, k);
            nb_runs_free(list, n);
            return -1;
        }
        k++;
        /* the page shows no series of its own (the figures load theirs): not kept */
        for (int j = 0; j < x->d->nseries; j++) {
            free(x->d->series[j].name);
            free(x->d->series[j].step);
            free(x->d->series[j].wall);
            free(x->d->series[j].value);
        }
        free(x->d->series);
        x->d->series = NULL;
        x->d->nseries = 0;
        const char *tv = NULL, *tm = NULL;
        for (int t = 0; t < x->d->ntags; t++) {
            if (strcmp(x->d->tags[t].key, "variant") == 0) tv = x->d->tags[t].value;
            if (strcmp(x->d->tags[t].key, "model") == 0) tm = x->d->tags[t].value;
        }
        x->variant = nb_group_variant(tm, tv, x->vbuf, sizeof x->vbuf);
        nb_buf g = {0};
        nb_buf_puts(&g, x->d->info.dataset);
        if (x->variant) nb_buf_printf(&g, " [%s]", x->variant);
        x->group = nb_buf_take(&g);
        json_members(x->d->config, &x->config);
        json_members(x->d->provenance, &x->prov);
        if (!x->group) {
            runs_free(r, k);
            nb_runs_free(list, n);
            return nb_errf(err, "out of memory");
        }
    }
    nb_runs_free(list, n);
    *out = r;
    *nout = k;
    return 0;
}

/* ---- figures ---------------------------------------------------------------------------- */

/* Removes the directory dir and what plot_render left in it (files, one level of directories). */
static void remove_tree(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && depth < 2)
                remove_tree(p, depth + 1);
            else
                unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* The SVG elements kept; everything else is dropped with its content. */
static const char *const svg_elements[] = {"svg",      "g",       "path",
                                           "text",     "tspan",   "rect",
                                           "circle",   "ellipse", "line",
                                           "polyline", "polygon", "title",
                                           "desc",     "defs",    "use",
                                           "filter",   "feFlood", "feComposite",
                                           "feBlend",  "feMerge", "feMergeNode",
                                           "clipPath", "mask",    "linearGradient",
                                           "stop",     "marker",  "radialGradient",
                                           "pattern",  "symbol",  NULL};

/* The attributes kept (any other, an event handler above all, is dropped). */
static const char *const svg_attrs[] = {"class",
                                        "clip-path",
                                        "clip-rule",
                                        "color",
                                        "cx",
                                        "cy",
                                        "d",
                                        "dx",
                                        "dy",
                                        "fill",
                                        "fill-opacity",
                                        "fill-rule",
                                        "filter",
                                        "filterUnits",
                                        "flood-color",
                                        "flood-opacity",
                                        "font-family",
                                        "font-size",
                                        "font-style",
                                        "font-weight",
                                        "gradientUnits",
                                        "height",
                                        "href",
                                        "id",
                                        "in",
                                        "in2",
                                        "mode",
                                        "offset",
                                        "opacity",
                                        "operator",
                                        "points",
                                        "preserveAspectRatio",
                                        "r",
                                        "result",
                                        "rotate",
                                        "rx",
                                        "ry",
                                        "shape-rendering",
                                        "stop-color",
                                        "stop-opacity",
                                        "stroke",
                                        "stroke-dasharray",
                                        "stroke-dashoffset",
                                        "stroke-linecap",
                                        "stroke-linejoin",
                                        "stroke-miterlimit",
                                        "stroke-opacity",
                                        "stroke-width",
                                        "text-anchor",
                                        "transform",
                                        "viewBox",
                                        "visibility",
                                        "width",
                                        "x",
                                        "x1",
                                        "x2",
                                        "xlink:href",
                                        "y",
                                        "y1",
                                        "y2",
                                        "clipPathUnits",
                                        "dominant-baseline",
                                        NULL};

static int in_list(const char *const *list, const char *s, size_t len) {
    for (int i = 0; list[i]; i++)
        if (strlen(list[i]) == len && strncmp(list[i], s, len) == 0) return 1;
    return 0;
}

/* Copies text (character data or an attribute value, as written in the SVG) with '<', '>' and
 * '"' as references and an '&' that does not start a reference as "&amp;". */
static void svg_text(nb_buf *o, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '<')
            nb_buf_puts(o, "&lt;");
        else if (c == '>')
            nb_buf_puts(o, "&gt;");
        else if (c == '"')
            nb_buf_puts(o, "&quot;");
        else if (c == '&') {
            size_t j = i + 1;
            if (j < len && s[j] == '#') j++;
            size_t start = j;
            while (j < len && j - start < 10 &&
                   ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                    (s[j] >= '0' && s[j] <= '9')))
                j++;
            nb_buf_puts(o, j > start && j < len && s[j] == ';' ? "&" : "&amp;");
        } else if ((unsigned char)c < 0x20 && c != '\n' && c != '\t') {
            nb_buf_puts(o, " ");
        } else {
            nb_buf_printf(o, "%c", c);
        }
    }
}

/* An attribute value: ids prefixed, references kept only within the figure ("#id", url(#id)),
 * prefixed the same way. Returns 0 when the attribute is to be dropped. */
static int svg_attr_value(nb_buf *o, const char *name, size_t nlen, const char *v, size_t vlen,
                          const char *prefix) {
    int is_href = (nlen == 4 && strncmp(name, "href", 4) == 0) ||
                  (nlen == 10 && strncmp(name, "xlink:href", 10) == 0);
    if (nlen == 2 && strncmp(name, "id", 2) == 0) {
        nb_buf_puts(o, prefix);
        svg_text(o, v, vlen);
        return 1;
    }
    if (is_href) {
        if (vlen < 2 || v[0] != '#') return 0;
        nb_buf_printf(o, "#%s", prefix);
        svg_text(o, v + 1, vlen - 1);
        return 1;
    }
    /* url(...) anywhere: only url(#id) */
    for (size_t i = 0; i < vlen;) {
        if (vlen - i >= 4 && strncmp(v + i, "url(", 4) == 0) {
            if (vlen - i < 6 || v[i + 4] != '#') return 0;
            nb_buf_printf(o, "url(#%s", prefix);
            i += 5;
            continue;
        }
        svg_text(o, v + i, 1);
        i++;
    }
    return 1;
}

/* gnuplot's SVG document made fit to sit inside the page: from the <svg> element on, only the
 * elements and attributes listed above, ids prefixed; returns the markup (caller frees) or NULL
 * when there is no <svg> element or memory ran out. */
static char *sanitize_svg(const char *in, const char *prefix, const char *label) {
    const char *p = strstr(in, "<svg");
    if (!p) return NULL;
    nb_buf o = {0};
    char open[64][16]; /* the kept elements open, to close what a cut document leaves open */
    int nopen = 0, skip = 0, depth = 0;
    while (*p) {
        if (*p != '<') {
            const char *e = strchr(p, '<');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (!skip && nopen) svg_text(&o, p, len);
            p += len;
            continue;
        }
        if (strncmp(p, "<!--", 4) == 0) {
            const char *e = strstr(p + 4, "-->");
            p = e ? e + 3 : p + strlen(p);
            continue;
        }
        if (p[1] == '!' || p[1] == '?') {
            const char *e = strchr(p, '>');
            p = e ? e + 1 : p + strlen(p);
            continue;
        }
        int closing = p[1] == '/';
        const char *nm = p + 1 + closing;
        size_t nlen = strspn(nm, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                 ":-_");
        /* the end of the tag, past quoted values */
        const char *q = nm + nlen;
        char quote = 0;
        for (; *q && (quote || *q != '>'); q++)
            if (quote && *q == quote)
                quote = 0;
            else if (!quote && (*q == '"' || *q == '\''))
                quote = *q;
        if (!*q) break; /* a cut tag: stop there */
        int self = q[-1] == '/';
        if (closing) {
            if (skip) {
                if (--depth == 0) skip = 0;
            } else if (nopen > 0) {
                nb_buf_printf(&o, "</%s>", open[--nopen]);
                if (nopen == 0) break; /* the <svg> element closed: nothing after it */
            }
            p = q + 1;
            continue;
        }
        int keep = !skip && nlen > 0 && nlen < 16 && in_list(svg_elements, nm, nlen);
        /* the document's own title and description ("Gnuplot") would show as a tooltip */
        if (keep && nopen == 1 &&
            (strncmp(nm, "title", nlen) == 0 || strncmp(nm, "desc", nlen) == 0))
            keep = 0;
        if (!keep) {
            if (!self) {
                if (!skip) depth = 0;
                skip = 1;
                depth++;
            }
            p = q + 1;
            continue;
        }
        nb_buf_printf(&o, "<%.*s", (int)nlen, nm);
        if (nopen == 0) {
            nb_buf_puts(&o, " class=\"fig\" role=\"img\" aria-label=\"");
            nb_buf_puts(&o, label);
            nb_buf_puts(&o, "\"");
        }
        /* attributes: name="value" or name='value' */
        const char *a = nm + nlen;
        while (a < q) {
            while (a < q && (*a == ' ' || *a == '\n' || *a == '\t' || *a == '\r' || *a == '/'))
                a++;
            if (a >= q) break;
            const char *an = a;
            while (a < q && *a != '=' && *a != ' ' && *a != '\n' && *a != '\t' && *a != '/')
                a++;
            size_t alen = (size_t)(a - an);
            while (a < q && (*a == ' ' || *a == '\n' || *a == '\t'))
                a++;
            if (a >= q || *a != '=') continue; /* an attribute without a value: dropped */
            a++;
            while (a < q && (*a == ' ' || *a == '\n' || *a == '\t'))
                a++;
            if (a >= q || (*a != '"' && *a != '\'')) break;
            char qc = *a++;
            const char *v = a;
            while (a < q && *a != qc)
                a++;
            size_t vlen = (size_t)(a - v);
            a++;
            if (!in_list(svg_attrs, an, alen)) continue;
            if (nopen == 0 && alen == 5 && strncmp(an, "class", 5) == 0) continue;
            nb_buf a_out = {0};
            if (svg_attr_value(&a_out, an, alen, v, vlen, prefix))
                nb_buf_printf(&o, " %.*s=\"%s\"", (int)alen, an, a_out.p ? a_out.p : "");
            nb_buf_free(&a_out);
        }
        if (self) {
            nb_buf_puts(&o, "/>");
        } else {
            nb_buf_puts(&o, ">");
            if (nopen < 64) {
                snprintf(open[nopen], sizeof open[nopen], "%.*s", (int)nlen, nm);
                nopen++;
            }
        }
        p = q + 1;
        if (nopen == 0) break; /* the <svg> element closed */
    }
    while (nopen > 0)
        nb_buf_printf(&o, "</%s>", open[--nopen]);
    if (o.oom) {
        nb_buf_free(&o);
        return NULL;
    }
    return nb_buf_take(&o);
}

/* The largest figure inlined: gnuplot's SVG of a few thousand points is well under it. */
#define SVG_MAX ((size_t)64 << 20)

static char *read_file(const char *path) {
    char *p = NULL;
    return nb_read_file(path, SVG_MAX, NB_READ_REGULAR, &p, NULL, NULL) == 0 ? p : NULL;
}

/* The figure of figure k as inline SVG markup (caller frees), or NULL with *why set to what
 * to say instead (*nothing set when the runs recorded nothing to draw). */
static char *figure_svg(const nb_plot_figure *f, int k, const char *label, char *why,
                        size_t whysize, int *nothing) {
    const char *metrics[3];
    int nm = nb_figure_default_metrics(f, metrics);
    if (nm == 0) {
        *nothing = 1;
        snprintf(why, whysize, "no training loss or evaluation metric was recorded");
        return NULL;
    }
    char dir[4096];
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/normbench-report.XXXXXX",
             t && *t && strlen(t) < 3000 ? t : "/tmp");
    if (!mkdtemp(dir)) {
        snprintf(why, whysize, "cannot create a temporary directory: %s", strerror(errno));
        return NULL;
    }
    char base[4200], svg[4300];
    snprintf(base, sizeof base, "%s/fig", dir);
    snprintf(svg, sizeof svg, "%s/fig.svg", dir);
    nb_plot_opts po = {
        .metrics = metrics,
        .nmetrics = nm,
        .x_step = 1,
        .x_time = 1,
        .smooth = 0.6,
        .max_points = 1000,
        .svg = svg,
        .base = base,
        .gnuplot = "gnuplot",
        .command = "normbench report --format html",
    };
    nb_err err;
    nb_err_clear(&err);
    char *text = NULL, *out = NULL;
    if (nb_plot_render(f, &po, &text, &err) != 0) {
        snprintf(why, whysize, "%.500s", err.msg);
    } else {
        char *raw = read_file(svg);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "f%d-", k + 1);
        out = raw ? sanitize_svg(raw, prefix, label) : NULL;
        if (!out) snprintf(why, whysize, "gnuplot's SVG could not be read");
        free(raw);
    }
    free(text);
    remove_tree(dir, 0);
    return out;
}

/* ---- the page --------------------------------------------------------------------------- */

static const char css[] =
    ":root{color-scheme:light}\n"
    "body{font:14px/1.45 \"DejaVu Sans\",\"Liberation Sans\",Arial,sans-serif;color:#1b1f24;"
    "background:#fff;margin:0 auto;max-width:1280px;padding:20px 32px 48px}\n"
    "h1{font-size:26px;margin:8px 0 4px}\n"
    "h2{font-size:20px;margin:36px 0 10px;padding-bottom:4px;border-bottom:2px solid #1f77b4}\n"
    "h3{font-size:15px;margin:22px 0 6px;color:#39424e}\n"
    "p,ul{margin:6px 0}\n"
    ".meta{color:#57606a}\n"
    ".error{color:#b42318;border:1px solid #b42318;padding:6px 10px}\n"
    "code,.mono{font-family:\"DejaVu Sans Mono\",\"Liberation Mono\",monospace;font-size:12.5px}\n"
    ".scroll{overflow-x:auto}\n"
    "table{border-collapse:collapse;margin:6px 0 10px;font-variant-numeric:tabular-nums}\n"
    "th,td{padding:4px 9px;border-bottom:1px solid #d8dee4;text-align:right;white-space:nowrap;"
    "vertical-align:top}\n"
    "th{background:#f0f3f6;font-weight:600;border-bottom:2px solid #afb8c1;white-space:normal;"
    "vertical-align:bottom}\n"
    "table.report{font-size:13px}\n"
    "table.report th{max-width:8em}\n"
    "table.report th,table.report td{padding:4px 7px}\n"
    "th:first-child,td:first-child,.l{text-align:left}\n"
    "tbody tr:nth-child(even) td{background:#f8fafb}\n"
    "td.cfg{white-space:normal;text-align:left;min-width:24em;max-width:60em}\n"
    "td.wrap{white-space:normal;min-width:10em;max-width:24em}\n"
    ".norm{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}\n"
    ".zero{color:#9aa3ad}\n"
    ".bad{color:#b42318;font-weight:600}\n"
    "figure{margin:10px 0 6px}\n"
    "svg.fig{display:block;width:100%;max-width:1200px;height:auto;border:1px solid #d8dee4}\n"
    "figcaption{color:#57606a;font-size:13px;margin-top:4px}\n"
    ".paper{background:#f6f8fa;border-left:3px solid #afb8c1;padding:6px 10px;margin:8px 0}\n"
    "nav ul{columns:2;padding-left:20px}\n"
    "footer{margin-top:40px;color:#57606a;font-size:12.5px;border-top:1px solid #d8dee4;"
    "padding-top:8px}\n"
    "@media print{\n"
    "  @page{margin:14mm}\n"
    "  body{max-width:none;padding:0;font-size:9.5pt}\n"
    "  nav{display:none}\n"
    "  h2{break-after:avoid;page-break-after:avoid}\n"
    "  h3{break-after:avoid}\n"
    "  figure,tr{break-inside:avoid;page-break-inside:avoid}\n"
    "  section.block~section.block,#runs{break-before:page;page-break-before:always}\n"
    "  .scroll{overflow:visible}\n"
    "  th,td{padding:2px 5px}\n"
    "  td.cfg,td.wrap{min-width:0}\n"
    "  svg.fig{max-width:100%;border:0}\n"
    "  tbody tr:nth-child(even) td{background:none}\n"
    "}\n";

/* A cell's text: a '-' (no value) or a zero count greyed, so the numbers stand out. */
static void cell_td(FILE *f, const char *text, int col, int fail_col) {
    int dim = strcmp(text, "-") == 0 || (fail_col && strcmp(text, "0") == 0);
    int bad = fail_col && !dim;
    fputs(col == 0 ? "<td class=\"l\">"
          : dim    ? "<td class=\"zero\">"
          : bad    ? "<td class=\"bad\">"
                   : "<td>",
          f);
    h(f, text);
    fputs("</td>", f);
}

static void print_table(FILE *f, const nb_report *r, int a, const nb_report_table *t) {
    int nfail_from = t->ncol - 4;
    fputs("<div class=\"scroll\"><table class=\"report\">\n<thead><tr>", f);
    for (int c = 0; c < t->ncol; c++) {
        fputs(c == 0 ? "<th class=\"l\">" : "<th>", f);
        /* "steps to METRIC<=X" may break before its comparison */
        const char *x = t->cell[c], *cmp = strstr(x, "<=");
        if (!cmp) cmp = strstr(x, ">=");
        if (cmp) {
            char head[NB_REPORT_CELL];
            snprintf(head, sizeof head, "%.*s", (int)(cmp - x), x);
            h(f, head);
            fputs("<wbr>", f);
            h(f, cmp);
        } else {
            h(f, x);
        }
        fputs("</th>", f);
    }
    fputs("</tr></thead>\n<tbody>\n", f);
    for (int i = 1; i < t->nrow; i++) {
        fputs("<tr>", f);
        for (int c = 0; c < t->ncol; c++) {
            const char *x = t->cell[i * t->ncol + c];
            if (c == 0) {
                fprintf(f, "<td class=\"l\"><span class=\"norm\" style=\"background:%s\"></span>",
                        nb_plot_norm_color(r->groups[a + i - 1].norm));
                h(f, x);
                fputs("</td>", f);
            } else {
                cell_td(f, x, c, c >= nfail_from);
            }
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
}

/* A paper table beside the runs (nb_report_paper_cells): a plain grid, the norm first. */
static void print_paper_table(FILE *f, const nb_paper_table *pt, const nb_report_table *t) {
    fputs("<h4>", f);
    h(f, pt->title);
    fputs(", beside this store's runs</h4>\n<div class=\"scroll\"><table class=\"report\">\n"
          "<thead><tr>",
          f);
    for (int c = 0; c < t->ncol; c++) {
        fputs(c == 0 ? "<th class=\"l\">" : "<th>", f);
        h(f, t->cell[c]);
        fputs("</th>", f);
    }
    fputs("</tr></thead>\n<tbody>\n", f);
    for (int i = 1; i < t->nrow; i++) {
        fputs("<tr>", f);
        for (int c = 0; c < t->ncol; c++)
            cell_td(f, t->cell[i * t->ncol + c], c, 0);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
}

/* The provenance values a reader compares: which machine, how many threads, which BLAS, which
 * build. */
static const struct {
    const char *key, *head;
} prov_cols[] = {
    {"hostname", "machine"},     {"cpu_model", "CPU"},
    {"cores_online", "cores"},   {"omp_max_threads", "threads"},
    {"openblas_config", "BLAS"}, {"openblas_corename", "BLAS kernels"},
    {"git_rev", "git revision"}, {"cc", "compiler"},
};
enum { NPROV = sizeof prov_cols / sizeof prov_cols[0] };

static void prov_value(const run *x, int c, char *buf, size_t size) {
    const char *v = nb_json_get(&x->prov, prov_cols[c].key);
    if (c == 3) { /* threads: the run's --threads when set, else what OpenMP had */
        const char *t = nb_json_get(&x->config, "threads");
        if (t && strcmp(t, "0") != 0) v = t;
    }
    if (!v || strcmp(v, "null") == 0) v = "-";
    const char *dirty = nb_json_get(&x->prov, "git_dirty");
    size_t len = strlen(v);
    int marked = len >= 6 && strcmp(v + len - 6, "-dirty") == 0;
    snprintf(buf, size, "%s%s", v,
             strcmp(prov_cols[c].key, "git_rev") == 0 && dirty && strcmp(dirty, "true") == 0 &&
                     !marked
                 ? "-dirty"
                 : "");
}

/* The distinct provenances of the runs of one block, each with the norms and runs it covers. */
static void print_provenance(FILE *f, const run *runs, int n, const char *task, const char *group) {
    int *done = calloc((size_t)(n ? n : 1), sizeof *done);
    if (!done) return;
    fputs("<div class=\"scroll\"><table class=\"prov\">\n<thead><tr><th class=\"l\">run ids</th>",
          f);
    for (int c = 0; c < NPROV; c++)
        fprintf(f, "<th class=\"l\">%s</th>", prov_cols[c].head);
    fputs("</tr></thead>\n<tbody>\n", f);
    for (int i = 0; i < n; i++) {
        if (done[i] || strcmp(runs[i].d->info.task, task) != 0 || strcmp(runs[i].group, group))
            continue;
        char vi[NPROV][256];
        for (int c = 0; c < NPROV; c++)
            prov_value(&runs[i], c, vi[c], sizeof vi[c]);
        fputs("<tr><td class=\"l\">", f);
        int count = 0;
        for (int j = i; j < n; j++) {
            if (done[j] || strcmp(runs[j].d->info.task, task) != 0 ||
                strcmp(runs[j].group, group) != 0)
                continue;
            int same = 1;
            for (int c = 0; c < NPROV && same; c++) {
                char vj[256];
                prov_value(&runs[j], c, vj, sizeof vj);
                same = strcmp(vi[c], vj) == 0;
            }
            if (!same) continue;
            done[j] = 1;
            fprintf(f, "%s%lld", count++ ? ", " : "", (long long)runs[j].d->info.id);
        }
        fputs("</td>", f);
        for (int c = 0; c < NPROV; c++) {
            fputs(c == 4 || c == 7 ? "<td class=\"l wrap\">" : "<td class=\"l\">", f);
            h(f, vi[c]);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
    free(done);
}

static void print_utc(FILE *f, double t) {
    if (isnan(t)) {
        fputs("-", f);
        return;
    }
    time_t tt = (time_t)t;
    struct tm tm;
    char buf[64];
    if (gmtime_r(&tt, &tm) && strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%SZ", &tm))
        fputs(buf, f);
    else
        fputs("-", f);
}

/* Configuration keys that have their own column in the runs table. */
static int own_column(const char *key) {
    return strcmp(key, "task") == 0 || strcmp(key, "dataset") == 0 || strcmp(key, "norm") == 0 ||
           strcmp(key, "seed") == 0;
}

/* Whether every run of the task has key = value in its configuration. */
static int shared_by_all(const run *runs, int n, const char *task, const char *key,
                         const char *value) {
    for (int i = 0; i < n; i++) {
        if (strcmp(runs[i].d->info.task, task) != 0) continue;
        const char *v = nb_json_get(&runs[i].config, key);
        if (!v || strcmp(v, value) != 0) return 0;
    }
    return 1;
}

static void print_runs(FILE *f, const run *runs, int n) {
    fputs("<section id=\"runs\">\n<h2>Runs</h2>\n", f);
    if (n == 0) fputs("<p>No runs.</p>\n", f);
    for (int i = 0; i < n; i++) {
        const char *task = runs[i].d->info.task;
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = strcmp(runs[j].d->info.task, task) != 0;
        if (!first) continue;
        fputs("<h3>", f);
        h(f, task);
        fputs("</h3>\n<p><b>Configuration shared by these runs:</b> <span class=\"mono\">", f);
        int any = 0;
        for (int k = 0; k < runs[i].config.n; k++) {
            const nb_json_member *kv = &runs[i].config.kv[k];
            if (own_column(kv->key) || !shared_by_all(runs, n, task, kv->key, kv->value)) continue;
            fputs(any++ ? " " : "", f);
            h(f, kv->key);
            fputs("=", f);
            h(f, kv->value);
        }
        if (!any) fputs("-", f);
        fputs("</span></p>\n", f);
        fputs("<div class=\"scroll\"><table class=\"runs\">\n<thead><tr><th>id</th>"
              "<th class=\"l\">dataset</th><th class=\"l\">variant</th><th class=\"l\">norm</th>"
              "<th>seed</th><th class=\"l\">status</th><th class=\"l\">started (UTC)</th>"
              "<th>duration</th><th class=\"l\">configuration (what differs)</th></tr></thead>\n"
              "<tbody>\n",
              f);
        for (int j = i; j < n; j++) {
            const run *x = &runs[j];
            if (strcmp(x->d->info.task, task) != 0) continue;
            const nb_run_info *in = &x->d->info;
            fprintf(f, "<tr><td>%lld</td><td class=\"l\">", (long long)in->id);
            h(f, in->dataset);
            fputs("</td><td class=\"l\">", f);
            h(f, x->variant ? x->variant : "-");
            fprintf(f, "</td><td class=\"l\"><span class=\"norm\" style=\"background:%s\"></span>",
                    nb_plot_norm_color(in->norm));
            h(f, in->norm);
            fprintf(f, "</td><td>%lld</td><td class=\"l%s\">", (long long)in->seed,
                    strcmp(in->status, "finished") == 0 ? "" : " bad");
            h(f, nb_effective_status(in->status, in->pid, in->pid_start, in->host));
            if (in->message) {
                fputs(": ", f);
                h(f, in->message);
            }
            fputs("</td><td class=\"l\">", f);
            print_utc(f, in->started);
            if (isnan(in->duration))
                fputs("</td><td>-", f);
            else
                fprintf(f, "</td><td>%.1f s", in->duration);
            fputs("</td><td class=\"cfg mono\">", f);
            int shown = 0;
            for (int k = 0; k < x->config.n; k++) {
                const nb_json_member *kv = &x->config.kv[k];
                if (own_column(kv->key) || shared_by_all(runs, n, task, kv->key, kv->value))
                    continue;
                fputs(shown++ ? " " : "", f);
                h(f, kv->key);
                fputs("=", f);
                h(f, kv->value);
            }
            if (!shown) fputs("-", f);
            fputs("</td></tr>\n", f);
        }
        fputs("</tbody></table></div>\n", f);
    }
    fputs("</section>\n", f);
}

/* The figure of the report's block (task, group) among the loaded figures, or -1. */
static int find_figure(const nb_plot_set *set, const char *task, const char *group) {
    for (int k = 0; set && k < set->n; k++) {
        const nb_plot_figure *fg = &set->figs[k];
        size_t dl = strlen(fg->dataset);
        if (strcmp(fg->task, task) != 0 || strncmp(group, fg->dataset, dl) != 0) continue;
        const char *rest = group + dl;
        if (!fg->variant && !*rest) return k;
        if (fg->variant && rest[0] == ' ' && rest[1] == '[' &&
            strncmp(rest + 2, fg->variant, strlen(fg->variant)) == 0 &&
            strcmp(rest + 2 + strlen(fg->variant), "]") == 0)
            return k;
    }
    return -1;
}

/* A message through io (nb_report_io), formatted. */
static void say(const nb_report_io *io, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const nb_report_io *io, const char *fmt, ...) {
    if (!io || !io->say) return;
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    io->say(io->ctx, text);
}

/* The page's head and header: title, style, the store db and its runs' counts. */
static void print_header(FILE *f, const char *task, const char *db, const run *runs, int nruns) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'; img-src data:\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"normbench " NB_VERSION " (git " NB_GIT_REV ")\">\n"
          "<title>normbench report",
          f);
    if (task) {
        fputs(": ", f);
        h(f, task);
    }
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<header>\n<h1>normbench report",
            css);
    if (task) {
        fputs(": ", f);
        h(f, task);
    }
    int finished = 0;
    for (int i = 0; i < nruns; i++)
        finished += strcmp(runs[i].d->info.status, "finished") == 0;
    fputs("</h1>\n<p class=\"meta\">Store <code>", f);
    h(f, db);
    fprintf(f,
            "</code>: %d run%s, %d finished. Means ± sample standard deviations over seeds "
            "(finished runs only); speed against layer measured on the same machine.</p>\n"
            "</header>\n",
            nruns, nruns == 1 ? "" : "s", finished);
}

/* The contents: a link per block of r, and to the runs. */
static void print_contents(FILE *f, const nb_report *r) {
    fputs("<nav>\n<h3>Contents</h3>\n<ul>\n", f);
    for (int a = 0, k = 1; a < r->n; a = nb_report_block_end(r, a), k++) {
        fprintf(f, "<li><a href=\"#b%d\">", k);
        h(f, r->groups[a].task);
        fputs(" / ", f);
        h(f, r->groups[a].dataset);
        fputs("</a></li>\n", f);
    }
    fputs("<li><a href=\"#runs\">Runs</a></li>\n</ul>\n</nav>\n", f);
    if (r->n == 0) fputs("<p>No runs to report yet.</p>\n", f);
}

/* "TASK / DATASET" of group g, nb_buf_escaped and then HTML-escaped, into label (size bytes). */
static void figure_label(char *label, size_t size, const nb_report_group *g) {
    nb_buf lb = {0};
    nb_buf_printf(&lb, "%s / %s", g->task, g->dataset);
    nb_buf esc = {0};
    nb_buf_escaped(&esc, lb.p ? lb.p : "");
    size_t o = 0;
    for (const char *p = esc.p ? esc.p : ""; *p && o + 8 < size; p++) {
        const char *rep = *p == '&'    ? "&amp;"
                          : *p == '<'  ? "&lt;"
                          : *p == '>'  ? "&gt;"
                          : *p == '"'  ? "&quot;"
                          : *p == '\'' ? "&#39;"
                                       : NULL;
        if (rep) {
            size_t rl = strlen(rep);
            memcpy(label + o, rep, rl);
            o += rl;
        } else {
            label[o++] = *p;
        }
    }
    label[o] = '\0';
    nb_buf_free(&lb);
    nb_buf_free(&esc);
}

/* The figure of group g (from set; a note or an error when there is none), said through io when
 * it failed (counted in *failed) or, once (*warned), when the report has no figures. */
static void print_figure(FILE *f, const nb_plot_set *set, const nb_report_group *g,
                         int have_gnuplot, const nb_report_io *io, int *warned, int *failed) {
    fputs("<h3>Figure</h3>\n", f);
    int fk = find_figure(set, g->task, g->dataset);
    char label[512];
    figure_label(label, sizeof label, g);
    char why[600] = "";
    int nothing = 0;
    char *svg = fk >= 0 ? figure_svg(&set->figs[fk], fk, label, why, sizeof why, &nothing) : NULL;
    if (fk < 0) snprintf(why, sizeof why, "no finished runs to draw");
    if (svg) {
        fputs("<figure>\n", f);
        fputs(svg, f);
        fputs("\n<figcaption>", f);
        h(f, g->task);
        fputs(" / ", f);
        h(f, g->dataset);
        fputs(": the training loss (smoothed, debiased EMA 0.6; faint: raw) and the evaluation "
              "metric against steps (left) and seconds (right); a line per norm, the mean over "
              "seeds with a band of ± 1 standard deviation. Drawn as <code>normbench plot"
              "</code> draws it.</figcaption>\n</figure>\n",
              f);
        free(svg);
    } else {
        /* a figure that gnuplot failed to draw is an error, on the page and said (and the
         * exit status); no gnuplot or nothing to draw is a note */
        int broken = fk >= 0 && have_gnuplot && !nothing;
        fputs(broken ? "<p class=\"error\"><b>Error: the figure failed:</b> "
                     : "<p class=\"meta\">No figure: ",
              f);
        h(f, why);
        fputs(".</p>\n", f);
        if (broken) {
            char shown[700], name[300];
            nb_buf lb = {0};
            nb_buf_printf(&lb, "%s / %s", g->task, g->dataset);
            say(io, "error: the figure of %s failed: %s\n",
                nb_escape(name, sizeof name, lb.p ? lb.p : ""),
                nb_escape(shown, sizeof shown, why));
            nb_buf_free(&lb);
            (*failed)++;
        } else if (fk >= 0 && !*warned) {
            char shown[700];
            say(io, "warning: the report has no figures: %s\n",
                nb_escape(shown, sizeof shown, why));
            *warned = 1;
        }
    }
}

/* Block k of the report, groups [a, b) of r: its tables, speed sentences, paper numbers,
 * figure (print_figure) and provenance. Returns 0, or -1 when out of memory. */
static int print_block(FILE *f, const nb_report *r, int a, int b, int k,
                       const nb_target *user_target, const nb_plot_set *set, const run *runs,
                       int nruns, int have_gnuplot, const nb_report_io *io, int *warned,
                       int *failed) {
    const nb_report_group *g = &r->groups[a];
    nb_report_table t;
    if (nb_report_cells(r, a, b, user_target, &t) != 0) return -1;
    fprintf(f, "<section class=\"block\" id=\"b%d\">\n<h2>", k);
    h(f, g->task);
    fputs(" / ", f);
    h(f, g->dataset);
    fputs("</h2>\n", f);
    print_table(f, r, a, &t);
    free(t.cell);
    int any = 0;
    for (int i = a; i < b; i++) {
        char sent[160];
        nb_speed_sentence(&r->groups[i], sent, sizeof sent);
        if (!sent[0]) continue;
        fputs(any++ ? "<li>" : "<ul class=\"speed\">\n<li>", f);
        h(f, sent);
        fputs("</li>\n", f);
    }
    if (any) fputs("</ul>\n", f);
    const nb_task *tk = nb_task_find(g->task);
    fputs("<p class=\"paper\"><b>What the papers report.</b> ", f);
    h(f, tk && tk->paper ? tk->paper : "no paper numbers are known for this task");
    fputs(" <i>(Their times were measured on other hardware and frameworks: compare ratios, "
          "not seconds.)</i></p>\n",
          f);
    for (const nb_paper_table *pt = tk ? tk->paper_tables : NULL; pt && pt->title; pt++) {
        if (!nb_paper_table_applies(pt, g->model)) continue;
        nb_report_table pt_cells;
        if (nb_report_paper_cells(r, a, b, pt, &pt_cells) != 0) return -1;
        print_paper_table(f, pt, &pt_cells);
        free(pt_cells.cell);
    }

    print_figure(f, set, g, have_gnuplot, io, warned, failed);
    fputs("<h3>Provenance</h3>\n", f);
    print_provenance(f, runs, nruns, g->task, g->dataset);
    fputs("</section>\n", f);
    return 0;
}

int nb_report_html(FILE *f, nb_store *s, const nb_report *r, const char *task,
                   const nb_target *user_target, const char *db, const nb_report_io *io,
                   int *failed, nb_err *err) {
    *failed = 0;
    const int have_gnuplot = nb_plot_have_gnuplot("gnuplot");
    run *runs = NULL;
    int nruns = 0;
    if (load_runs(s, task, &runs, &nruns, err) != 0) return -1;
    nb_plot_set *set = NULL;
    nb_plot_filter filter = {task, NULL, NULL, NULL};
    if (nb_plot_load(s, &filter, &set, err) != 0) {
        runs_free(runs, nruns);
        return -1;
    }
    print_header(f, task, db, runs, nruns);
    print_contents(f, r);
    int warned = 0;
    for (int a = 0, k = 1; a < r->n; k++) {
        int b = nb_report_block_end(r, a);
        if (print_block(f, r, a, b, k, user_target, set, runs, nruns, have_gnuplot, io, &warned,
                        failed) != 0) {
            nb_plot_set_free(set);
            runs_free(runs, nruns);
            return nb_errf(err, "out of memory");
        }
        a = b;
    }
    print_runs(f, runs, nruns);
    fputs("<footer>Written by normbench " NB_VERSION " (git " NB_GIT_REV ") from the store above; "
          "<code>normbench report</code> prints the same tables as text, <code>normbench plot"
          "</code> the same figures.</footer>\n</body>\n</html>\n",
          f);
    nb_plot_set_free(set);
    runs_free(runs, nruns);
    return 0;
}
