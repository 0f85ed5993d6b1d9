/* cmd/opts.c — option parsing, messages and defaults shared by every command. */
#include "cmd/cmd.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "tasks/task.h"
#include "util/num.h"
#include "util/text.h"

int nb_report_err(const nb_err *e) {
    fprintf(stderr, "error: %s\n", e->msg[0] ? e->msg : "unknown failure");
    if (e->hint[0]) fprintf(stderr, "hint: %s\n", e->hint);
    return NB_EXIT_FAIL;
}

int nb_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return NB_EXIT_FAIL;
}

int nb_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fprintf(stderr, "hint: see 'normbench %s --help'\n", cmd);
    return NB_EXIT_USAGE;
}

int nb_parse_run_operand(const char *cmd, int npos, const char *const *pos, long long *id) {
    if (npos < 1) return nb_usage_error(cmd, "which run? e.g. 'normbench %s 3'", cmd);
    if (nb_parse_int(pos[0], id) != 0 || *id < 1)
        return nb_usage_error(cmd, "a run is a positive number, not '%s'", pos[0]);
    return 0;
}

int nb_check_text_opt(const char *cmd, const char *opt, const char *value) {
    if (!value || nb_text_clean(value)) return 0;
    char shown[256];
    return nb_usage_error(cmd,
                          "invalid --%s '%s': control characters and bytes that are not UTF-8 "
                          "are not allowed in it",
                          opt, nb_escape(shown, sizeof shown, value));
}

void nb_print_help(FILE *f, const char *usage, const nb_opt *opts) {
    fputs(usage, f);
    if (!opts || !opts[0].name) return;
    fputs("\noptions:\n", f);
    for (const nb_opt *o = opts; o->name; o++) {
        char left[64];
        if (o->metavar)
            snprintf(left, sizeof left, "--%s %s", o->name, o->metavar);
        else
            snprintf(left, sizeof left, "--%s", o->name);
        fprintf(f, "  %-22s %s", left, o->help);
        if (o->type == NB_OPT_CHOICE && o->choices) {
            fputs(" (", f);
            for (int i = 0; o->choices[i]; i++)
                fprintf(f, "%s%s", i ? "|" : "", o->choices[i]);
            fputc(')', f);
        }
        fputc('\n', f);
    }
    fprintf(f, "  %-22s %s\n", "-h, --help", "show this help");
}

static int set_value(const char *cmd, nb_opt *o, const char *v) {
    switch (o->type) {
    case NB_OPT_STR:
        if (!*v && !o->empty_ok)
            return nb_usage_error(cmd, "option '--%s' needs a value: it is empty", o->name);
        *(const char **)o->dst = v;
        return 0;
    case NB_OPT_INT:
    case NB_OPT_I64: {
        long long x = 0;
        if (nb_parse_int(v, &x) != 0)
            return nb_usage_error(
                cmd, "option '--%s' expects an integer, not '%s' (decimal digits)", o->name, v);
        if (o->min < o->max && (x < o->min || x > o->max))
            return nb_usage_error(cmd, "option '--%s' must be between %.0f and %.0f, not '%s'",
                                  o->name, o->min, o->max, v);
        if (o->type == NB_OPT_INT) {
            if (x < -2147483647LL || x > 2147483647LL)
                return nb_usage_error(cmd, "option '--%s' is out of range: '%s'", o->name, v);
            *(int *)o->dst = (int)x;
        } else {
            *(int64_t *)o->dst = (int64_t)x;
        }
        return 0;
    }
    case NB_OPT_DOUBLE: {
        double x = 0;
        if (nb_parse_double(v, &x) != 0)
            return nb_usage_error(cmd,
                                  "option '--%s' expects a number, not '%s' (decimal: no hex, "
                                  "spaces, inf or nan)",
                                  o->name, v);
        if (o->min < o->max && (x < o->min || x > o->max))
            return nb_usage_error(cmd, "option '--%s' must be between %g and %g, not '%s'", o->name,
                                  o->min, o->max, v);
        *(double *)o->dst = x;
        return 0;
    }
    case NB_OPT_CHOICE:
        for (int i = 0; o->choices[i]; i++)
            if (strcmp(o->choices[i], v) == 0) {
                *(int *)o->dst = i;
                return 0;
            }
        fprintf(stderr, "error: invalid value '%s' for option '--%s'\nhint: valid values are:", v,
                o->name);
        for (int i = 0; o->choices[i]; i++)
            fprintf(stderr, " %s", o->choices[i]);
        fputc('\n', stderr);
        return NB_EXIT_USAGE;
    case NB_OPT_FLAG:
        *(int *)o->dst = 1;
        return 0;
    }
    return NB_EXIT_USAGE;
}

