/* tasks/task.c — the task table and small shared helpers. */
#include "tasks/task.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nn/mem.h"

extern const nb_task nb_task_mnist;
extern const nb_task nb_task_cifar;
extern const nb_task nb_task_order;
extern const nb_task nb_task_reader;
extern const nb_task nb_task_mt;
extern const nb_task nb_task_lm;
extern const nb_task nb_task_draw;

/* One row per task, in the order help and reports list them. */
static const nb_task *const tasks[] = {&nb_task_mnist,  &nb_task_cifar, &nb_task_order,
                                       &nb_task_reader, &nb_task_mt,    &nb_task_lm,
                                       &nb_task_draw};
enum { NTASKS = sizeof tasks / sizeof tasks[0] };

/* Tasks a build adds of its own (the test build's, in tests/), listed after these; NULL-terminated.
 * A weak reference: in the product no file defines it, and it is NULL. */
extern const nb_task *const nb_tasks_extra[] __attribute__((weak));

const nb_task *nb_task_find(const char *name) {
    for (int i = 0; nb_task_at(i); i++)
        if (strcmp(nb_task_at(i)->name, name) == 0) return nb_task_at(i);
    return NULL;
}

const char *nb_task_act_name(const nb_train_cfg *cfg) {
    const nb_task *t = cfg->task ? nb_task_find(cfg->task) : NULL;
    return t && t->activation ? t->activation : nb_act_name(cfg->act);
}

const nb_task *nb_task_at(int i) {
    if (i < 0) return NULL;
    if (i < NTASKS) return tasks[i];
    if (!nb_tasks_extra) return NULL;
    for (int k = 0; nb_tasks_extra[k]; k++)
        if (k == i - NTASKS) return nb_tasks_extra[k];
    return NULL;
}

const char *nb_status_name(nb_status s) {
    switch (s) {
    case NB_STATUS_FINISHED:
        return "finished";
    case NB_STATUS_INTERRUPTED:
        return "interrupted";
    case NB_STATUS_DIVERGED:
        return "diverged";
    case NB_STATUS_FAILED:
        return "failed";
    }
    return "failed";
}

static void human_bytes(char *buf, size_t n, double b) {
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.1f GiB", b / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, n, "%.0f MiB", b / (1024.0 * 1024));
}

int nb_check_batch_memory(int (*build)(void *ctx, int B, nb_err *err), void *ctx, int Bmax,
                          const char *what, nb_err *err) {
    if (Bmax <= 256) return 0;
    double at[2];
    for (int i = 0; i < 2; i++) {
        nb_mem_reset();
        if (build(ctx, 2 + 2 * i, err) != 0) return -1;
        at[i] = (double)nb_mem_noted();
    }
    double per_row = (at[1] - at[0]) / 2, need = at[0] + per_row * (Bmax - 2);
    const char *which = NULL;
    double room = nb_mem_room(&which);
    if (need <= room) return 0;
    char n1[32], n2[32];
    human_bytes(n1, sizeof n1, need);
    human_bytes(n2, sizeof n2, room);
    nb_errf(err, "%s needs about %s for the model's buffers (%d rows), more than the %s left in %s",
            what, n1, Bmax, n2, which);
    return nb_hintf(err, "lower the batch size (about %.0f rows fit)",
                    per_row > 0 ? (room - at[0]) / per_row : 0);
}

double nb_gemm_flops(const nb_gemm_shape *s, int n) {
    double f = 0;
    for (int i = 0; i < n; i++)
        f += 2.0 * s[i].M * (double)s[i].N * s[i].K * s[i].count;
    return f;
}

double nb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
