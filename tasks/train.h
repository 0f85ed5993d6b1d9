/* tasks/train.h — the training loop every task runs on.
 *
 * A task builds its model and data, describes them in an nb_trainer (the flat parameter,
 * gradient and Adam buffers, and a few callbacks), and calls nb_train_loop. The loop owns
 * everything the tasks have in common: the epoch and step counting (--epochs / --steps), the
 * order of a step (zero gradients, the task's forward+backward, divergence check, clipping, the
 * schedule, Adam), the training-loss records with wall time, the timing of training steps
 * (evaluation excluded), evaluation at every epoch end or every N steps, keeping the best
 * parameters by a validation metric, progress, Ctrl-C, and the end-of-epoch checkpoint that makes
 * `normbench run --resume` bit-exact.
 *
 * Random streams: the loop seeds init (NB_STREAM_INIT), data order (NB_STREAM_DATA) and dropout/
 * noise (NB_STREAM_DROPOUT) from cfg->seed, hands them to the callbacks, and saves and restores
 * them in checkpoints. A task that draws its initial parameters before calling the loop uses
 * its own init stream; the loop's copy is only restored, never drawn from. */
#ifndef NB_TASKS_TRAIN_H
#define NB_TASKS_TRAIN_H

#include "tasks/checkpoint.h"
#include "tasks/task.h"

#define NB_TRAIN_MAX_EXTRA 6
#define NB_TRAIN_MAX_EVAL 32

/* How the global clip at c = cfg->clip (> 0) acts on the gradient g (nb_trainer.clip_rule). */
typedef enum nb_clip_rule {
    NB_CLIP_STANDARD = 0, /* ||g|| > c: g <- g * c/||g|| (the new norm is c) */
    /* The attentive reader's code (AR-repo attentive_reader.py, the clip block, with
     * training.get_norms): it compares the norm n = ||g|| with c^2 and scales by c/sqrt(n + 1e-8),
     * so nothing is clipped until ||g|| > c^2, and the new norm is then c*sqrt(||g||). */
    NB_CLIP_CODE = 1
} nb_clip_rule;

/* The factor rule applies to a gradient of global norm `norm` at threshold clip: 1 when it
 * does not clip (clip <= 0, a norm at or under the threshold, or a norm that is not finite). */
double nb_clip_factor(nb_clip_rule rule, double norm, double clip);

