/* tasks/taskopt.c — the machinery behind the tasks' option declarations (tasks/taskopt.h). */
#include "tasks/taskopt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task.h"
#include "util/num.h"

/* A row's field in the task's struct, read and written by copying (the struct is the task's; its
 * fields are reached by offset, never through a cast pointer). */
static int get_int(const void *base, const nb_task_opt *o) {
    int v;
    memcpy(&v, (const char *)base + o->offset, sizeof v);
    return v;
}
static double get_double(const void *base, const nb_task_opt *o) {
    double v;
    memcpy(&v, (const char *)base + o->offset, sizeof v);
    return v;
}
static const char *get_str(const void *base, const nb_task_opt *o) {
    const char *v;
    memcpy(&v, (const char *)base + o->offset, sizeof v);
    return v;
}
static void set_int(void *base, const nb_task_opt *o, int v) {
    memcpy((char *)base + o->offset, &v, sizeof v);
}
static void set_double(void *base, const nb_task_opt *o, double v) {
    memcpy((char *)base + o->offset, &v, sizeof v);
}
static void set_str(void *base, const nb_task_opt *o, const char *v) {
    memcpy((char *)base + o->offset, &v, sizeof v);
}

const nb_task_opt *nb_task_opt_find(const nb_task *t, const char *name) {
    for (const nb_task_opt *o = t->opts; o && o->name; o++)
        if (strcmp(o->name, name) == 0) return o;
    return NULL;
}

/* The row an alias stands for (the row itself when it is none). */
static const nb_task_opt *target_of(const nb_task *t, const nb_task_opt *o) {
    return o && o->kind == NB_TOPT_ALIAS ? nb_task_opt_find(t, o->alias_of) : o;
}

static int takes_no_value(const nb_task_opt *o) {
    return o->kind == NB_TOPT_FLAG || (o->kind == NB_TOPT_ALIAS && o->alias_val);
}

int nb_task_opt_is_flag(const char *name, int *known) {
    int flag = 0;
    *known = 0;
    for (int i = 0; nb_task_at(i); i++) {
        const nb_task_opt *o = nb_task_opt_find(nb_task_at(i), name);
        if (!o) continue;
        *known = 1;
        flag |= takes_no_value(o);
    }
    return flag;
}

void nb_task_opt_takers(const char *name, char *out, size_t size) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; nb_task_at(i); i++) {
        const nb_task *t = nb_task_at(i);
        if (!nb_task_opt_find(t, name)) continue;
        int w = snprintf(out + n, size - n, "%s%s", n ? "," : "", t->name);
        if (w < 0 || (size_t)w >= size - n) break;
        n += (size_t)w;
    }
}

void nb_task_opt_key(const char *name, char *out, size_t size) {
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++)
        out[i] = name[i] == '-' ? '_' : name[i];
    out[i] = '\0';
}

static const nb_task_opt *selector_of(const nb_task *t) {
    for (const nb_task_opt *o = t->opts; o && o->name; o++)
        if (o->selector && o->kind == NB_TOPT_CHOICE) return o;
    return NULL;
}

const char *nb_task_model(const nb_task *t, const nb_train_cfg *cfg) {
    const nb_task_opt *sel = selector_of(t);
    if (!sel || !cfg->task_opts) return NULL;
    return sel->choices[get_int(cfg->task_opts, sel)];
}

/* Whether name appears in the comma-separated list. */
static int in_csv(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == n && strncmp(p, name, n) == 0) return 1;
        p = c ? c + 1 : NULL;
    }
    return 0;
}

/* Sets row o (not an alias) in opts from the text v (NULL for a flag). */
static int set_from_text(const nb_task_opt *o, const char *typed, void *opts, const char *v,
                         nb_err *err) {
    switch (o->kind) {
    case NB_TOPT_FLAG:
        set_int(opts, o, 1);
        return 0;
    case NB_TOPT_STR:
        set_str(opts, o, v);
        return 0;
    case NB_TOPT_INT: {
        long long x;
        if (nb_parse_int(v, &x) != 0)
            return nb_errf(err, "option '--%s' expects an integer, not '%s'", typed, v);
        if (o->min < o->max && (x < o->min || x > o->max))
            return nb_errf(err, "option '--%s' must be between %.0f and %.0f, not '%s'", typed,
                           o->min, o->max, v);
        set_int(opts, o, (int)x);
        return 0;
    }
    case NB_TOPT_DOUBLE: {
        double x;
        if (nb_parse_double(v, &x) != 0)
            return nb_errf(err, "option '--%s' expects a number, not '%s'", typed, v);
        if (o->min < o->max && (x < o->min || x > o->max))
            return nb_errf(err, "option '--%s' must be between %g and %g, not '%s'", typed, o->min,
                           o->max, v);
        set_double(opts, o, x);
        return 0;
    }
    case NB_TOPT_CHOICE: {
        for (int i = 0; o->choices[i]; i++)
            if (strcmp(o->choices[i], v) == 0) {
                set_int(opts, o, i);
                return 0;
            }
        char list[256];
        size_t n = 0;
        list[0] = '\0';
        for (int i = 0; o->choices[i] && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? " " : "", o->choices[i]);
        nb_errf(err, "invalid value '%s' for option '--%s'", v, typed);
        return nb_hintf(err, "valid values are: %s", list);
    }
    case NB_TOPT_ALIAS:
        break;
    }
    return nb_errf(err, "option '--%s' is declared wrongly", typed);
}

