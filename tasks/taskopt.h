/* tasks/taskopt.h — a task's own options, declared once in the task's file.
 *
 * A task keeps its own configuration in a struct of its own (tasks/cifar.c: cifar_opts) and
 * describes each field as an nb_task_opt row: the flag's name, its kind, where the value goes
 * (offsetof), its default, its range or choices and its help. Everything else comes from these
 * rows: `run`'s parsing (cmd/ parses the common options and the chosen task's rows, with no
 * knowledge of any task), the usage error for an option given to a task or model that does not
 * take it, `sweep`'s knowledge of which options are flags, `run --help` and `help run TASK`
 * (defaults shown per norm and per model where they differ), and the run's configuration JSON,
 * where every option in force is a top-level key named as the flag in snake_case
 * (--clip-tensor -> clip_tensor).
 *
 * Defaults: a row's `def` is the default; a task whose paper code uses a different value per
 * norm or per model sets it in its defaults() hook, which runs after the rows' defaults are in
 * place and after the model (the task's selector option, e.g. mt's --model) is known.
 *
 * Values live in the struct as: int (INT; CHOICE as the index into choices; FLAG as 0/1),
 * double (DOUBLE), const char * (STR, pointing at the command line's storage). */
#ifndef NB_TASKS_TASKOPT_H
#define NB_TASKS_TASKOPT_H

#include <stddef.h>

#include "util/err.h"
#include "util/json.h"

typedef enum nb_topt_kind {
    NB_TOPT_INT,
    NB_TOPT_DOUBLE,
    NB_TOPT_CHOICE,
    NB_TOPT_FLAG,
    NB_TOPT_STR,
    NB_TOPT_ALIAS /* another spelling of an option: --no-zca for --zca off */
} nb_topt_kind;

typedef struct nb_task_opt {
    const char *name; /* the flag without "--"; snake_case of it is the JSON key */
    nb_topt_kind kind;
    size_t offset; /* offsetof(the task's struct, field) */
    const char *metavar;
    const char *help;
    const char *const *choices; /* CHOICE: the values, NULL-terminated */
    double min, max;            /* INT, DOUBLE: the valid range, inclusive */
    double def;                 /* default: the number, the choice's index, or 0/1 for a flag */
    const char *def_str;        /* STR: default */
    /* Which models take the option ("a,b": values of the task's selector option), NULL: all. */
    const char *models;
    int selector; /* CHOICE: this option picks the model (at most one per task) */
    /* CHOICE: runs that differ in this option are different models (mt's --model,
     * --norm-position, --preset): the run records its value in the tag "model" and `report`
     * and `plot` compare runs within it (nb_task_model_label); NB_GROUP_UNLESS_DEFAULT: only
     * where its value is not the default (mt's --src-eos: "--src-eos off" in the label) */
    int group;
    const char *norm_as;   /* FLAG: when on, the run's norm is recorded under this name */
    const char *alias_of;  /* ALIAS: the option it stands for */
    const char *alias_val; /* ALIAS: the value it gives; NULL: it takes a value of its own */
    /* CHOICE, FLAG ("on"/"off"), STR: what a run recorded before the option existed did (cifar's
     * --conv: "im2col"): such a run's stored configuration, without the key, is resumed with it;
     * NULL: a configuration without the key is refused (recorded by another normbench) */
    const char *legacy;
} nb_task_opt;

/* nb_task_opt.group: an option that labels the model only when it is not at its default (an
 * option that keeps a former behaviour: runs with it are compared apart, the others' labels
 * stay as they were) */
#define NB_GROUP_UNLESS_DEFAULT 2

/* An option given on the command line: its name as typed and its value (NULL for a flag). */
typedef struct nb_given {
    const char *name;
    const char *value;
} nb_given;

struct nb_task;
struct nb_train_cfg;

/* The task's row called name (an alias row too), or NULL. */
const nb_task_opt *nb_task_opt_find(const struct nb_task *t, const char *name);

/* The run's model label for `report` and `plot`: the values of the task's group options in
 * force, in declaration order, joined by spaces ("transformer small post"); "" when the task has
 * none. */
void nb_task_model_label(const struct nb_task *t, const struct nb_train_cfg *cfg, char *out,
                         size_t size);

/* The legacy value (nb_task_opt.legacy) of task t's option whose configuration key is key, or
 * NULL. */
const char *nb_task_opt_legacy(const struct nb_task *t, const char *key);

/* Whether name is a flag (takes no value) in any task: sweep's knowledge of which options take
 * values. *known is set when any task declares the name. */
int nb_task_opt_is_flag(const char *name, int *known);

/* Writes into out the comma-separated tasks that take the option name ("" when none). */
void nb_task_opt_takers(const char *name, char *out, size_t size);

/* Prepares cfg->task_opts for task t: allocates the task's struct, puts the rows' defaults in,
 * sets the model from the given options (when the task has a selector), calls t->defaults(cfg,
 * norm) (which sets the common options' task defaults too), then applies the given task
 * options: converts and range-checks each value, and refuses an option the task or the chosen
 * model does not take. Returns 0, or -1 with err set to a usage error (the caller exits 2).
 * cfg->norm.kind must be set; cfg->task_opts is freed by nb_task_opts_free. */
int nb_task_configure(const struct nb_task *t, struct nb_train_cfg *cfg, int norm,
                      const nb_given *given, int ngiven, nb_err *err);
void nb_task_opts_free(struct nb_train_cfg *cfg);

/* Prepares cfg->task_opts for task t as a run recorded them: nb_task_configure with the model
 * its stored configuration names (the object stored, util/json.h's reader), then every option
 * in force set to its recorded value (STR values point into stored: keep it alive). The common
 * options' fields are the caller's. Returns 0, or -1 with err naming a key missing or not
 * valid. */
int nb_task_configure_stored(const struct nb_task *t, struct nb_train_cfg *cfg, int norm,
                             const nb_json_object *stored, nb_err *err);

/* Appends the task's options in force to a JSON object being written (", key: value" for each;
 * flags as "on"/"off", choices as their names). */
void nb_task_opts_json(const struct nb_task *t, const struct nb_train_cfg *cfg, nb_buf *b);

/* The name the run's norm is recorded under: a set flag's norm_as, else NULL. */
const char *nb_task_norm_label(const struct nb_task *t, const struct nb_train_cfg *cfg);

/* The model (the selector's value), or NULL when the task has no selector. */
const char *nb_task_model(const struct nb_task *t, const struct nb_train_cfg *cfg);

/* Formats the value of row o (not an alias) in the struct at opts into out. */
void nb_task_opt_format(const nb_task_opt *o, const void *opts, char *out, size_t size);

/* The snake_case JSON key of a flag name (--clip-tensor -> clip_tensor) into out. */
void nb_task_opt_key(const char *name, char *out, size_t size);

#endif