typedef struct nb_trainer {
    void *self; /* the task's model and data, passed to every callback */

    /* The model's flat state (layout->total floats each); the loop zeroes grads before each
     * step, clips them, and runs Adam over the trainable tensors. */
    float *params, *grads, *adam_m, *adam_v;
    const nb_layout *layout;

    int64_t steps_per_epoch; /* training batches in one epoch (> 0) */

    /* Evaluation cadence: > 0 every this many steps (and at the end of the run); 0 at the end
     * of every epoch. */
    int eval_every;

    /* Keep the best parameters: when select_metric is set, after every periodic evaluation
     * whose value of that metric is better (higher when select_max, else lower) the parameters
     * are copied aside; at the end of the run they are restored before the final evaluation.
     * The best value is recorded as "best_" + select_metric. */
    const char *select_metric;
    int select_max;

    /* Per-tensor gradient clipping at this norm (> 0), as the order-embedding code does;
     * cfg->clip (> 0) clips the global norm by clip_rule (NB_CLIP_STANDARD when left 0). Both
     * may be set. */
    double clip_per_tensor;
    nb_clip_rule clip_rule;

    /* Further state the next epoch depends on (e.g. the data order), saved in checkpoints
     * after the parameters and moments. */
    nb_ckpt_blob extra[NB_TRAIN_MAX_EXTRA];
    int nextra;
    /* 1: everything an epoch in progress depends on is in the parameters, the loop's streams
     * and extra (lm: the epoch's window offsets), so a run stopped by Ctrl-C writes a checkpoint
     * at the step it stopped (after an evaluation due at that step), and `run --resume`
     * re-enters that epoch there without calling epoch_begin again; the partial training loss
     * since the last record is left to the resumed run. 0: checkpoints at the ends of epochs
     * only. */
    int resume_mid_epoch;

    /* Called once before the first step of a fresh run (not on resume), e.g. for WeightNorm's
     * data-dependent initialisation, with the loop's init and data streams. May be NULL. */
    void (*prepare)(void *self, nb_rng *init_rng, nb_rng *data_rng);

    /* Writes the model a finished run keeps into dir (the sink's model_dir: mt, lm and draw keep
     * theirs for translate and sample), with the parameters the final evaluation used; called
     * by the loop once, at the end of a run that finished, when the sink keeps models. May be
     * NULL. */
    int (*keep)(void *self, const char *dir, const struct nb_ckpt_ident *id, nb_err *err);

    /* Called before each epoch's first step (epoch 1-based), e.g. to reshuffle the data with
     * data_rng. May be NULL. Not called again for an epoch a resumed run re-enters (at an
     * epoch boundary, or mid-epoch with resume_mid_epoch). */
    void (*epoch_begin)(void *self, int epoch, nb_rng *data_rng);

    /* One training step on batch bi (0-based within the epoch): forward and backward, gradients
     * ACCUMULATED into grads (the loop zeroed them). noise_rng is the dropout/noise stream.
     * Returns the batch's mean training loss; NaN or Inf stops the run as diverged. */
    double (*step)(void *self, int64_t bi, nb_rng *noise_rng);

    /* Data-parallel (cfg->dist): the step on rows [lo, hi) of batch bi only, with gradients of
     * the loss summed over those rows divided by the whole batch's size (so that the sum over
     * the processes is the single-process gradient, whatever the split); returns the mean loss
     * of those rows. The loop splits the batch, sums gradients and losses over the processes
     * (one fused buffer) and keeps the update identical everywhere. NULL: the task trains only
     * in one process. */
    double (*step_shard)(void *self, int64_t bi, int lo, int hi, nb_rng *noise_rng);
    /* 1: step_shard returns its share of the batch's loss (the processes' values add up to it)
     * and splits the batch itself, ignoring lo and hi (translation, whose batches hold varying
     * numbers of sentences); 0: the mean loss of rows [lo, hi), which the loop weights. */
    int shard_loss_share;

    /* Exact gradient sums (may be NULL): the step adds its gradients to grads_d (ngrads_d
     * doubles, zeroed by the loop with grads) instead of grads; the loop sums grads_d over the
     * processes (data-parallel) and then calls grads_finish, which adds them to grads. So the
     * sum over processes is taken before any rounding to float, and a split batch gives the
     * gradient one process gives. */
    double *grads_d;
    size_t ngrads_d;
    void (*grads_finish)(void *self);

    /* Target tokens trained on in this process so far (translation), for the metric
     * tokens_per_s: those tokens over this process's seconds inside training steps, recorded
     * with every evaluation. NULL: the task has no tokens. */
    double (*tokens)(void *self);

    /* Adjusts the Adam configuration for step t (1-based, the step about to be taken) of
     * `planned` steps: learning-rate decay, beta1 switch. adam starts as a copy of cfg->adam
     * at every step. May be NULL (constant). */
    void (*schedule)(void *self, int64_t t, int64_t planned, nb_adam_cfg *adam);

    /* Evaluation: fills up to max metrics (name and value; the loop sets step and wall time)
     * and returns how many, or -1 with err set. final is 0 for the periodic evaluations, 1 for
     * the one at the end of the run (after the best parameters were restored, if any); a task
     * whose periodic evaluation already says everything returns 0 metrics for final. A
     * non-finite value of a metric whose name ends in "loss" or "nll" stops the run as
     * diverged. */
    int (*evaluate)(void *self, int final, nb_metric *out, int max, nb_err *err);

    /* A model on another device (--device cuda), or NULL for both: update replaces clipping and
     * Adam on the host buffers (the step then zeroes its own gradients, and the loop does not);
     * sync copies parameters and moments to the device (to_device != 0: after prepare or a
     * resume) or back to the host buffers (before a checkpoint or a copy of the best). */
    void (*update)(void *self, const nb_adam_cfg *adam, int64_t step);
    void (*sync)(void *self, int to_device);

    /* What the task loaded (nb_train_fp), which data-parallel ranks compare before the first
     * step (nb_dist.agree): lines "PART BYTES HASH". "": nothing to compare. */
    char data_fp[1024];
} nb_trainer;