/* Applies one given option (alias resolved) to opts. */
static int apply_given(const nb_task *t, void *opts, const nb_given *g, nb_err *err) {
    const nb_task_opt *row = nb_task_opt_find(t, g->name);
    const nb_task_opt *o = target_of(t, row);
    if (!row || !o) return nb_errf(err, "'%s' takes no option '--%s'", t->name, g->name);
    const char *v = g->value;
    if (row->kind == NB_TOPT_ALIAS && row->alias_val) v = row->alias_val;
    if (o->kind == NB_TOPT_FLAG && row->kind == NB_TOPT_ALIAS && row->alias_val) {
        set_int(opts, o, strcmp(row->alias_val, "off") != 0);
        return 0;
    }
    return set_from_text(o, g->name, opts, v, err);
}

int nb_task_configure(const nb_task *t, nb_train_cfg *cfg, int norm, const nb_given *given,
                      int ngiven, nb_err *err) {
    cfg->task_opts = NULL;
    size_t size = t->opts_size ? t->opts_size : 1;
    void *opts = calloc(1, size);
    if (!opts) return nb_errf(err, "out of memory");
    cfg->task_opts = opts;
    for (const nb_task_opt *o = t->opts; o && o->name; o++) {
        switch (o->kind) {
        case NB_TOPT_INT:
        case NB_TOPT_CHOICE:
        case NB_TOPT_FLAG:
            set_int(opts, o, (int)o->def);
            break;
        case NB_TOPT_DOUBLE:
            set_double(opts, o, o->def);
            break;
        case NB_TOPT_STR:
            set_str(opts, o, o->def_str);
            break;
        case NB_TOPT_ALIAS:
            break;
        }
    }
    /* the model first: defaults and validity depend on it */
    const nb_task_opt *sel = selector_of(t);
    for (int i = 0; sel && i < ngiven; i++)
        if (target_of(t, nb_task_opt_find(t, given[i].name)) == sel &&
            apply_given(t, opts, &given[i], err) != 0)
            return -1;
    if (t->defaults) t->defaults(cfg, (nb_norm_kind)norm);
    const char *model = nb_task_model(t, cfg);
    for (int i = 0; i < ngiven; i++) {
        const nb_task_opt *row = nb_task_opt_find(t, given[i].name);
        if (!row) {
            char takers[256];
            nb_task_opt_takers(given[i].name, takers, sizeof takers);
            if (takers[0])
                return nb_errf(err, "--%s is an option of the task(s) %s, not of '%s'",
                               given[i].name, takers, t->name);
            return nb_errf(err, "'%s' takes no option '--%s'", t->name, given[i].name);
        }
        const nb_task_opt *o = target_of(t, row);
        if (o && o->models && model && !in_csv(o->models, model))
            return nb_errf(err, "--%s is an option of %s --%s %s, not of --%s %s", given[i].name,
                           t->name, sel->name, o->models, sel->name, model);
        if (apply_given(t, opts, &given[i], err) != 0) return -1;
    }
    return 0;
}

void nb_task_opts_free(nb_train_cfg *cfg) {
    free(cfg->task_opts);
    cfg->task_opts = NULL;
}

void nb_task_opt_format(const nb_task_opt *o, const void *opts, char *out, size_t size) {
    switch (o->kind) {
    case NB_TOPT_INT:
        snprintf(out, size, "%d", get_int(opts, o));
        return;
    case NB_TOPT_DOUBLE:
        nb_fmt_double(out, size, get_double(opts, o));
        return;
    case NB_TOPT_CHOICE:
        snprintf(out, size, "%s", o->choices[get_int(opts, o)]);
        return;
    case NB_TOPT_FLAG:
        snprintf(out, size, "%s", get_int(opts, o) ? "on" : "off");
        return;
    case NB_TOPT_STR: {
        const char *s = get_str(opts, o);
        snprintf(out, size, "%s", s ? s : "");
        return;
    }
    case NB_TOPT_ALIAS:
        break;
    }
    snprintf(out, size, "?");
}

void nb_task_opts_json(const nb_task *t, const nb_train_cfg *cfg, nb_buf *b) {
    const char *model = nb_task_model(t, cfg);
    for (const nb_task_opt *o = t->opts; o && o->name; o++) {
        if (o->kind == NB_TOPT_ALIAS) continue;
        if (o->models && model && !in_csv(o->models, model)) continue; /* not in force */
        char key[128], val[256];
        nb_task_opt_key(o->name, key, sizeof key);
        nb_buf_puts(b, ", ");
        nb_buf_json_str(b, key);
        nb_buf_puts(b, ": ");
        switch (o->kind) {
        case NB_TOPT_INT:
            nb_buf_printf(b, "%d", get_int(cfg->task_opts, o));
            break;
        case NB_TOPT_DOUBLE:
            nb_buf_json_num(b, get_double(cfg->task_opts, o));
            break;
        default:
            nb_task_opt_format(o, cfg->task_opts, val, sizeof val);
            nb_buf_json_str(b, val);
            break;
        }
    }
}