int nb_parse_opts(const char *cmd, const char *usage, int argc, const char **argv, nb_opt *opts,
                  const char **pos, int maxpos, int *npos) {
    int np = 0, only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
            nb_print_help(stdout, usage, opts);
            return -1;
        }
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (np >= maxpos) return nb_usage_error(cmd, "unexpected argument '%s'", a);
            pos[np++] = a;
            continue;
        }
        if (a[1] != '-')
            return nb_usage_error(cmd, "unknown option '%s' (options are long: --name)", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        nb_opt *o = NULL;
        for (nb_opt *p = opts; p && p->name; p++)
            if (strlen(p->name) == len && strncmp(p->name, name, len) == 0) o = p;
        if (!o) {
            fprintf(stderr,
                    "error: unknown option '--%.*s' for 'normbench %s'\nhint: valid options:",
                    (int)len, name, cmd);
            for (nb_opt *p = opts; p && p->name; p++)
                fprintf(stderr, " --%s", p->name);
            fputc('\n', stderr);
            return NB_EXIT_USAGE;
        }
        const char *v = NULL;
        if (o->type == NB_OPT_FLAG) {
            if (eq) return nb_usage_error(cmd, "option '--%s' takes no value", o->name);
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            return nb_usage_error(cmd, "option '--%s' needs a value (%s)", o->name,
                                  o->metavar ? o->metavar : "VALUE");
        }
        /* A value given twice would silently lose one of them: a usage error. A flag twice
         * means the same as once. */
        if (o->seen && o->type != NB_OPT_FLAG)
            return nb_usage_error(cmd, "option '--%s' is given twice: give it once", o->name);
        int rc = set_value(cmd, o, v);
        if (rc) return rc;
        o->seen = 1;
    }
    if (npos) *npos = np;
    return 0;
}

int nb_opt_seen(const nb_opt *opts, const char *name) {
    for (const nb_opt *o = opts; o->name; o++)
        if (strcmp(o->name, name) == 0) return o->seen;
    return 0;
}

const char *nb_default_db(void) {
    const char *e = getenv("NORMBENCH_DB");
    return e && *e ? e : "normbench.db";
}

const char *nb_default_data_dir(void) {
    static char buf[4096];
    const char *e = getenv("NORMBENCH_DATA");
    if (e && *e) return e;
    const char *x = getenv("XDG_CACHE_HOME");
    if (x && *x) {
        snprintf(buf, sizeof buf, "%s/normbench", x);
        return buf;
    }
    const char *h = getenv("HOME");
    snprintf(buf, sizeof buf, "%s/.cache/normbench", h && *h ? h : ".");
    return buf;
}

int nb_norms_task_takes(const nb_task *task, int *kinds, int n, const nb_given *given, int ngiven) {
    int kept = 0;
    for (int i = 0; i < n; i++) {
        nb_train_cfg cfg;
        nb_err err;
        memset(&cfg, 0, sizeof cfg);
        cfg.norm.kind = (nb_norm_kind)kinds[i];
        cfg.task = task->name;
        cfg.dataset = task->default_dataset;
        int refused = kinds[i] < NB_NORMS_MAX &&
                      (nb_task_configure(task, &cfg, kinds[i], given, ngiven, &err) != 0 ||
                       (task->finish && task->finish(&cfg, given, ngiven, &err) != 0));
        nb_task_opts_free(&cfg);
        if (!refused) kinds[kept++] = kinds[i];
    }
    return kept > 0 ? kept : n;
}

int nb_parse_norm_list(const char *cmd, const char *list, int *kinds, int max) {
    int n = 0;
    if (strcmp(list, "all") == 0) {
        for (int k = 0; k < nb_norm_count() && n < max; k++)
            if (nb_norm_get((nb_norm_kind)k)->in_all) kinds[n++] = k;
        return n;
    }
    const char *p = list;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        char name[32];
        if (len == 0 || len >= sizeof name) goto bad;
        memcpy(name, p, len);
        name[len] = '\0';
        nb_norm_kind k;
        if (nb_norm_from_name(name, &k) != 0) {
            fprintf(stderr, "error: unknown norm '%s' in '%s'\nhint: valid norms: all", name, list);
            for (int i = 0; i < nb_norm_count(); i++)
                fprintf(stderr, " %s", nb_norm_name((nb_norm_kind)i));
            fputc('\n', stderr);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (kinds[i] == (int)k)
                return nb_usage_error(cmd, "norm '%s' is listed twice in '%s'", name, list), -1;
        if (n >= max) goto bad;
        kinds[n++] = k;
        p = c ? c + 1 : p + len;
    }
    if (n > 0) return n;
bad:
    nb_usage_error(cmd, "invalid norm list '%s'", list);
    return -1;
}

int nb_unknown_task(const char *cmd, const char *name) {
    if (name)
        fprintf(stderr, "error: unknown task '%s'\nhint: the tasks are:", name);
    else
        fprintf(stderr, "error: which task?\nhint: the tasks are:");
    for (int i = 0; nb_task_at(i); i++)
        fprintf(stderr, " %s", nb_task_at(i)->name);
    fprintf(stderr, " (see 'normbench %s --help')\n", cmd);
    return NB_EXIT_USAGE;
}