/* Adds the line "name n hash" to t->data_fp: n bytes at p and a 64-bit hash of them (8 bytes
 * at a time in four lanes: 0.9 s for 600 MB, CIFAR-10's training images, on a loaded machine).
 * name: a part of the data, e.g. "train.x". */
void nb_train_fp(nb_trainer *t, const char *name, const void *p, size_t n);

/* The update that follows a step's backward, as the loop does it: clipping (global at clip > 0
 * by t->clip_rule, then per tensor at t->clip_per_tensor > 0), t->schedule applied to a copy of
 * *adam, and Adam at step `step` (1-based) of `planned`. Exported so that `bench step` times
 * exactly this. */
void nb_train_update(const nb_trainer *t, double clip, const nb_adam_cfg *adam, int64_t step,
                     int64_t planned);

/* nb_train_update that also says what clipping did: returns the global L2 norm of the trainable
 * gradients before clipping, and sets *scale (may be NULL) to the factor by which clipping
 * shrank that norm (the norm after all clipping over the norm before; 1 when nothing was
 * clipped). With t->update (another device) the gradients are not on the host: returns NaN,
 * *scale NaN, and clips nothing. */
double nb_train_update_clip(const nb_trainer *t, double clip, const nb_adam_cfg *adam, int64_t step,
                            int64_t planned, double *scale);

/* Data-parallel (D->size > 1), what nb_train_loop does after a process's shard of a step
 * (t->step_shard on `rows` of the `batch` rows), exported so that `bench step` times exactly
 * this: the sums over the processes, first the shard's mean loss weighted by its rows with the
 * stop flag (*stop: this process's request in, whether any process asked out; NULL: none), then
 * every gradient in one fused buffer (t->grads, the whole layout: one MPI_Allreduce; t->grads_d
 * in double where the task keeps exact sums, followed by t->grads_finish). The time
 * spent adds to D->comm_seconds; D->comm_bytes is set to the gradients' bytes. Returns the
 * whole batch's mean loss. */
double nb_train_dist_sum(nb_dist *D, const nb_trainer *t, double loss, int rows, int batch,
                         int *stop);

/* Data-parallel after the update: with per-rank BatchNorm statistics (!D->bn_sync) rank 0's
 * running averages (the layout's tensors that are not trainable) to every process, as
 * DistributedDataParallel's broadcast_buffers does. Nothing with --bn-sync. */
void nb_train_dist_buffers(const nb_dist *D, const nb_trainer *t);

/* Trains per cfg (epochs or steps, clipping, Adam, seed, resume_from, stop), recording through
 * sink. Returns 0 with *status set (finished, interrupted or diverged; err then says why a run
 * diverged), or -1 with err set when the run could not go on (I/O, the sink failed). Records:
 *   train_loss every cfg->log_every steps (mean over those steps) and at the last step, and
 *   with it grad_norm (the global gradient norm before clipping) and clip_scale (the factor
 *   clipping applied, 1 when none), both means over the same steps (not with t->update);
 *   at every evaluation the task's metrics, ms_per_step (training time only, so far) and, at
 *   epoch ends, epoch and epoch_seconds;
 *   on Ctrl-C the partial train_loss (grad_norm, clip_scale) and ms_per_step. */
int nb_train_loop(const nb_train_cfg *cfg, const nb_trainer *t, const nb_sink *sink,
                  nb_status *status, nb_err *err);

#endif