void nb_task_model_label(const nb_task *t, const nb_train_cfg *cfg, char *out, size_t size) {
    const char *model = nb_task_model(t, cfg);
    size_t len = 0;
    if (size) out[0] = '\0';
    for (const nb_task_opt *o = t->opts; o && o->name && cfg->task_opts; o++) {
        if (!o->group || o->kind != NB_TOPT_CHOICE) continue;
        if (o->models && model && !in_csv(o->models, model)) continue; /* not in force */
        const int named = o->group == NB_GROUP_UNLESS_DEFAULT;
        if (named && get_int(cfg->task_opts, o) == (int)o->def) continue;
        char val[128];
        nb_task_opt_format(o, cfg->task_opts, val, sizeof val);
        int w = snprintf(out + len, size - len, "%s%s%s%s", len ? " " : "", named ? "--" : "",
                         named ? o->name : "", named ? " " : "");
        if (w < 0 || (size_t)w >= size - len) break;
        len += (size_t)w;
        w = snprintf(out + len, size - len, "%s", val);
        if (w < 0 || (size_t)w >= size - len) break; /* truncated: what fits */
        len += (size_t)w;
    }
}

const char *nb_task_norm_label(const nb_task *t, const nb_train_cfg *cfg) {
    for (const nb_task_opt *o = t->opts; o && o->name; o++)
        if (o->kind == NB_TOPT_FLAG && o->norm_as && cfg->task_opts && get_int(cfg->task_opts, o))
            return o->norm_as;
    return NULL;
}

const char *nb_task_opt_legacy(const nb_task *t, const char *key) {
    for (const nb_task_opt *o = t ? t->opts : NULL; o && o->name; o++) {
        char k[128];
        nb_task_opt_key(o->name, k, sizeof k);
        if (o->legacy && strcmp(k, key) == 0) return o->legacy;
    }
    return NULL;
}

int nb_task_configure_stored(const nb_task *t, nb_train_cfg *cfg, int norm,
                             const nb_json_object *stored, nb_err *err) {
    /* the model first (the defaults depend on it), as a run's command line would give it */
    const nb_task_opt *sel = selector_of(t);
    nb_given g = {sel ? sel->name : NULL, NULL};
    if (sel) {
        char key[128];
        nb_task_opt_key(sel->name, key, sizeof key);
        g.value = nb_json_get_str(stored, key);
        if (!g.value) return nb_errf(err, "its stored configuration has no '%s'", key);
    }
    if (nb_task_configure(t, cfg, norm, &g, g.value ? 1 : 0, err) != 0) return -1;
    /* then every option in force, as recorded: the values the run had (a task's finish() may
     * have set them past a row's range), so they are set as they are, not range-checked */
    const char *model = nb_task_model(t, cfg);
    for (const nb_task_opt *o = t->opts; o && o->name; o++) {
        if (o->kind == NB_TOPT_ALIAS) continue;
        if (o->models && model && !in_csv(o->models, model)) continue; /* not in force */
        char key[128];
        nb_task_opt_key(o->name, key, sizeof key);
        const char *v = nb_json_get(stored, key), *s = nb_json_get_str(stored, key);
        if (!v && o->legacy && o->kind != NB_TOPT_INT && o->kind != NB_TOPT_DOUBLE)
            v = s = o->legacy; /* recorded before the option existed: what normbench did then */
        if (!v) return nb_errf(err, "its stored configuration has no '%s'", key);
        int ok = 0;
        switch (o->kind) {
        case NB_TOPT_INT: {
            long long x;
            ok = !s && nb_json_get_int(stored, key, &x) && x >= -2147483647LL && x <= 2147483647LL;
            if (ok) set_int(cfg->task_opts, o, (int)x);
            break;
        }
        case NB_TOPT_DOUBLE: {
            double x;
            /* as nb_buf_json_num writes it: a number, or "nan", "inf", "-inf" */
            ok = nb_parse_double(s ? s : v, &x) == 0;
            if (ok) set_double(cfg->task_opts, o, x);
            break;
        }
        case NB_TOPT_FLAG:
            ok = s && (strcmp(s, "on") == 0 || strcmp(s, "off") == 0);
            if (ok) set_int(cfg->task_opts, o, strcmp(s, "on") == 0);
            break;
        case NB_TOPT_STR:
            ok = s != NULL;
            if (ok) set_str(cfg->task_opts, o, s); /* the object's storage: keep it alive */
            break;
        case NB_TOPT_CHOICE:
            for (int i = 0; s && o->choices[i] && !ok; i++)
                if (strcmp(o->choices[i], s) == 0) {
                    set_int(cfg->task_opts, o, i);
                    ok = 1;
                }
            break;
        case NB_TOPT_ALIAS:
            break;
        }
        if (!ok) return nb_errf(err, "its stored configuration's '%s' is not valid: %s", key, v);
    }
    return 0;
}
