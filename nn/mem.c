/* nn/mem.c — see mem.h. */
#include "nn/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static _Thread_local size_t noted;

void nb_mem_note(size_t bytes) {
    noted += bytes;
}

size_t nb_mem_noted(void) {
    return noted;
}

void nb_mem_reset(void) {
    noted = 0;
}

/* Pages mapped (size) and resident now, from /proc/self/statm; 0 when unknown. */
static void statm(double *size, double *resident) {
    *size = *resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return;
    unsigned long s = 0, r = 0;
    if (fscanf(f, "%lu %lu", &s, &r) == 2) {
        double page = (double)sysconf(_SC_PAGESIZE);
        *size = (double)s * page;
        *resident = (double)r * page;
    }
    fclose(f);
}

double nb_mem_room(const char **which) {
    double size, resident;
    statm(&size, &resident);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double room = pages > 0 && page > 0 ? (double)pages * (double)page - resident : 1e300;
    *which = "physical memory";
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        double as = (double)rl.rlim_cur - size;
        if (as < room) {
            room = as;
            *which = "the address-space limit (ulimit -v)";
        }
    }
    return room > 0 ? room : 0;
}

void *nb_mem_alloc(size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    if (!bytes) bytes = 64;
    nb_mem_note(bytes);
    void *p = aligned_alloc(64, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}
