/* tests/test_train.c — the shared training loop on a toy model: what it records and when, the
 * evaluation cadence, keeping the best parameters, divergence, Ctrl-C, the schedule, and a
 * bit-exact resume from its checkpoint. */
#include "tests/testutil.h"

#include <unistd.h>

#include "tasks/train.h"

/* Toy task: least squares y = w·x with P weights, data fixed, noise from the dropout stream
 * added to the gradient (so that a resume that lost that stream would show). */
enum { P = 5, NDATA = 24, BATCH = 4 };

typedef struct toy {
    nb_layout layout;
    float params[P], grads[P], m[P], v[P];
    float x[NDATA][P], y[NDATA];
    int perm[NDATA];
    /* scripted behaviour and what the callbacks saw */
    int64_t nan_at;       /* step() returns NaN on this call (1-based), 0 never */
    int64_t calls;        /* step() calls */
    const double *script; /* values evaluate() returns for "val_score", in turn */
    int nscript, evals, finals;
    float seen_final[P];    /* params at the final evaluation */
    float seen_eval[16][P]; /* params at each periodic evaluation */
    int64_t sched_t[64];    /* t passed to schedule */
    int nsched, prepared;
    volatile sig_atomic_t *stop_flag;
    int64_t stop_at; /* set *stop_flag when step() is called this many times */
} toy;

static void toy_init(toy *t) {
    memset(t, 0, sizeof *t);
    nb_layout_add(&t->layout, "w", P, 1);
    nb_rng r;
    nb_rng_seed(&r, 9, NB_STREAM_SYNTH);
    for (int i = 0; i < NDATA; i++) {
        double s = 0;
        for (int j = 0; j < P; j++) {
            t->x[i][j] = (float)nb_rng_normal(&r);
            s += (j + 1) * 0.5 * t->x[i][j];
        }
        t->y[i] = (float)s;
        t->perm[i] = i;
    }
}

static void toy_prepare(void *self, nb_rng *init_rng, nb_rng *data_rng) {
    toy *t = self;
    t->prepared++;
    for (int j = 0; j < P; j++)
        t->params[j] = (float)(0.1 * nb_rng_normal(init_rng));
}

static void toy_epoch_begin(void *self, int epoch, nb_rng *data_rng) {
    toy *t = self;
    nb_rng_shuffle(data_rng, t->perm, NDATA);
}

static double toy_step(void *self, int64_t bi, nb_rng *noise) {
    toy *t = self;
    t->calls++;
    if (t->stop_flag && t->calls == t->stop_at) *t->stop_flag = 1;
    if (t->nan_at && t->calls == t->nan_at) return NAN;
    double loss = 0;
    for (int b = 0; b < BATCH; b++) {
        int i = t->perm[bi * BATCH + b];
        double e = -t->y[i];
        for (int j = 0; j < P; j++)
            e += t->params[j] * t->x[i][j];
        loss += 0.5 * e * e / BATCH;
        for (int j = 0; j < P; j++)
            t->grads[j] += (float)(e * t->x[i][j] / BATCH);
    }
    for (int j = 0; j < P; j++)
        t->grads[j] += (float)(1e-3 * nb_rng_normal(noise));
    return loss;
}

static void toy_schedule(void *self, int64_t step, int64_t planned, nb_adam_cfg *adam) {
    toy *t = self;
    if (t->nsched < 64) t->sched_t[t->nsched++] = step;
    adam->lr *= 1.0 - (double)(step - 1) / (double)planned;
}

static int toy_evaluate(void *self, int final, nb_metric *out, int max, nb_err *err) {
    toy *t = self;
    if (final) {
        t->finals++;
        memcpy(t->seen_final, t->params, sizeof t->params);
        out[0] = (nb_metric){"final_score", 0, 0, 42};
        return 1;
    }
    if (t->evals < 16) memcpy(t->seen_eval[t->evals], t->params, sizeof t->params);
    double v = t->script && t->evals < t->nscript ? t->script[t->evals] : 1.0;
    t->evals++;
    out[0] = (nb_metric){"val_score", 0, 0, v};
    out[1] = (nb_metric){"val_loss", 0, 0, v == -1 ? NAN : 0.5};
    return 2;
}

