/* tests/test_taskopt.c — the tasks' option declarations (tasks/taskopt.h) and the strict
 * number parsing behind them (util/num.h). */
#include "tests/testutil.h"

#include "tasks/task.h"
#include "util/num.h"

/* Decimal numbers only: no spaces, hex, inf or nan; integers without fraction or exponent. */
static void test_numbers(void **state) {
    long long i;
    double d;
    assert_int_equal(nb_parse_int("42", &i), 0);
    assert_int_equal(i, 42);
    assert_int_equal(nb_parse_int("-7", &i), 0);
    assert_int_equal(i, -7);
    const char *bad_int[] = {"",  " 5", "5 ", "0x10", "1e3", "1.0", "+", "9223372036854775808",
                             "5a"};
    for (size_t k = 0; k < sizeof bad_int / sizeof bad_int[0]; k++)
        assert_int_equal(nb_parse_int(bad_int[k], &i), -1);
    assert_int_equal(nb_parse_double("1e-3", &d), 0);
    assert_true(d == 1e-3);
    assert_int_equal(nb_parse_double(".5", &d), 0);
    assert_true(d == 0.5);
    assert_int_equal(nb_parse_double("-2.", &d), 0);
    assert_true(d == -2.0);
    const char *bad_dbl[] = {"",    " 5", "5 ", "0x10",  "inf", "nan", "1e",
                             "1e+", "e5", ".",  "1e400", "--1", "1,5"};
    for (size_t k = 0; k < sizeof bad_dbl / sizeof bad_dbl[0]; k++)
        assert_int_equal(nb_parse_double(bad_dbl[k], &d), -1);
}

/* Every declaration is well formed, and a name means the same kind of option in every task
 * that declares it (sweep decides flag or value by the name alone). */
static void test_declarations(void **state) {
    for (int i = 0; nb_task_at(i); i++) {
        const nb_task *t = nb_task_at(i);
        int selectors = 0;
        for (const nb_task_opt *o = t->opts; o && o->name; o++) {
            assert_non_null(o->help);
            if (o->kind == NB_TOPT_ALIAS) {
                const nb_task_opt *to = nb_task_opt_find(t, o->alias_of);
                assert_non_null(to);
                assert_true(to->kind != NB_TOPT_ALIAS);
                continue;
            }
            assert_true(o->offset < t->opts_size);
            if (o->kind == NB_TOPT_CHOICE) assert_non_null(o->choices);
            selectors += o->selector;
            for (int j = 0; nb_task_at(j); j++) {
                const nb_task_opt *p = nb_task_opt_find(nb_task_at(j), o->name);
                if (!p) continue;
                int f1 = o->kind == NB_TOPT_FLAG;
                int f2 = p->kind == NB_TOPT_FLAG || (p->kind == NB_TOPT_ALIAS && p->alias_val);
                assert_int_equal(f1, f2);
            }
        }
        assert_true(selectors <= 1);
    }
}

/* Defaults, the task's per-norm defaults, aliases and range checks through nb_task_configure. */
static void test_configure(void **state) {
    const nb_task *cifar = nb_task_find("cifar");
    assert_non_null(cifar);
    nb_train_cfg cfg;
    nb_err err;
    memset(&cfg, 0, sizeof cfg);
    cfg.norm.kind = NB_NORM_NONE;
    assert_int_equal(nb_task_configure(cifar, &cfg, NB_NORM_NONE, NULL, 0, &err), 0);
    assert_true(cfg.adam.lr == 3e-4); /* the task's per-norm default */
    nb_buf b = {0};
    nb_task_opts_json(cifar, &cfg, &b);
    assert_non_null(b.p);
    assert_non_null(strstr(b.p, "\"zca\": \"on\""));
    assert_non_null(strstr(b.p, "\"width\": 1"));
    nb_buf_free(&b);
    nb_task_opts_free(&cfg);

    nb_given g[] = {{"no-zca", NULL}, {"width", "0.25"}, {"norm-axes", "chw"}};
    memset(&cfg, 0, sizeof cfg);
    assert_int_equal(nb_task_configure(cifar, &cfg, NB_NORM_RMS, g, 3, &err), 0);
    nb_buf c = {0};
    nb_task_opts_json(cifar, &cfg, &c);
    assert_non_null(strstr(c.p, "\"zca\": \"off\""));
    assert_non_null(strstr(c.p, "\"width\": 0.25"));
    assert_non_null(strstr(c.p, "\"norm_axes\": \"chw\""));
    nb_buf_free(&c);
    nb_task_opts_free(&cfg);

    nb_given bad[] = {{"width", "17"}};
    memset(&cfg, 0, sizeof cfg);
    assert_int_equal(nb_task_configure(cifar, &cfg, NB_NORM_RMS, bad, 1, &err), -1);
    assert_non_null(strstr(err.msg, "'--width' must be between"));
    nb_task_opts_free(&cfg);

    nb_given other[] = {{"dim-word", "3"}};
    memset(&cfg, 0, sizeof cfg);
    assert_int_equal(nb_task_configure(cifar, &cfg, NB_NORM_RMS, other, 1, &err), -1);
    assert_non_null(strstr(err.msg, "option of the task(s) order,mt, not of 'cifar'"));
    nb_task_opts_free(&cfg);

    /* a flag's norm label: reader's --bn-everywhere records batch-everywhere */
    const nb_task *reader = nb_task_find("reader");
    nb_given every[] = {{"bn-everywhere", NULL}};
    memset(&cfg, 0, sizeof cfg);
    cfg.norm.kind = NB_NORM_BATCH;
    assert_int_equal(nb_task_configure(reader, &cfg, NB_NORM_BATCH, every, 1, &err), 0);
    assert_string_equal(nb_task_norm_label(reader, &cfg), "batch-everywhere");
    assert_int_equal(reader->finish(&cfg, every, 1, &err), 0);
    cfg.norm.kind = NB_NORM_RMS;
    assert_int_equal(reader->finish(&cfg, every, 1, &err), -1);
    nb_task_opts_free(&cfg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_declarations),
        cmocka_unit_test(test_configure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
