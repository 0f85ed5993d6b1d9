/* tasks/train.c — the shared training loop (see tasks/train.h). */
#include "tasks/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/file.h"

/* Everything the loop tracks, so that helpers can take one pointer. */
typedef struct loop {
    const nb_train_cfg *cfg;
    const nb_trainer *t;
    const nb_sink *sink;
    double t0;            /* wall clock origin (moved back on resume) */
    double train_time;    /* seconds inside training steps */
    double proc_time;     /* the same, in this process only (not restored on resume) */
    int64_t step;         /* steps done */
    int64_t planned;      /* steps to do */
    int epochs;           /* epochs to do */
    double loss_acc;      /* training loss not yet recorded */
    int64_t loss_n;       /* and its count */
    double last_loss;     /* last recorded training loss */
    double clip_acc[2];   /* grad_norm and clip_scale not yet recorded (over loss_n steps) */
    float *best;          /* best parameters (select_metric), or NULL */
    double best_state[2]; /* [0] best value, [1] 1 when one was seen */
    int64_t last_eval;    /* step of the last periodic evaluation */
    int64_t step0;        /* the step this process started from (a resume's checkpoint) */
} loop;

static void progress(loop *L, int epoch, double loss, const char *phase) {
    if (!L->sink->progress) return;
    nb_progress p = {epoch,
                     L->epochs,
                     L->step,
                     L->planned,
                     loss,
                     nb_now() - L->t0,
                     (double)L->step / (L->train_time > 0 ? L->train_time : 1e-9),
                     phase};
    L->sink->progress(L->sink->ctx, &p);
}

static int record(loop *L, nb_metric *m, int n, nb_err *err) {
    double wall = nb_now() - L->t0;
    for (int i = 0; i < n; i++) {
        m[i].step = L->step;
        m[i].wall = wall;
    }
    return n > 0 ? L->sink->record(L->sink->ctx, m, n, err) : 0;
}

/* The training records of the steps since the last ones (L->loss_n > 0) into m (room for 3):
 * train_loss, and grad_norm and clip_scale when the update ran on the host; clears the
 * clipping accumulators. Returns how many. */