/* A sink that keeps everything it is given. */
typedef struct rec {
    char name[64][32];
    int64_t step[256];
    double value[256];
    char names[256][32];
    int n;
    char ckpt[256];
} rec;

static int rec_record(void *ctx, const nb_metric *m, int n, nb_err *err) {
    rec *r = ctx;
    for (int i = 0; i < n && r->n < 256; i++, r->n++) {
        snprintf(r->names[r->n], sizeof r->names[r->n], "%s", m[i].name);
        r->step[r->n] = m[i].step;
        r->value[r->n] = m[i].value;
    }
    return 0;
}

static const char *rec_ckpt(void *ctx, nb_err *err) {
    rec *r = ctx;
    return r->ckpt[0] ? r->ckpt : NULL;
}

static int count(const rec *r, const char *name) {
    int c = 0;
    for (int i = 0; i < r->n; i++)
        c += strcmp(r->names[i], name) == 0;
    return c;
}

static int find(const rec *r, const char *name, int which) {
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->names[i], name) == 0 && which-- == 0) return i;
    return -1;
}

static nb_trainer make_trainer(toy *t) {
    nb_trainer tr = {.self = t,
                     .params = t->params,
                     .grads = t->grads,
                     .adam_m = t->m,
                     .adam_v = t->v,
                     .layout = &t->layout,
                     .steps_per_epoch = NDATA / BATCH,
                     .extra = {{t->perm, sizeof t->perm}},
                     .nextra = 1,
                     .prepare = toy_prepare,
                     .epoch_begin = toy_epoch_begin,
                     .step = toy_step,
                     .schedule = toy_schedule,
                     .evaluate = toy_evaluate};
    return tr;
}

static nb_train_cfg make_cfg(int epochs) {
    nb_train_cfg c = {.task = "toy", .seed = 5, .epochs = epochs, .batch = BATCH, .log_every = 2};
    nb_adam_cfg_default(&c.adam);
    c.adam.lr = 0.3;
    return c;
}

static void test_epoch_cadence_and_records(void **state) {
    (void)state;
    toy t;
    toy_init(&t);
    nb_trainer tr = make_trainer(&t);
    nb_train_cfg cfg = make_cfg(3);
    rec r = {0};
    nb_sink sink = {.ctx = &r, .record = rec_record};
    nb_status st;
    nb_err err;
    assert_int_equal(nb_train_loop(&cfg, &tr, &sink, &st, &err), 0);
    assert_int_equal(st, NB_STATUS_FINISHED);
    assert_int_equal(t.calls, 18);
    assert_int_equal(t.prepared, 1);
    assert_int_equal(t.evals, 3);                 /* one per epoch */
    assert_int_equal(t.finals, 1);                /* and the final one */
    assert_int_equal(count(&r, "train_loss"), 9); /* every 2 of 18 steps */
    assert_int_equal(count(&r, "epoch"), 3);
    assert_int_equal(count(&r, "ms_per_step"), 3);
    assert_int_equal(count(&r, "final_score"), 1);
    assert_int_equal(r.step[find(&r, "val_score", 1)], 12);
    assert_int_equal(r.step[find(&r, "final_score", 0)], 18);
    /* the schedule saw t = 1..18 in order */
    assert_int_equal(t.nsched, 18);
    for (int i = 0; i < 18; i++)
        assert_int_equal(t.sched_t[i], i + 1);
    /* it learned: the last recorded loss is far below the first */
    double first = r.value[find(&r, "train_loss", 0)], last = r.value[find(&r, "train_loss", 8)];
    assert_true(last < 0.5 * first);
}

