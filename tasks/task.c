/* tasks/task.c — the task table and small shared helpers. */
#include "tasks/task.h"

#include <string.h>
#include <time.h>

extern const nb_task nb_task_mnist;
extern const nb_task nb_task_cifar;
extern const nb_task nb_task_order;

/* One row per task, in the order help and reports list them. */
static const nb_task *const tasks[] = {&nb_task_mnist, &nb_task_cifar, &nb_task_order};

const nb_task *nb_task_find(const char *name) {
    for (size_t i = 0; i < sizeof tasks / sizeof tasks[0]; i++)
        if (strcmp(tasks[i]->name, name) == 0) return tasks[i];
    return NULL;
}

const nb_task *nb_task_at(int i) {
    if (i < 0 || (size_t)i >= sizeof tasks / sizeof tasks[0]) return NULL;
    return tasks[i];
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