static int train_records(loop *L, nb_metric *m) {
    const double n = (double)L->loss_n;
    int k = 0;
    m[k++] = (nb_metric){"train_loss", 0, 0, L->loss_acc / n};
    if (!L->t->update) {
        m[k++] = (nb_metric){"grad_norm", 0, 0, L->clip_acc[0] / n};
        m[k++] = (nb_metric){"clip_scale", 0, 0, L->clip_acc[1] / n};
    }
    L->clip_acc[0] = L->clip_acc[1] = 0;
    return k;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Runs one evaluation and records it with the time per step so far. Returns 0, 1 when a loss
 * was not finite (the caller stops the run as diverged, err set), or -1 with err. */
static int evaluate(loop *L, int epoch, int final, nb_err *err) {
    const nb_trainer *t = L->t;
    nb_metric m[NB_TRAIN_MAX_EVAL + 4];
    progress(L, epoch, L->last_loss, "eval");
    int n = t->evaluate(t->self, final, m, NB_TRAIN_MAX_EVAL, err);
    if (n < 0) return -1;
    if (n > NB_TRAIN_MAX_EVAL) n = NB_TRAIN_MAX_EVAL;
    int diverged = -1, sel = -1;
    for (int i = 0; i < n; i++) {
        if (!isfinite(m[i].value) && (ends_with(m[i].name, "loss") || ends_with(m[i].name, "nll")))
            diverged = i;
        if (t->select_metric && strcmp(m[i].name, t->select_metric) == 0) sel = i;
    }
    char best_name[80] = "";
    if (!final && sel >= 0 && L->best && isfinite(m[sel].value)) {
        double v = m[sel].value;
        int better =
            !L->best_state[1] || (t->select_max ? v > L->best_state[0] : v < L->best_state[0]);
        if (better) {
            L->best_state[0] = v;
            L->best_state[1] = 1;
            if (t->sync) t->sync(t->self, 0);
            memcpy(L->best, t->params, sizeof(float) * t->layout->total);
        }
        snprintf(best_name, sizeof best_name, "best_%s", t->select_metric);
        m[n++] = (nb_metric){best_name, 0, 0, L->best_state[0]};
    }
    if (!final && L->step > 0)
        m[n++] = (nb_metric){"ms_per_step", 0, 0, 1e3 * L->train_time / (double)L->step};
    /* data-parallel: the part of it spent summing the gradients over the ranks (over the steps
     * of this process: a resumed run's ranks counted from its checkpoint) */
    if (!final && L->step > L->step0 && L->cfg->dist && L->cfg->dist->size > 1)
        m[n++] = (nb_metric){"allreduce_ms_per_step", 0, 0,
                             1e3 * L->cfg->dist->comm_seconds / (double)(L->step - L->step0)};
    if (!final && t->tokens && L->proc_time > 0)
        m[n++] = (nb_metric){"tokens_per_s", 0, 0, t->tokens(t->self) / L->proc_time};
    if (record(L, m, n, err) != 0) return -1;
    if (diverged >= 0) {
        nb_errf(err, "evaluation metric '%s' is not finite at step %lld", m[diverged].name,
                (long long)L->step);
        return 1;
    }
    return 0;
}

double nb_clip_factor(nb_clip_rule rule, double norm, double clip) {
    if (!(clip > 0) || !isfinite(norm)) return 1;
    if (rule == NB_CLIP_CODE) return norm > clip * clip ? clip / sqrt(norm + 1e-8) : 1;
    return norm > clip ? clip / norm : 1;
}

/* The global L2 norm of the trainable gradients, accumulated in double. */
static double grad_norm(const nb_trainer *t) {
    double ss = 0;
    for (int i = 0; i < t->layout->count; i++) {
        const nb_tensor *te = &t->layout->t[i];
        if (!te->trainable) continue;
        const float *g = t->grads + te->off;
        for (size_t j = 0; j < te->n; j++)
            ss += (double)g[j] * g[j];
    }
    return sqrt(ss);
}

double nb_train_update_clip(const nb_trainer *t, double clip, const nb_adam_cfg *adam, int64_t step,
                            int64_t planned, double *scale) {
    nb_adam_cfg a = *adam;
    if (t->schedule) t->schedule(t->self, step, planned, &a);
    if (t->update) {
        t->update(t->self, &a, step);
        if (scale) *scale = NAN;
        return NAN;
    }
    const double norm = grad_norm(t);
    double s = nb_clip_factor(t->clip_rule, norm, clip);
    if (s != 1) {
        const float f = (float)s;
        for (int i = 0; i < t->layout->count; i++) {
            const nb_tensor *te = &t->layout->t[i];
            if (!te->trainable) continue;
            float *g = t->grads + te->off;
            for (size_t j = 0; j < te->n; j++)
                g[j] *= f;
        }
    }
    if (t->clip_per_tensor > 0 &&
        nb_clip_per_tensor(t->grads, t->layout, t->clip_per_tensor) > t->clip_per_tensor)
        s = norm > 0 ? grad_norm(t) / norm : 1;
    if (scale) *scale = s;
    nb_adam_step_layout(t->params, t->grads, t->adam_m, t->adam_v, t->layout, (long)step, &a);
    return norm;
}

void nb_train_update(const nb_trainer *t, double clip, const nb_adam_cfg *adam, int64_t step,
                     int64_t planned) {
    (void)nb_train_update_clip(t, clip, adam, step, planned, NULL);
}

double nb_train_dist_sum(nb_dist *D, const nb_trainer *t, double loss, int rows, int batch,
                         int *stop) {
    size_t P = t->layout->total;
    double red[2] = {loss * rows / batch, stop && *stop ? 1 : 0};
    double tc = nb_now();
    D->sum_d(D->ctx, red, 2);
    if (t->grads_d) {
        D->sum_d(D->ctx, t->grads_d, t->ngrads_d);
        D->comm_seconds += nb_now() - tc;
        D->comm_bytes = (double)t->ngrads_d * sizeof(double);
        t->grads_finish(t->self);
    } else {
        D->sum_f(D->ctx, t->grads, P);
        D->comm_seconds += nb_now() - tc;
        D->comm_bytes = (double)P * sizeof(float);
    }
    if (stop) *stop = red[1] > 0;
    return red[0];
}

void nb_train_dist_buffers(const nb_dist *D, const nb_trainer *t) {
    for (int k = 0; !D->bn_sync && k < t->layout->count; k++)
        if (!t->layout->t[k].trainable)
            D->bcast_f(D->ctx, t->params + t->layout->t[k].off, t->layout->t[k].n);
}

void nb_train_fp(nb_trainer *t, const char *name, const void *p, size_t n) {
    /* four lanes of multiply-xorshift over 8-byte words, the tail byte by byte */
    uint64_t h[4] = {0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL, 0x165667b19e3779f9ULL,
                     0x27d4eb2f165667c5ULL};
    const unsigned char *b = p;
    size_t i = 0;
    for (; p && i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * k, 8);
            h[k] = (h[k] ^ w) * 0x100000001b3ULL;
            h[k] ^= h[k] >> 29;
        }
    for (; p && i < n; i++)
        h[i & 3] = (h[i & 3] ^ b[i]) * 0x100000001b3ULL;
    uint64_t x = (uint64_t)n;
    for (int k = 0; k < 4; k++) {
        x = (x ^ h[k]) * 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
    }
    size_t len = strlen(t->data_fp);
    snprintf(t->data_fp + len, sizeof t->data_fp - len, "%s %zu %016llx\n", name, n,
             (unsigned long long)x);
}

