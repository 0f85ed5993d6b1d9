/* tasks/task.c — the task table and small shared helpers. */
#include "tasks/task.h"

#include <string.h>
#include <time.h>

extern const nb_task nb_task_mnist;
extern const nb_task nb_task_cifar;
extern const nb_task nb_task_order;
extern const nb_task nb_task_reader;

/* One row per task, in the order help and reports list them. */
static const nb_task *const tasks[] = {&nb_task_mnist, &nb_task_cifar, &nb_task_order,
                                       &nb_task_reader};
enum { NTASKS = sizeof tasks / sizeof tasks[0] };

/* Tasks a build adds of its own (the test build's, in tests/), listed after these; NULL-terminated.
 * A weak reference: in the product no file defines it, and it is NULL. */
extern const nb_task *const nb_tasks_extra[] __attribute__((weak));

const nb_task *nb_task_find(const char *name) {
    for (int i = 0; nb_task_at(i); i++)
        if (strcmp(nb_task_at(i)->name, name) == 0) return nb_task_at(i);
    return NULL;
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

double nb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
