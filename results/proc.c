/* results/proc.c — see results/proc.h. */
#include "results/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "results/provenance.h"

int64_t nb_proc_start_time(int64_t pid) {
    if (pid <= 0) return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "PID (COMM) STATE ...": COMM may hold spaces and parentheses, so fields are counted from
     * the last ')'; STATE is field 3, the start time field 22. */
    const char *p = strrchr(buf, ')');
    if (!p) return -1;
    p++;
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (!*p) return -1;
        if (field == 22) {
            char *end = NULL;
            errno = 0;
            long long v = strtoll(p, &end, 10);
            if (end == p || errno) return -1;
            return (int64_t)v;
        }
        while (*p && *p != ' ')
            p++;
    }
    return -1;
}

int nb_proc_alive(const char *host, int64_t pid, int64_t start) {
    if (!host || pid <= 0) return 1;
    char me[256];
    nb_hostname(me, sizeof me);
    if (strcmp(me, host) != 0) return 1; /* cannot tell from here */
    if (kill((pid_t)pid, 0) == -1 && errno == ESRCH) return 0;
    if (start > 0) {
        int64_t now = nb_proc_start_time(pid);
        if (now >= 0 && now != start) return 0; /* the pid was reused */
    }
    return 1;
}
