/* results/provenance.h — where and how a run ran, recorded with every run.
 *
 * The JSON object has: git_rev, git_dirty (bool), cc, cflags (from the generated buildinfo.h),
 * cpu_model (/proc/cpuinfo), cores_online, omp_num_threads (the environment variable, or null),
 * omp_max_threads, omp_wait_policy (or null), the members of the caller's description of its
 * compute libraries (cmd/ gives openblas_config, openblas_corename, openblas_num_threads,
 * openblas_parallel: results/ knows no model library), hostname. */
#ifndef NB_RESULTS_PROVENANCE_H
#define NB_RESULTS_PROVENANCE_H

#include <stddef.h>

/* Returns the provenance as a newly allocated JSON object (caller frees), or NULL when out of
 * memory. Never fails otherwise: a value that cannot be found is null. compute_json, when not
 * NULL, is a JSON object whose members are written inline (the BLAS and device settings). */
char *nb_provenance_json(const char *compute_json);

/* Writes this machine's host name into buf (size bytes, NUL-terminated); "unknown" if it cannot
 * be found. Returns buf. */
char *nb_hostname(char *buf, size_t size);

/* This machine's processor as /proc/cpuinfo names it ("model name : X" on x86, "Model" or "cpu
 * model" elsewhere) into out (NUL-terminated); "" when it cannot be found. */
void nb_cpu_model(char *out, size_t size);

#endif