static void test_eval_every_keeps_best(void **state) {
    (void)state;
    toy t;
    toy_init(&t);
    static const double script[] = {3.0, 7.0, 5.0, 6.0, 1.0, 2.0};
    t.script = script;
    t.nscript = 6;
    nb_trainer tr = make_trainer(&t);
    tr.eval_every = 4;
    tr.select_metric = "val_score";
    tr.select_max = 1;
    nb_train_cfg cfg = make_cfg(4); /* 24 steps: evaluations at 4, 8, ..., 24 */
    rec r = {0};
    nb_sink sink = {.ctx = &r, .record = rec_record};
    nb_status st;
    nb_err err;
    assert_int_equal(nb_train_loop(&cfg, &tr, &sink, &st, &err), 0);
    assert_int_equal(st, NB_STATUS_FINISHED);
    assert_int_equal(t.evals, 6);
    assert_int_equal(r.step[find(&r, "val_score", 5)], 24);
    /* the final evaluation saw the parameters of the second evaluation (score 7) */
    assert_memory_equal(t.seen_final, t.seen_eval[1], sizeof t.seen_final);
    assert_memory_equal(t.params, t.seen_eval[1], sizeof t.params);
    assert_close(r.value[find(&r, "best_val_score", 5)], 7.0, 0, 0);
    assert_close(r.value[find(&r, "best_val_score", 0)], 3.0, 0, 0);
    /* an evaluation that is not a multiple of eval_every still happens at the end */
    toy_init(&t);
    tr = make_trainer(&t);
    tr.eval_every = 5;
    memset(&r, 0, sizeof r);
    assert_int_equal(nb_train_loop(&cfg, &tr, &sink, &st, &err), 0);
    assert_int_equal(t.evals, 5); /* 5, 10, 15, 20 and the last step, 24 */
    assert_int_equal(r.step[find(&r, "val_score", 4)], 24);
}

static void test_divergence(void **state) {
    (void)state;
    toy t;
    toy_init(&t);
    t.nan_at = 7;
    nb_trainer tr = make_trainer(&t);
    nb_train_cfg cfg = make_cfg(3);
    rec r = {0};
    nb_sink sink = {.ctx = &r, .record = rec_record};
    nb_status st;
    nb_err err;
    assert_int_equal(nb_train_loop(&cfg, &tr, &sink, &st, &err), 0);
    assert_int_equal(st, NB_STATUS_DIVERGED);
    assert_int_equal(t.calls, 7);
    int i = find(&r, "train_loss", count(&r, "train_loss") - 1);
    assert_true(isnan(r.value[i]));
    assert_int_equal(r.step[i], 7);
    assert_non_null(strstr(err.msg, "NaN"));
    /* a non-finite evaluation loss diverges the run too */
    toy_init(&t);
    static const double bad[] = {1.0, -1.0};
    t.script = bad;
    t.nscript = 2;
    tr = make_trainer(&t);
    memset(&r, 0, sizeof r);
    assert_int_equal(nb_train_loop(&cfg, &tr, &sink, &st, &err), 0);
    assert_int_equal(st, NB_STATUS_DIVERGED);
    assert_int_equal(t.calls, 12);
    assert_non_null(strstr(err.msg, "val_loss"));
}

static void test_interrupt_keeps_records(void **state) {
    (void)state;
    toy t;
    toy_init(&t);
    volatile sig_atomic_t stop = 0;
    t.stop_flag = &stop;
    t.stop_at = 9;
    nb_trainer tr = make_trainer(&t);
    nb_train_cfg cfg = make_cfg(3);
    cfg.stop = &stop;
    rec r = {0};
    nb_sink sink = {.ctx = &r, .record = rec_record};
    nb_status st;
    nb_err err;
    assert_int_equal(nb_train_loop(&cfg, &tr, &sink, &st, &err), 0);
    assert_int_equal(st, NB_STATUS_INTERRUPTED);
    assert_int_equal(t.calls, 9);
    assert_int_equal(t.evals, 1);  /* the first epoch's */
    assert_int_equal(t.finals, 0); /* no final evaluation for an interrupted run */
    int i = find(&r, "train_loss", count(&r, "train_loss") - 1);
    assert_int_equal(r.step[i], 9); /* the partial window (step 9) is kept */
    assert_int_equal(r.step[find(&r, "ms_per_step", 1)], 9);
}

/* An uninterrupted run and a run stopped mid-epoch 2 then resumed from the end-of-epoch-1
 * checkpoint record the same parameters, bit for bit, and the same later metrics. */
