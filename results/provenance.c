/* results/provenance.c — see results/provenance.h. */
#include "results/provenance.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buildinfo.h"
#include "util/json.h"

char *nb_hostname(char *buf, size_t size) {
    if (gethostname(buf, size) != 0 || !buf[0]) snprintf(buf, size, "unknown");
    buf[size - 1] = '\0';
    return buf;
}

void nb_cpu_model(char *out, size_t size) {
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0 && strncmp(line, "Model", 5) != 0 &&
            strncmp(line, "cpu model", 9) != 0)
            continue;
        const char *c = strchr(line, ':');
        if (!c) continue;
        c++;
        while (*c == ' ' || *c == '\t')
            c++;
        snprintf(out, size, "%s", c);
        out[strcspn(out, "\n")] = '\0';
        break;
    }
    fclose(f);
}

static void key(nb_buf *b, const char *k, int first) {
    nb_buf_puts(b, first ? "{" : ",");
    nb_buf_json_str(b, k);
    nb_buf_puts(b, ":");
}

char *nb_provenance_json(const char *compute_json) {
    nb_buf b = {0};
    const char *rev = NB_GIT_REV;
    size_t rl = strlen(rev);
    int dirty = rl >= 6 && strcmp(rev + rl - 6, "-dirty") == 0;
    char host[256], cpu[256];
    nb_hostname(host, sizeof host);
    nb_cpu_model(cpu, sizeof cpu);

    key(&b, "git_rev", 1);
    nb_buf_json_str(&b, rev);
    key(&b, "git_dirty", 0);
    nb_buf_puts(&b, dirty ? "true" : "false");
    key(&b, "cc", 0);
    nb_buf_json_str(&b, NB_CC_VERSION);
    key(&b, "cflags", 0);
    nb_buf_json_str(&b, NB_CFLAGS);
    key(&b, "cpu_model", 0);
    nb_buf_json_str(&b, cpu[0] ? cpu : NULL);
    key(&b, "cores_online", 0);
    nb_buf_printf(&b, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    key(&b, "omp_num_threads", 0);
    nb_buf_json_str(&b, getenv("OMP_NUM_THREADS"));
    key(&b, "omp_max_threads", 0);
    nb_buf_printf(&b, "%d", omp_get_max_threads());
    key(&b, "omp_wait_policy", 0);
    nb_buf_json_str(&b, getenv("OMP_WAIT_POLICY"));
    /* the compute libraries' own description, as the caller gives it: its members inline */
    if (compute_json) {
        size_t n = strlen(compute_json);
        if (n > 2 && compute_json[0] == '{' && compute_json[n - 1] == '}')
            nb_buf_printf(&b, ",%.*s", (int)(n - 2), compute_json + 1);
    }
    key(&b, "hostname", 0);
    nb_buf_json_str(&b, host);
    nb_buf_puts(&b, "}");
    return nb_buf_take(&b);
}
