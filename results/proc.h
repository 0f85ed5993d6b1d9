/* results/proc.h — telling whether the process that recorded a run or holds a claim is still
 * alive. A process id alone is not enough: after a crash the id may be reused by an unrelated
 * process, so every recorded pid comes with the process's start time (field 22 of
 * /proc/PID/stat, clock ticks since boot), and a process counts as the recorded one only when
 * both match. */
#ifndef NB_RESULTS_PROC_H
#define NB_RESULTS_PROC_H

#include <stdint.h>

/* The start time of process pid (clock ticks since boot), or -1 when it does not exist or
 * cannot be read. */
int64_t nb_proc_start_time(int64_t pid);

/* Whether the process (host, pid, start) may still be alive: 0 when it is known to be gone (on
 * this host: no process pid, or one with another start time), 1 otherwise — including a process
 * on another host, which cannot be checked from here. start <= 0 means not recorded (stores
 * written before it was): only the pid is compared. */
int nb_proc_alive(const char *host, int64_t pid, int64_t start);

#endif