static void test_resume_is_bit_exact(void **state) {
    (void)state;
    char dir[] = "/tmp/nb-test-train-XXXXXX";
    assert_non_null(mkdtemp(dir));
    nb_status st;
    nb_err err;

    toy a;
    toy_init(&a);
    nb_trainer ta = make_trainer(&a);
    ta.eval_every = 5;
    ta.select_metric = "val_score";
    nb_train_cfg cfg = make_cfg(3);
    rec ra = {0};
    nb_sink sa = {.ctx = &ra, .record = rec_record};
    assert_int_equal(nb_train_loop(&cfg, &ta, &sa, &st, &err), 0);

    toy b;
    toy_init(&b);
    volatile sig_atomic_t stop = 0;
    b.stop_flag = &stop;
    b.stop_at = 9;
    nb_trainer tb = make_trainer(&b);
    tb.eval_every = 5;
    tb.select_metric = "val_score";
    nb_train_cfg cb = cfg;
    cb.stop = &stop;
    rec rb = {0};
    snprintf(rb.ckpt, sizeof rb.ckpt, "%s/run.ckpt", dir);
    nb_sink sb = {.ctx = &rb, .record = rec_record, .checkpoint_path = rec_ckpt};
    assert_int_equal(nb_train_loop(&cb, &tb, &sb, &st, &err), 0);
    assert_int_equal(st, NB_STATUS_INTERRUPTED);

    /* a fresh process: new model state, resumed from the checkpoint */
    toy c;
    toy_init(&c);
    nb_trainer tc = make_trainer(&c);
    tc.eval_every = 5;
    tc.select_metric = "val_score";
    nb_train_cfg cc = cfg;
    cc.resume_from = rb.ckpt;
    rec rc = {0};
    nb_sink sc = {.ctx = &rc, .record = rec_record};
    assert_int_equal(nb_train_loop(&cc, &tc, &sc, &st, &err), 0);
    assert_int_equal(st, NB_STATUS_FINISHED);
    assert_int_equal(c.prepared, 0); /* a resumed run is not prepared again */
    assert_int_equal(c.calls, 12);   /* epochs 2 and 3 */
    assert_memory_equal(c.params, a.params, sizeof a.params);
    assert_memory_equal(c.m, a.m, sizeof a.m);
    assert_memory_equal(c.seen_final, a.seen_final, sizeof a.seen_final);
    /* the resumed run's train_loss records equal the uninterrupted run's from step 8 on */
    int na = count(&ra, "train_loss"), nc = count(&rc, "train_loss");
    assert_int_equal(nc, 6);
    for (int k = 0; k < nc; k++) {
        int i = find(&ra, "train_loss", na - nc + k), j = find(&rc, "train_loss", k);
        assert_int_equal(ra.step[i], rc.step[j]);
        assert_memory_equal(&ra.value[i], &rc.value[j], sizeof(double));
    }
    unlink(rb.ckpt);
    rmdir(dir);
}

static void test_no_full_batch_is_an_error(void **state) {
    (void)state;
    toy t;
    toy_init(&t);
    nb_trainer tr = make_trainer(&t);
    tr.steps_per_epoch = 0;
    nb_train_cfg cfg = make_cfg(1);
    rec r = {0};
    nb_sink sink = {.ctx = &r, .record = rec_record};
    nb_status st;
    nb_err err;
    assert_int_equal(nb_train_loop(&cfg, &tr, &sink, &st, &err), -1);
    assert_non_null(strstr(err.msg, "no full batch"));
    assert_int_equal(t.calls, 0);
}

/* The two global clip rules at threshold 10 (the reader's): the code's compares the norm with
 * 10^2 and scales by 10/sqrt(norm + 1e-8); the standard one scales to norm 10. */