int nb_train_loop(const nb_train_cfg *cfg, const nb_trainer *t, const nb_sink *sink,
                  nb_status *status, nb_err *err) {
    int rc = -1;
    loop L = {.cfg = cfg, .t = t, .sink = sink, .t0 = nb_now(), .last_loss = NAN};
    size_t P = t->layout->total;
    /* data-parallel: this process's rows of every batch */
    nb_dist *D = cfg->dist && cfg->dist->size > 1 ? cfg->dist : NULL;
    int shard_lo = 0, shard_hi = cfg->batch, stop_all = 0;
    if (D) {
        if (!t->step_shard) {
            nb_errf(err, "task '%s' cannot train over several processes", cfg->task);
            nb_hintf(err, "run it without mpirun, or as a sweep (each job in one rank)");
            return -1;
        }
        /* the end of the set-up: every rank loaded the same data (or every rank stops) */
        if (D->agree && D->agree(D->ctx, t->data_fp, err) != 0) return -1;
        shard_lo = (int)((int64_t)cfg->batch * D->rank / D->size);
        shard_hi = (int)((int64_t)cfg->batch * (D->rank + 1) / D->size);
    }
    if (t->steps_per_epoch <= 0) {
        nb_errf(err, "the training set holds no full batch of %d examples", cfg->batch);
        nb_hintf(err, "lower --batch or raise --subset");
        return -1;
    }
    if (t->select_metric) {
        L.best = malloc(sizeof(float) * P);
        if (!L.best) return nb_errf(err, "out of memory for the best parameters"), -1;
        memcpy(L.best, t->params, sizeof(float) * P);
    }

    nb_rng init_rng, data_rng, noise_rng;
    nb_rng_seed(&init_rng, cfg->seed, NB_STREAM_INIT);
    nb_rng_seed(&data_rng, cfg->seed, NB_STREAM_DATA);
    nb_rng_seed(&noise_rng, cfg->seed, NB_STREAM_DROPOUT);

    /* Checkpoint contents: parameters, Adam moments, the best parameters and value, then the
     * task's own state. */
    nb_ckpt_blob blobs[6 + NB_TRAIN_MAX_EXTRA];
    int nb = 0;
    blobs[nb++] = (nb_ckpt_blob){t->params, P * sizeof(float)};
    blobs[nb++] = (nb_ckpt_blob){t->adam_m, P * sizeof(float)};
    blobs[nb++] = (nb_ckpt_blob){t->adam_v, P * sizeof(float)};
    if (L.best) {
        blobs[nb++] = (nb_ckpt_blob){L.best, P * sizeof(float)};
        blobs[nb++] = (nb_ckpt_blob){L.best_state, sizeof L.best_state};
    }
    blobs[nb++] = (nb_ckpt_blob){L.clip_acc, sizeof L.clip_acc};
    for (int i = 0; i < t->nextra && i < NB_TRAIN_MAX_EXTRA; i++)
        blobs[nb++] = t->extra[i];

    L.planned = cfg->steps > 0 ? cfg->steps : t->steps_per_epoch * cfg->epochs;
    L.epochs = (int)((L.planned + t->steps_per_epoch - 1) / t->steps_per_epoch);
    int first_epoch = 1;
    int64_t first_bi = 0; /* a mid-epoch checkpoint's position in its epoch (resume_mid_epoch) */
    if (cfg->resume_from) {
        nb_ckpt_state st;
        if (nb_ckpt_read(cfg->resume_from, sink->ckpt_ident, &st, blobs, nb, err) != 0) goto out;
        L.step = L.step0 = st.step;
        first_epoch = st.epoch + 1;
        L.train_time = st.train_time;
        L.loss_acc = st.loss_acc;
        L.loss_n = st.loss_n;
        L.last_loss = st.last_loss;
        init_rng = st.rng[0];
        data_rng = st.rng[1];
        noise_rng = st.rng[2];
        L.t0 = nb_now() - st.wall;
        L.last_eval = t->eval_every > 0 ? L.step - L.step % t->eval_every : L.step;
        first_bi = L.step - (int64_t)st.epoch * t->steps_per_epoch;
        if (!t->resume_mid_epoch || first_bi < 0 || first_bi > t->steps_per_epoch) first_bi = 0;
    } else if (t->prepare) {
        t->prepare(t->self, &init_rng, &data_rng);
    }
    if (t->sync) t->sync(t->self, 1);
    *status = NB_STATUS_FINISHED;

    int epoch = first_epoch;
    /* (a mid-epoch checkpoint taken at the last step still closes its epoch) */
    for (; epoch <= L.epochs && (L.step < L.planned || (epoch == first_epoch && first_bi > 0));
         epoch++) {
        const int64_t bi0 = epoch == first_epoch ? first_bi : 0;
        if (t->epoch_begin && bi0 == 0) t->epoch_begin(t->self, epoch, &data_rng);
        double epoch_train0 = L.train_time;
        for (int64_t bi = bi0; bi < t->steps_per_epoch && L.step < L.planned; bi++) {
            double ts = nb_now();
            if (!t->update) memset(t->grads, 0, sizeof(float) * P);
            if (t->grads_d) memset(t->grads_d, 0, sizeof(double) * t->ngrads_d);
            double loss;
            if (D) {
                /* this rank's rows, then the sums over the ranks: the loss (weighted by the
                 * rows) with the stop request, and every gradient in one fused buffer */
                loss = t->step_shard(t->self, bi, shard_lo, shard_hi, &noise_rng);
                stop_all = cfg->stop && *cfg->stop;
                if (t->shard_loss_share)
                    loss = nb_train_dist_sum(D, t, loss, 1, 1, &stop_all);
                else
                    loss =
                        nb_train_dist_sum(D, t, loss, shard_hi - shard_lo, cfg->batch, &stop_all);
            } else {
                loss = t->step(t->self, bi, &noise_rng);
                if (t->grads_d) t->grads_finish(t->self);
            }
            if (!isfinite(loss)) {
                L.step++;
                nb_metric m = {"train_loss", 0, 0, loss};
                if (record(&L, &m, 1, err) != 0) goto out;
                *status = NB_STATUS_DIVERGED;
                nb_errf(err, "training loss became %s at step %lld",
                        isnan(loss) ? "NaN" : "infinite", (long long)L.step);
                rc = 0;
                goto out;
            }
            L.step++;
            double scale,
                norm = nb_train_update_clip(t, cfg->clip, &cfg->adam, L.step, L.planned, &scale);
            if (D) nb_train_dist_buffers(D, t);
            L.train_time += nb_now() - ts;
            L.proc_time += nb_now() - ts;
            L.loss_acc += loss;
            L.clip_acc[0] += norm;
            L.clip_acc[1] += scale;
            L.loss_n++;
            if (L.step % cfg->log_every == 0 || L.step == L.planned) {
                L.last_loss = L.loss_acc / (double)L.loss_n;
                nb_metric m[3];
                int n = train_records(&L, m);
                if (record(&L, m, n, err) != 0) goto out;
                L.loss_acc = 0;
                L.loss_n = 0;
            }
            progress(&L, epoch, isnan(L.last_loss) ? loss : L.last_loss, "train");
            if (D ? stop_all : cfg->stop && *cfg->stop) {
                *status = NB_STATUS_INTERRUPTED;
                break;
            }
            if (t->eval_every > 0 && L.step % t->eval_every == 0) {
                L.last_eval = L.step;
                int e = evaluate(&L, epoch, 0, err);
                if (e < 0) goto out;
                if (e > 0) {
                    *status = NB_STATUS_DIVERGED;
                    rc = 0;
                    goto out;
                }
            }
        }
        if (*status == NB_STATUS_INTERRUPTED) {
            int saved = 0;
            if (t->resume_mid_epoch) {
                /* the evaluation due at this step, as the uninterrupted run makes it, then a
                 * checkpoint here: the epoch in progress is resumable */
                if (t->eval_every > 0 && L.step % t->eval_every == 0 && L.last_eval != L.step) {
                    L.last_eval = L.step;
                    int e = evaluate(&L, epoch, 0, err);
                    if (e < 0) goto out;
                    if (e > 0) {
                        *status = NB_STATUS_DIVERGED;
                        rc = 0;
                        goto out;
                    }
                }
                const char *ck =
                    sink->checkpoint_path ? sink->checkpoint_path(sink->ctx, err) : NULL;
                if (sink->checkpoint_path && !ck) goto out;
                if (ck) {
                    if (t->sync) t->sync(t->self, 0);
                    nb_ckpt_state st = {L.step,       epoch - 1,
                                        L.train_time, nb_now() - L.t0,
                                        L.loss_acc,   L.loss_n,
                                        L.last_loss,  {init_rng, data_rng, noise_rng, {{0}}}};
                    if (nb_ckpt_write(ck, sink->ckpt_ident, &st, blobs, nb, err) != 0) goto out;
                    if (sink->checkpoint_saved && sink->checkpoint_saved(sink->ctx, ck, err) != 0)
                        goto out;
                    saved = 1;
                }
            }
            /* Keep what the partial epoch measured (the training loss since the last record:
             * unless a checkpoint here leaves it to the resumed run); skip the evaluation. */
            nb_metric m[4];
            int n = 0;
            if (L.loss_n > 0 && !saved) n = train_records(&L, m);
            if (L.step > 0)
                m[n++] = (nb_metric){"ms_per_step", 0, 0, 1e3 * L.train_time / (double)L.step};
            if (record(&L, m, n, err) != 0) goto out;
            break;
        }
        nb_metric em[] = {{"epoch", 0, 0, (double)epoch},
                          {"epoch_seconds", 0, 0, L.train_time - epoch_train0}};
        if (record(&L, em, 2, err) != 0) goto out;
        if (t->eval_every == 0) {
            int e = evaluate(&L, epoch, 0, err);
            if (e < 0) goto out;
            if (e > 0) {
                *status = NB_STATUS_DIVERGED;
                rc = 0;
                goto out;
            }
        }
        /* Everything the next epoch depends on, for `run --resume`. */
        const char *ck = sink->checkpoint_path ? sink->checkpoint_path(sink->ctx, err) : NULL;
        if (sink->checkpoint_path && !ck) goto out;
        if (ck && L.step < L.planned) {
            if (t->sync) t->sync(t->self, 0);
            nb_ckpt_state st = {
                L.step,     epoch,    L.train_time, nb_now() - L.t0,
                L.loss_acc, L.loss_n, L.last_loss,  {init_rng, data_rng, noise_rng, {{0}}}};
            if (nb_ckpt_write(ck, sink->ckpt_ident, &st, blobs, nb, err) != 0) goto out;
            if (sink->checkpoint_saved && sink->checkpoint_saved(sink->ctx, ck, err) != 0) goto out;
        }
    }
    if (*status == NB_STATUS_FINISHED) {
        int last = epoch > L.epochs ? L.epochs : epoch;
        if (t->eval_every > 0 && L.last_eval != L.step) {
            int e = evaluate(&L, last, 0, err);
            if (e < 0) goto out;
            if (e > 0) {
                *status = NB_STATUS_DIVERGED;
                rc = 0;
                goto out;
            }
        }
        if (L.best && L.best_state[1]) {
            memcpy(t->params, L.best, sizeof(float) * P);
            if (t->sync) t->sync(t->self, 1);
        }
        int e = evaluate(&L, last, 1, err);
        if (e < 0) goto out;
        if (e > 0) *status = NB_STATUS_DIVERGED;
    }
    /* For the tests (tests/cli/85-mpi.t compares parameters across rank counts): the final
     * parameters as raw floats; the ranks of a data-parallel run other than 0 to PATH.rankN. */
    const char *dump = getenv("NORMBENCH_DUMP_PARAMS");
    if (dump && *dump) {
        char path[4200];
        if (D && D->rank != 0)
            snprintf(path, sizeof path, "%.4000s.rank%d", dump, D->rank);
        else
            snprintf(path, sizeof path, "%.4000s", dump);
        dump = path;
        if (t->sync) t->sync(t->self, 0);
        if (nb_write_atomic(dump, t->params, sizeof(float) * P, err) != 0) goto out;
    }
    if (*status == NB_STATUS_FINISHED && t->keep && sink->model_dir) {
        nb_err_clear(err);
        const char *dir = sink->model_dir(sink->ctx, err);
        if (!dir || t->keep(t->self, dir, sink->ckpt_ident, err) != 0) goto out;
    }
    rc = 0;
out:
    free(L.best);
    return rc;
}