static void test_clip_rules(void **state) {
    (void)state;
    static const double norms[] = {5, 50, 150, 1e4};
    static const double code[] = {1, 1, 0.81649658092772603, 0.1}; /* 10/sqrt(150), 10/100 */
    static const double standard[] = {1, 0.2, 1.0 / 15, 1e-3};
    for (int i = 0; i < 4; i++) {
        assert_close(nb_clip_factor(NB_CLIP_CODE, norms[i], 10), code[i], 1e-10, 0);
        assert_close(nb_clip_factor(NB_CLIP_STANDARD, norms[i], 10), standard[i], 1e-15, 0);
        assert_close(nb_clip_factor(NB_CLIP_CODE, norms[i], 0), 1, 0, 0); /* clip off */
    }
    assert_close(nb_clip_factor(NB_CLIP_CODE, NAN, 10), 1, 0, 0);
    /* through the update: gradient (3,4)*k has norm 5k; the returned norm is the one before
     * clipping, the gradient leaves with norm 5k*scale */
    for (int rule = 0; rule < 2; rule++)
        for (int i = 0; i < 4; i++) {
            nb_layout l = {0};
            nb_layout_add(&l, "a", 1, 1);
            nb_layout_add(&l, "frozen", 1, 0); /* not in the norm, never scaled */
            nb_layout_add(&l, "b", 1, 1);
            float p[48] = {0}, g[48] = {0}, m[48] = {0}, v[48] = {0};
            const double k = norms[i] / 5;
            g[l.t[0].off] = (float)(3 * k);
            g[l.t[1].off] = 7;
            g[l.t[2].off] = (float)(4 * k);
            nb_trainer t = {.params = p,
                            .grads = g,
                            .adam_m = m,
                            .adam_v = v,
                            .layout = &l,
                            .clip_rule = (nb_clip_rule)rule};
            nb_adam_cfg a;
            nb_adam_cfg_default(&a);
            double scale;
            double n = nb_train_update_clip(&t, 10, &a, 1, 1, &scale);
            assert_close(n, norms[i], 1e-6, 0);
            const double want = rule == NB_CLIP_CODE ? code[i] : standard[i];
            assert_close(scale, want, 1e-6, 0);
            double after = hypot(g[l.t[0].off], g[l.t[2].off]);
            assert_close(after, norms[i] * want, 1e-5, 0);
            assert_close(g[l.t[1].off], 7, 0, 0);
            if (rule == NB_CLIP_CODE && i >= 2) assert_close(after, 10 * sqrt(norms[i]), 1e-5, 0);
        }
}

/* Every logged step records grad_norm and clip_scale beside train_loss: means over the window
 * of the norm before clipping and of the factor applied. */
static void test_records_grad_norm(void **state) {
    (void)state;
    toy t;
    toy_init(&t);
    nb_trainer tr = make_trainer(&t);
    nb_train_cfg cfg = make_cfg(1); /* 6 steps, logged every 2 */
    cfg.clip = 0.5;
    rec r = {0};
    nb_sink sink = {.ctx = &r, .record = rec_record};
    nb_status st;
    nb_err err;
    assert_int_equal(nb_train_loop(&cfg, &tr, &sink, &st, &err), 0);
    assert_int_equal(count(&r, "grad_norm"), 3);
    assert_int_equal(count(&r, "clip_scale"), 3);
    for (int k = 0; k < 3; k++) {
        int i = find(&r, "grad_norm", k), j = find(&r, "clip_scale", k);
        assert_int_equal(r.step[i], r.step[find(&r, "train_loss", k)]);
        assert_true(r.value[i] > 0 && isfinite(r.value[i]));
        assert_true(r.value[j] > 0 && r.value[j] <= 1);
    }
    /* the toy's first gradients are large (norm well above 0.5): clipping fired, and the mean
     * factor says by how much */
    assert_true(r.value[find(&r, "grad_norm", 0)] > 1);
    assert_true(r.value[find(&r, "clip_scale", 0)] < 0.5);
    /* without clipping the factor is 1 */
    toy_init(&t);
    tr = make_trainer(&t);
    cfg.clip = 0;
    memset(&r, 0, sizeof r);
    assert_int_equal(nb_train_loop(&cfg, &tr, &sink, &st, &err), 0);
    for (int k = 0; k < 3; k++)
        assert_close(r.value[find(&r, "clip_scale", k)], 1, 0, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epoch_cadence_and_records),
        cmocka_unit_test(test_eval_every_keeps_best),
        cmocka_unit_test(test_divergence),
        cmocka_unit_test(test_interrupt_keeps_records),
        cmocka_unit_test(test_resume_is_bit_exact),
        cmocka_unit_test(test_no_full_batch_is_an_error),
        cmocka_unit_test(test_clip_rules),
        cmocka_unit_test(test_records_grad_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
