/* run/mpi.c — start-up under a launcher, and the messages between rank 0 (which holds the
 * store) and the other ranks (see run/mpi.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "run/mpi.h"

#include <mpi.h>

#include <sched.h>
#include <stdarg.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "results/provenance.h"
#include "util/file.h"
#include "util/json.h"

static int mpi_on = 0, mpi_rank = 0, mpi_size = 1;

/* Where this process's MPI messages go (nb_mpi_set_say): the command prints them. */
static void (*say_fn)(void *ctx, const char *text);
static void *say_ctx;

void nb_mpi_set_say(void (*say)(void *ctx, const char *text), void *ctx) {
    say_fn = say;
    say_ctx = ctx;
}

/* printf-style text (whole lines) through the message hook. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    if (!say_fn) return;
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    say_fn(say_ctx, text);
}

/* "error: MSG" (and "hint: HINT"): a rank's own diagnostics. Returns NB_EXIT_FAIL. */
static int report_err(const nb_err *e) {
    say("error: %s\n", e->msg[0] ? e->msg : "unknown failure");
    if (e->hint[0]) say("hint: %s\n", e->hint);
    return NB_EXIT_FAIL;
}

/* printf-style "error: ...". Returns NB_EXIT_FAIL. */
static int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die(const char *fmt, ...) {
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    say("error: %s\n", text);
    return NB_EXIT_FAIL;
}

int nb_mpi_launched(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_STEP_NUM_TASKS", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return 1;
    }
    return 0;
}

int nb_mpi_start(int *argc, const char **argv) {
    int want = 0;
    for (int i = 1; i < *argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--mpi") == 0) {
            memmove(argv + i, argv + i + 1, sizeof *argv * (size_t)(*argc - i));
            (*argc)--;
            want = 1;
            break;
        }
    if (!want && !nb_mpi_launched()) return 0;
    /* Rank 0's coordinator and its own job's thread: only one thread calls MPI at a time. */
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        say("error: MPI_Init failed\nhint: start normbench with mpirun or srun, or "
            "without --mpi\n");
        return NB_EXIT_FAIL;
    }
    mpi_on = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    if (provided < MPI_THREAD_SERIALIZED) {
        say("error: this MPI library does not allow calls from more than one thread\n"
            "hint: use an MPI built with thread support (Debian's Open MPI is)\n");
        MPI_Abort(MPI_COMM_WORLD, NB_EXIT_FAIL);
    }
    return 0;
}

int nb_mpi_on(void) {
    return mpi_on;
}
int nb_mpi_rank(void) {
    return mpi_rank;
}
int nb_mpi_size(void) {
    return mpi_size;
}

int nb_mpi_end(int rc) {
    if (mpi_on) {
        MPI_Finalize();
        mpi_on = 0;
    }
    return rc;
}

/* ---- data-parallel runs -------------------------------------------------------------------- */

static void sum_f(void *ctx, float *x, size_t n) {
    (void)ctx;
    /* in chunks below INT_MAX elements; Open MPI's reduction gives every rank the same bits */
    for (size_t i = 0; i < n; i += 1u << 30) {
        size_t k = n - i < (1u << 30) ? n - i : (1u << 30);
        MPI_Allreduce(MPI_IN_PLACE, x + i, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
}
static void sum_d(void *ctx, double *x, size_t n) {
    (void)ctx;
    for (size_t i = 0; i < n; i += 1u << 30) {
        size_t k = n - i < (1u << 30) ? n - i : (1u << 30);
        MPI_Allreduce(MPI_IN_PLACE, x + i, (int)k, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
}
static void bcast_f(void *ctx, float *x, size_t n) {
    (void)ctx;
    MPI_Bcast(x, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
}
int nb_mpi_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}

void nb_mpi_idle_barrier(void) {
    MPI_Request rq;
    MPI_Ibarrier(MPI_COMM_WORLD, &rq);
    for (int done = 0;;) {
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (done) break;
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
}
void nb_mpi_bn_sum(void *ctx, double *x, int n) {
    sum_d(ctx, x, (size_t)n);
}

static int agree_data(void *ctx, const char *fp, nb_err *err);

void nb_mpi_dist(nb_dist *d, int bn_sync) {
    memset(d, 0, sizeof *d);
    d->rank = mpi_rank;
    d->size = mpi_size;
    d->sum_f = sum_f;
    d->sum_d = sum_d;
    d->bcast_f = bcast_f;
    d->bn_sync = bn_sync;
    d->agree = agree_data;
}

char *nb_mpi_hosts_json(void) {
    char host[64] = "";
    nb_hostname(host, sizeof host);
    char *all = calloc((size_t)mpi_size, sizeof host);
    if (!all) return NULL;
    MPI_Allgather(host, sizeof host, MPI_CHAR, all, sizeof host, MPI_CHAR, MPI_COMM_WORLD);
    nb_buf b = {0};
    nb_buf_puts(&b, "[");
    for (int r = 0; r < mpi_size; r++) {
        if (r) nb_buf_puts(&b, ", ");
        all[(size_t)r * sizeof host + sizeof host - 1] = '\0';
        nb_buf_json_str(&b, all + (size_t)r * sizeof host);
    }
    nb_buf_puts(&b, "]");
    free(all);
    return nb_buf_take(&b);
}

/* ---- messages ------------------------------------------------------------------------------- */

enum {
    TAG_READY = 101, /* rank -> 0: idle; the job it ran and its exit code */
    TAG_JOB,         /* 0 -> rank: a job */
    TAG_STOP,        /* 0 -> rank: no more work */
    TAG_CREATE,      /* rank -> 0: create a run */
    TAG_TAG,
    TAG_PARAM,
    TAG_METRICS,
    TAG_FINISH,
    TAG_CKPT,
    TAG_REPLY /* 0 -> rank: the answer to a record request */
};

/* A message being packed or unpacked: length-prefixed strings and fixed-size numbers. */
typedef struct msg {
    char *p;
    size_t len, cap, pos;
    int bad; /* out of memory, or read past the end */
} msg;

static void put(msg *m, const void *x, size_t n) {
    if (m->bad) return;
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap : 256;
        while (cap < m->len + n)
            cap *= 2;
        char *q = realloc(m->p, cap);
        if (!q) {
            m->bad = 1;
            return;
        }
        m->p = q;
        m->cap = cap;
    }
    if (n) memcpy(m->p + m->len, x, n);
    m->len += n;
}
static void put_i64(msg *m, int64_t v) {
    put(m, &v, sizeof v);
}
static void put_f64(msg *m, double v) {
    put(m, &v, sizeof v);
}
static void put_bytes(msg *m, const void *p, size_t n) {
    put_i64(m, (int64_t)n);
    put(m, p, n);
}
/* NULL travels as length -1. */
static void put_str(msg *m, const char *s) {
    if (!s) {
        put_i64(m, -1);
        return;
    }
    put_bytes(m, s, strlen(s));
}

static int take(msg *m, void *x, size_t n) {
    if (m->bad || m->pos + n > m->len) {
        m->bad = 1;
        memset(x, 0, n);
        return -1;
    }
    memcpy(x, m->p + m->pos, n);
    m->pos += n;
    return 0;
}
static int64_t get_i64(msg *m) {
    int64_t v = 0;
    take(m, &v, sizeof v);
    return v;
}
static double get_f64(msg *m) {
    double v = 0;
    take(m, &v, sizeof v);
    return v;
}
/* A newly allocated copy (NUL-terminated; *n its length), or NULL for a NULL string. */
static char *get_bytes(msg *m, size_t *n) {
    int64_t l = get_i64(m);
    if (n) *n = 0;
    if (l < 0 || m->bad) return NULL;
    if ((uint64_t)l > m->len - m->pos) {
        m->bad = 1;
        return NULL;
    }
    char *s = malloc((size_t)l + 1);
    if (!s) {
        m->bad = 1;
        return NULL;
    }
    memcpy(s, m->p + m->pos, (size_t)l);
    s[l] = '\0';
    m->pos += (size_t)l;
    if (n) *n = (size_t)l;
    return s;
}
static char *get_str(msg *m) {
    return get_bytes(m, NULL);
}

static void msg_free(msg *m) {
    free(m->p);
    memset(m, 0, sizeof *m);
}

static void send_msg(int to, int tag, const msg *m) {
    /* messages are far below 2 GiB except a checkpoint of a very large model */
    MPI_Send(m->p ? m->p : "", (int)m->len, MPI_BYTE, to, tag, MPI_COMM_WORLD);
}

/* Receives one message (from: a rank or MPI_ANY_SOURCE; tag or MPI_ANY_TAG) into *m. */
static void recv_msg(int from, int tag, msg *m, MPI_Status *st) {
    MPI_Status s;
    MPI_Probe(from, tag, MPI_COMM_WORLD, &s);
    int n = 0;
    MPI_Get_count(&s, MPI_BYTE, &n);
    memset(m, 0, sizeof *m);
    m->p = malloc((size_t)n + 1);
    m->cap = (size_t)n + 1;
    if (!m->p) {
        m->bad = 1;
        m->cap = 0;
    }
    /* receive even without room, so that the message is consumed */
    static char sink[1];
    MPI_Recv(m->p ? m->p : sink, m->p ? n : 0, MPI_BYTE, s.MPI_SOURCE, s.MPI_TAG, MPI_COMM_WORLD,
             st ? st : MPI_STATUS_IGNORE);
    if (st) *st = s;
    m->len = m->p ? (size_t)n : 0;
}

/* ---- rank 0 -------------------------------------------------------------------------------- */

int nb_mpi_send_job(int r, const nb_mpi_job *job, nb_err *err) {
    msg m = {0};
    put_i64(&m, job->index);
    put_str(&m, job->config);
    put_str(&m, job->args);
    put_str(&m, job->host);
    put_str(&m, job->tag);
    put_str(&m, job->variant);
    put_i64(&m, job->resume_run);
    put_i64(&m, job->resume_step);
    put(&m, &job->ident, sizeof job->ident);
    if (job->ckpt)
        put_bytes(&m, job->ckpt, job->ckpt_len);
    else
        put_i64(&m, -1);
    if (m.bad) {
        msg_free(&m);
        return nb_errf(err, "out of memory for a job's message");
    }
    send_msg(r, TAG_JOB, &m);
    msg_free(&m);
    return 0;
}

void nb_mpi_send_stop(int r) {
    msg m = {0};
    put_i64(&m, 0);
    send_msg(r, TAG_STOP, &m);
    msg_free(&m);
}

/* The checkpoint file of run id beside the store (cmd_run.c's DB-checkpoints/run-ID.ckpt). */
static int ckpt_path(char *out, size_t size, const char *db, int64_t run, int make_dir,
                     nb_err *err) {
    char dir[4096];
    if ((size_t)snprintf(dir, sizeof dir, "%s-checkpoints", db) >= sizeof dir)
        return nb_errf(err, "store path '%s' is too long", db);
    if (make_dir && mkdir(dir, 0755) != 0 && errno != EEXIST)
        return nb_errf(err, "cannot create checkpoint directory '%s': %s", dir, strerror(errno));
    if ((size_t)snprintf(out, size, "%.4000s/run-%lld.ckpt", dir, (long long)run) >= size)
        return nb_errf(err, "store path '%s' is too long", db);
    return 0;
}

/* Writes n bytes to path atomically (util/file.h): a checkpoint is the old one or the new one,
 * never half. */
static int write_atomic(const char *path, const char *p, size_t n, nb_err *err) {
    if (nb_write_atomic(path, p, n, err) == 0) return 0;
    return nb_errf(err, "cannot write checkpoint '%s': %s", path, strerror(errno));
}

/* Answers a record request m (tag) from rank r. Returns 0, or -1 when the store refused it. */
static int serve(nb_store *store, const char *db, int r, int tag, msg *m) {
    nb_err err;
    nb_err_clear(&err);
    msg out = {0};
    int rc = -1;
    int64_t run = 0;
    char store_id[40] = "";
    if (tag == TAG_CREATE) {
        nb_run_spec spec;
        memset(&spec, 0, sizeof spec);
        char *task = get_str(m), *dataset = get_str(m), *norm = get_str(m);
        spec.task = task;
        spec.dataset = dataset;
        spec.norm = norm;
        spec.seed = get_i64(m);
        char *config = get_str(m), *prov = get_str(m);
        spec.config_json = config;
        spec.provenance_json = prov;
        if (m->bad || !prov)
            nb_errf(&err, "a malformed message from rank %d", r);
        else if (nb_run_create(store, &spec, &run, &err) == 0 &&
                 nb_store_id(store, store_id, sizeof store_id, &err) == 0)
            rc = 0;
        free(task), free(dataset), free(norm), free(config), free(prov);
    } else if (tag == TAG_TAG || tag == TAG_PARAM) {
        run = get_i64(m);
        char *k = get_str(m), *v = get_str(m);
        if (m->bad || !k || !v)
            nb_errf(&err, "a malformed message from rank %d", r);
        else
            rc = (tag == TAG_TAG ? nb_run_tag : nb_run_param)(store, run, k, v, &err);
        free(k), free(v);
    } else if (tag == TAG_METRICS) {
        run = get_i64(m);
        int64_t n = get_i64(m);
        nb_metric *ms = n > 0 && n < 100000 ? calloc((size_t)n, sizeof *ms) : NULL;
        char **names = n > 0 && n < 100000 ? calloc((size_t)n, sizeof *names) : NULL;
        if (!ms || !names) {
            nb_errf(&err, "a malformed message from rank %d", r);
        } else {
            for (int64_t i = 0; i < n; i++) {
                names[i] = get_str(m);
                ms[i].name = names[i];
                ms[i].step = get_i64(m);
                ms[i].wall = get_f64(m);
                ms[i].value = get_f64(m);
            }
            if (m->bad)
                nb_errf(&err, "a malformed message from rank %d", r);
            else
                rc = nb_metrics_add(store, run, ms, (int)n, &err);
            for (int64_t i = 0; i < n; i++)
                free(names[i]);
        }
        free(ms);
        free(names);
    } else if (tag == TAG_FINISH) {
        run = get_i64(m);
        char *status = get_str(m), *message = get_str(m);
        if (m->bad || !status) {
            nb_errf(&err, "a malformed message from rank %d", r);
        } else {
            rc = nb_run_finish(store, run, status, message, &err);
            /* a finished or diverged run has nothing to resume: free the disk */
            char path[4200];
            if (rc == 0 && (strcmp(status, "finished") == 0 || strcmp(status, "diverged") == 0) &&
                ckpt_path(path, sizeof path, db, run, 0, &err) == 0)
                unlink(path);
        }
        free(status), free(message);
    } else if (tag == TAG_CKPT) {
        run = get_i64(m);
        size_t n = 0;
        char *bytes = get_bytes(m, &n);
        char path[4200];
        if (m->bad || !bytes)
            nb_errf(&err, "a malformed message from rank %d", r);
        else if (ckpt_path(path, sizeof path, db, run, 1, &err) == 0 &&
                 write_atomic(path, bytes, n, &err) == 0)
            rc = 0;
        free(bytes);
    } else {
        nb_errf(&err, "an unknown message (tag %d) from rank %d", tag, r);
    }
    put_i64(&out, rc);
    put_i64(&out, run);
    put_str(&out, store_id);
    put_str(&out, err.msg);
    put_str(&out, err.hint);
    send_msg(r, TAG_REPLY, &out);
    msg_free(&out);
    return rc;
}

nb_mpi_event nb_mpi_poll(nb_store *store, const char *db, int wait, nb_mpi_heard *heard) {
    MPI_Status st;
    if (!wait) {
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) return NB_MPI_NONE;
    }
    msg m;
    recv_msg(MPI_ANY_SOURCE, MPI_ANY_TAG, &m, &st);
    memset(heard, 0, sizeof *heard);
    heard->rank = st.MPI_SOURCE;
    nb_mpi_event ev;
    if (st.MPI_TAG == TAG_READY) {
        heard->job = (long)get_i64(&m);
        heard->code = (int)get_i64(&m);
        heard->stopping = (int)get_i64(&m);
        char *host = get_str(&m);
        snprintf(heard->host, sizeof heard->host, "%s", host ? host : "?");
        free(host);
        ev = NB_MPI_READY;
    } else {
        ev = serve(store, db, st.MPI_SOURCE, st.MPI_TAG, &m) == 0 ? NB_MPI_SERVED : NB_MPI_FAILURE;
    }
    msg_free(&m);
    return ev;
}

/* ---- the other ranks ------------------------------------------------------------------------ */

/* Sends a record request and waits for rank 0's answer. */
static int request(int tag, msg *m, int64_t *run, char *store_id, size_t size, nb_err *err) {
    if (m->bad) {
        msg_free(m);
        return nb_errf(err, "out of memory for a message to rank 0");
    }
    send_msg(0, tag, m);
    msg_free(m);
    msg r;
    recv_msg(0, TAG_REPLY, &r, NULL);
    int64_t rc = get_i64(&r), id = get_i64(&r);
    char *sid = get_str(&r), *emsg = get_str(&r), *hint = get_str(&r);
    if (r.bad) {
        nb_errf(err, "a malformed answer from rank 0");
        rc = -1;
    } else if (rc != 0) {
        nb_errf(err, "%s (on rank 0, which holds the store)", emsg ? emsg : "?");
        if (hint && *hint) nb_hintf(err, "%s", hint);
    } else {
        if (run) *run = id;
        if (store_id && sid) snprintf(store_id, size, "%s", sid);
    }
    free(sid), free(emsg), free(hint);
    msg_free(&r);
    return rc == 0 ? 0 : -1;
}

static int rem_create(void *ctx, const nb_run_spec *spec, int64_t *run, char *store_id, size_t size,
                      nb_err *err) {
    (void)ctx;
    /* this rank's provenance: its own host, CPU and threads */
    char *prov = nb_provenance_json(spec->compute_json);
    if (!prov) return nb_errf(err, "out of memory");
    msg m = {0};
    put_str(&m, spec->task);
    put_str(&m, spec->dataset);
    put_str(&m, spec->norm);
    put_i64(&m, spec->seed);
    put_str(&m, spec->config_json);
    put_str(&m, prov);
    free(prov);
    return request(TAG_CREATE, &m, run, store_id, size, err);
}

static int rem_kv(int tag, int64_t run, const char *k, const char *v, nb_err *err) {
    msg m = {0};
    put_i64(&m, run);
    put_str(&m, k);
    put_str(&m, v);
    return request(tag, &m, NULL, NULL, 0, err);
}
static int rem_tag(void *ctx, int64_t run, const char *k, const char *v, nb_err *err) {
    (void)ctx;
    return rem_kv(TAG_TAG, run, k, v, err);
}
static int rem_param(void *ctx, int64_t run, const char *k, const char *v, nb_err *err) {
    (void)ctx;
    return rem_kv(TAG_PARAM, run, k, v, err);
}

static int rem_metrics(void *ctx, int64_t run, const nb_metric *ms, int n, nb_err *err) {
    (void)ctx;
    msg m = {0};
    put_i64(&m, run);
    put_i64(&m, n);
    for (int i = 0; i < n; i++) {
        put_str(&m, ms[i].name);
        put_i64(&m, ms[i].step);
        put_f64(&m, ms[i].wall);
        put_f64(&m, ms[i].value);
    }
    return request(TAG_METRICS, &m, NULL, NULL, 0, err);
}

static int rem_finish(void *ctx, int64_t run, const char *status, const char *message,
                      nb_err *err) {
    (void)ctx;
    msg m = {0};
    put_i64(&m, run);
    put_str(&m, status);
    put_str(&m, message);
    return request(TAG_FINISH, &m, NULL, NULL, 0, err);
}

/* Reads a whole checkpoint into a new buffer. */
static char *slurp(const char *path, size_t *n, nb_err *err) {
    char *p = NULL;
    if (nb_read_file(path, NB_MPI_CKPT_MAX, 0, &p, n, err)) return NULL;
    return p;
}

static int rem_ckpt_saved(void *ctx, int64_t run, const char *path, nb_err *err) {
    (void)ctx;
    size_t n = 0;
    char *bytes = slurp(path, &n, err);
    if (!bytes) return -1;
    msg m = {0};
    put_i64(&m, run);
    put_bytes(&m, bytes, n);
    free(bytes);
    return request(TAG_CKPT, &m, NULL, NULL, 0, err);
}

static void send_ready(long job, int code, int stopping) {
    char host[256];
    nb_hostname(host, sizeof host);
    msg m = {0};
    put_i64(&m, job);
    put_i64(&m, code);
    put_i64(&m, stopping);
    put_str(&m, host);
    send_msg(0, TAG_READY, &m);
    msg_free(&m);
}

/* Removes the files in dir (this rank's copies of checkpoints), and dir itself with rmdir_too. */
static void clear_dir(const char *dir, int rmdir_too) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    if (rmdir_too) rmdir(dir);
}

int nb_mpi_sweep_worker(volatile sig_atomic_t *stop, nb_mpi_job_fn run) {
    /* checkpoints are written here, then copied to rank 0 */
    char dir[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/normbench-rank%d-%ld", tmp && *tmp ? tmp : "/tmp", mpi_rank,
             (long)getpid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        say("warning: rank %d cannot create '%s': %s\n", mpi_rank, dir, strerror(errno));
    nb_run_rec rec = {.create = rem_create,
                      .tag = rem_tag,
                      .param = rem_param,
                      .metrics = rem_metrics,
                      .finish = rem_finish,
                      .ckpt_saved = rem_ckpt_saved,
                      .ckpt_dir = dir};
    send_ready(-1, 0, 0);
    for (;;) {
        msg m;
        MPI_Status st;
        recv_msg(0, MPI_ANY_TAG, &m, &st);
        if (st.MPI_TAG != TAG_JOB) {
            msg_free(&m);
            break;
        }
        nb_mpi_job job;
        memset(&job, 0, sizeof job);
        job.index = (long)get_i64(&m);
        job.config = get_str(&m);
        job.args = get_str(&m);
        job.host = get_str(&m);
        job.tag = get_str(&m);
        job.variant = get_str(&m);
        job.resume_run = get_i64(&m);
        job.resume_step = get_i64(&m);
        take(&m, &job.ident, sizeof job.ident);
        job.ckpt = get_bytes(&m, &job.ckpt_len);
        int code = NB_EXIT_FAIL;
        char ckpt[4200] = "";
        nb_err err;
        nb_err_clear(&err);
        if (m.bad || !job.config || !job.args || !job.host) {
            say("error: rank %d: a malformed job from rank 0\n", mpi_rank);
        } else if (job.ckpt && ((size_t)snprintf(ckpt, sizeof ckpt, "%s/run-%lld.ckpt", dir,
                                                 (long long)job.resume_run) >= sizeof ckpt ||
                                write_atomic(ckpt, job.ckpt, job.ckpt_len, &err) != 0)) {
            report_err(&err);
        } else {
            code = run(&job, job.ckpt ? ckpt : NULL, &rec, stop);
        }
        clear_dir(dir, 0); /* rank 0 keeps the checkpoints: these copies go */
        free(job.config);
        free(job.args);
        free(job.host);
        free(job.tag);
        free(job.variant);
        free(job.ckpt);
        msg_free(&m);
        send_ready(job.index, code, stop && *stop);
    }
    clear_dir(dir, 1);
    return 0;
}

/* ---- a data-parallel run's resume ------------------------------------------------------------ */

/* ---- the set-up agreements (run/mpi.h) ------------------------------------------------------ */

static int setup_pending = 0;
/* every rank's data_dir, from the configuration's agreement (for the data's message) */
static char **setup_dirs = NULL;

static void setup_dirs_free(void) {
    for (int r = 0; setup_dirs && r < mpi_size; r++)
        free(setup_dirs[r]);
    free(setup_dirs);
    setup_dirs = NULL;
}

void nb_mpi_setup_begin(void) {
    setup_pending = 1;
    setup_dirs_free();
}

static const char *stage_name(int64_t stage) {
    switch (stage) {
    case NB_MPI_START:
        return "the start (--resume or a new run)";
    case NB_MPI_CONFIG:
        return "the configuration";
    case NB_MPI_STATUS:
        return "a status check";
    case NB_MPI_DATA:
        return "the data";
    default:
        return "a failed set-up";
    }
}

/* One exchange: every rank's {stage, rc, text length}, then (when every rc is 0 and every stage
 * the same) every rank's text. Returns the largest rc (texts not exchanged, *failed the lowest
 * rank that failed), -1 when the stages differ (*failed the lowest rank at another stage than
 * rank 0), else 0 with *texts (mpi_size strings, free with texts_free). Collective: every rank
 * takes the same path through it. */
static int exchange(int stage, int rc, const char *text, char ***texts, int *failed) {
    int64_t h[3] = {stage, rc, text ? (int64_t)strlen(text) : 0};
    int64_t *all = malloc(sizeof h * (size_t)mpi_size);
    if (!all) { /* 24 bytes a rank: nothing can go on, and the others must not wait */
        say("error: rank %d: out of memory\n", mpi_rank);
        MPI_Abort(MPI_COMM_WORLD, NB_EXIT_FAIL);
    }
    MPI_Allgather(h, 3, MPI_INT64_T, all, 3, MPI_INT64_T, MPI_COMM_WORLD);
    int64_t worst = 0, bad = 0;
    *failed = -1;
    for (int r = 0; r < mpi_size; r++)
        if (all[3 * r + 1] != 0) {
            if (*failed < 0) *failed = r;
            if (all[3 * r + 1] > worst) worst = all[3 * r + 1];
        }
    if (worst) {
        free(all);
        return (int)worst;
    }
    for (int r = 1; r < mpi_size; r++)
        if (all[3 * r] != all[0]) {
            *failed = r;
            if (mpi_rank == 0)
                say("error: the ranks are out of step: rank 0 is at %s, rank %d at %s\n"
                    "hint: start every rank of a data-parallel run with the same command\n",
                    stage_name(all[0]), r, stage_name(all[3 * r]));
            free(all);
            return -1;
        }
    int *cnt = malloc(sizeof(int) * (size_t)mpi_size),
        *off = malloc(sizeof(int) * (size_t)mpi_size);
    int64_t total = 0;
    for (int r = 0; cnt && off && r < mpi_size; r++) {
        cnt[r] = (int)all[3 * r + 2];
        off[r] = (int)total;
        total += all[3 * r + 2];
    }
    char *buf = cnt && off && total < INT32_MAX ? malloc((size_t)total + 1) : NULL;
    char **t = buf ? calloc((size_t)mpi_size, sizeof *t) : NULL;
    bad = !t;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (!bad)
        MPI_Allgatherv(text ? text : "", (int)h[2], MPI_CHAR, buf, cnt, off, MPI_CHAR,
                       MPI_COMM_WORLD);
    for (int r = 0; !bad && r < mpi_size; r++) {
        t[r] = malloc((size_t)cnt[r] + 1);
        if (t[r]) {
            memcpy(t[r], buf + off[r], (size_t)cnt[r]);
            t[r][cnt[r]] = '\0';
        }
    }
    free(buf), free(cnt), free(off), free(all);
    int lost = bad;
    for (int r = 0; !bad && r < mpi_size; r++)
        lost |= !t[r];
    int64_t l = lost;
    MPI_Allreduce(MPI_IN_PLACE, &l, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (l) {
        if (lost) say("error: rank %d: out of memory\n", mpi_rank);
        for (int r = 0; t && r < mpi_size; r++)
            free(t[r]);
        free(t);
        return NB_EXIT_FAIL;
    }
    *texts = t;
    return 0;
}

static void texts_free(char **t) {
    for (int r = 0; t && r < mpi_size; r++)
        free(t[r]);
    free(t);
}

/* The keys that may differ per rank: where the data lie (the data themselves are compared when
 * loaded) and how many threads a rank uses. */
static int per_rank_key(const char *key) {
    return strcmp(key, "data_dir") == 0 || strcmp(key, "threads") == 0;
}

/* The option that sets a configuration key. */
static void option_of(const char *key, char *out, size_t size) {
    static const char *const map[][2] = {{"eps_placement", "eps-outside"},
                                         {"bn_batch_variance", "bn-var"},
                                         {"bn_running_variance", "bn-var"},
                                         {"wn_init", "no-wn-init"},
                                         {"activation", "act"},
                                         {"adam_eps_placement", "adam-eps-inside"},
                                         {"adam_bias_correction", "adam-bias"},
                                         {"clip_global", "clip"},
                                         {"denormals", "no-ftz"},
                                         {"bn_statistics", "bn-sync"},
                                         {"model_label", "model"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(key, map[i][0]) == 0) {
            snprintf(out, size, "--%s", map[i][1]);
            return;
        }
    snprintf(out, size, "--%s", key);
    for (char *c = out; *c; c++)
        if (*c == '_') *c = '-';
}

/* The next member of configuration o from *i on that must be the same on every rank, or NULL. */
static const nb_json_member *shared_member(const nb_json_object *o, int *i) {
    while (*i < o->n && per_rank_key(o->kv[*i].key))
        (*i)++;
    return *i < o->n ? &o->kv[(*i)++] : NULL;
}

/* Member m's key and value as a message shows them (a string in quotes; none: "(none)"). */
static void shown(const nb_json_member *m, char *k, char *v, size_t size) {
    snprintf(k, size, "%s", m ? m->key : "(none)");
    snprintf(v, size, m && m->is_string ? "\"%s\"" : "%s", m ? m->value : "");
}

/* Whether rank r's configuration cr differs from rank 0's c0 (each read with util/json.h's
 * reader): the first differing key and both values (keys k0/kr differ when the configurations
 * hold different keys there). A configuration that is not one whole JSON object differs. */
static int config_diff(const char *c0, const char *cr, char *k0, char *v0, char *kr, char *vr,
                       size_t size) {
    nb_json_object o0, orr;
    int bad = nb_json_read_object(c0, &o0) != 0;
    bad |= nb_json_read_object(cr, &orr) != 0;
    int diff = 0;
    for (int i = 0, j = 0; !diff;) {
        const nb_json_member *a = shared_member(&o0, &i), *b = shared_member(&orr, &j);
        if (!a && !b) break;
        shown(a, k0, v0, size);
        shown(b, kr, vr, size);
        diff = !a || !b || strcmp(a->key, b->key) != 0 || strcmp(a->value, b->value) != 0 ||
               a->is_string != b->is_string;
    }
    if (bad && !diff) { /* read alike up to where one is malformed: the texts */
        snprintf(k0, size, "(configuration)");
        snprintf(kr, size, "(configuration)");
        snprintf(v0, size, "%s", c0 ? c0 : "");
        snprintf(vr, size, "%s", cr ? cr : "");
        diff = strcmp(c0 ? c0 : "", cr ? cr : "") != 0;
    }
    nb_json_object_free(&o0);
    nb_json_object_free(&orr);
    return diff;
}

/* A rank's data_dir from its configuration ("?" when none). */
static char *dir_of(const char *cfg) {
    nb_json_object o;
    nb_json_read_object(cfg, &o);
    const char *d = nb_json_get_str(&o, "data_dir");
    char *out = strdup(d ? d : "?");
    nb_json_object_free(&o);
    return out;
}

/* On rank 0: rank `failed` (and perhaps others) could not set up; every rank stops. */
static void say_failed(int failed) {
    if (mpi_rank == 0 && failed > 0)
        say("error: rank %d could not set up the run (its error is above): every rank "
            "stops\n",
            failed);
}

int nb_mpi_setup_agree(int stage, int rc, const char *text) {
    char **t = NULL;
    int failed = -1;
    int x = exchange(stage, rc, text, &t, &failed);
    if (x != 0) {
        setup_pending = 0;
        setup_dirs_free();
        if (x > 0) say_failed(failed);
        return x > 0 ? x : NB_EXIT_FAIL;
    }
    int out = 0;
    enum { N = 4200 };
    char *k0 = malloc(N), *v0 = malloc(N), *kr = malloc(N), *vr = malloc(N);
    if (!k0 || !v0 || !kr || !vr) {
        say("error: rank %d: out of memory\n", mpi_rank);
        out = NB_EXIT_FAIL;
    }
    for (int r = 1; !out && r < mpi_size; r++) {
        if (stage == NB_MPI_CONFIG ? !config_diff(t[0], t[r], k0, v0, kr, vr, N)
                                   : strcmp(t[0], t[r]) == 0)
            continue;
        out = NB_EXIT_USAGE;
        char opt[300];
        option_of(k0, opt, sizeof opt);
        if (stage != NB_MPI_CONFIG) {
            if (mpi_rank == 0)
                say("error: the ranks were started differently: rank 0 %s, rank %d %s\n"
                    "hint: start every rank of a data-parallel run with the same command\n",
                    t[0], r, t[r]);
        } else if (strcmp(k0, kr) != 0) {
            if (mpi_rank == 0)
                say("error: the ranks were given different options: rank 0's configuration "
                    "has %s where rank %d's has %s\n"
                    "hint: start every rank of a data-parallel run with the same options\n",
                    k0, r, kr);
        } else if (mpi_rank == 0) {
            say("error: the ranks were given different options: %s is %s on rank 0 but %s "
                "on rank %d (%s)\n"
                "hint: start every rank of a data-parallel run with the same options (only "
                "--data-dir, --threads, --db, --quiet and --no-fetch may differ)\n",
                k0, v0, vr, r, opt);
        }
        const char *what = stage == NB_MPI_CONFIG ? "options" : "command line";
        if (mpi_rank == r)
            say("error: rank %d stops: its %s differ from rank 0's (rank 0 says how)\n", r, what);
        else if (mpi_rank != 0)
            say("error: rank %d stops: rank %d's %s differ from rank 0's\n", mpi_rank, r, what);
    }
    if (!out && stage == NB_MPI_CONFIG) { /* kept for the data's message */
        setup_dirs_free();
        setup_dirs = calloc((size_t)mpi_size, sizeof *setup_dirs);
        for (int r = 0; setup_dirs && r < mpi_size; r++)
            setup_dirs[r] = dir_of(t[r]);
    }
    free(k0), free(v0), free(kr), free(vr);
    texts_free(t);
    /* out differs from 0 on every rank alike (every rank compared the same texts) */
    if (out) {
        setup_pending = 0;
        setup_dirs_free();
    }
    return out;
}

void nb_mpi_setup_fail(int rc) {
    if (!setup_pending) return;
    char **t = NULL;
    int failed = -1;
    (void)exchange(NB_MPI_FAILED, rc ? rc : NB_EXIT_FAIL, NULL, &t, &failed);
    setup_pending = 0;
    setup_dirs_free();
}

int nb_mpi_agree(int rc) {
    char **t = NULL;
    int failed = -1;
    int x = exchange(NB_MPI_STATUS, rc, NULL, &t, &failed);
    texts_free(t);
    if (x != 0) {
        setup_pending = 0;
        setup_dirs_free();
        if (x > 0 && failed != 0 && rc == 0) say_failed(failed);
    }
    return x > 0 ? x : x < 0 ? NB_EXIT_FAIL : 0;
}

/* nb_dist.agree: the data's agreement, the last of the set-up. */
static int agree_data(void *ctx, const char *fp, nb_err *err) {
    (void)ctx;
    char **t = NULL;
    int failed = -1;
    int x = exchange(NB_MPI_DATA, 0, fp, &t, &failed);
    setup_pending = 0;
    if (x > 0) {
        nb_errf(err, "rank %d could not set up the run (its error is above)", failed);
        nb_hintf(err, "every rank stops; fix what rank %d reported and start the run again",
                 failed);
    } else if (x < 0) {
        nb_errf(err, "the ranks are out of step at the data (rank %d)", failed);
        nb_hintf(err, "start every rank of a data-parallel run with the same command");
    }
    for (int r = 1; x == 0 && r < mpi_size; r++) {
        if (strcmp(t[0], t[r]) == 0) continue;
        x = 1;
        /* the first line that differs: "PART BYTES HASH" */
        const char *a = t[0], *b = t[r];
        while (*a && *a == *b) {
            const char *na = strchr(a, '\n'), *nb = strchr(b, '\n');
            if (!na || !nb || na - a != nb - b || memcmp(a, b, (size_t)(na - a)) != 0) break;
            a = na + 1;
            b = nb + 1;
        }
        int la = (int)strcspn(a, "\n"), lb = (int)strcspn(b, "\n");
        const char *d0 = setup_dirs && setup_dirs[0] ? setup_dirs[0] : "?";
        const char *dr = setup_dirs && setup_dirs[r] ? setup_dirs[r] : "?";
        char dirs[9000] = "";
        if (strcmp(d0, dr) != 0)
            snprintf(dirs, sizeof dirs, " (--data-dir %.4000s on rank 0, %.4000s on rank %d)", d0,
                     dr, r);
        char who[64] = "";
        if (mpi_rank != 0) snprintf(who, sizeof who, "rank %d stops: ", mpi_rank);
        if (mpi_rank == 0 || mpi_rank == r)
            nb_errf(err,
                    "%sthe ranks loaded different data%s: rank 0 has %.*s, rank %d has %.*s "
                    "(part, bytes, hash)",
                    who, dirs, la ? la : 6, la ? a : "(none)", r, lb ? lb : 6, lb ? b : "(none)");
        else
            nb_errf(err, "rank %d stops: rank %d's data differ from rank 0's", mpi_rank, r);
        nb_hintf(err, "give every rank the same data: the same files under each rank's "
                      "--data-dir (normbench fetch on every host)");
    }
    texts_free(t);
    setup_dirs_free();
    return x ? -1 : 0;
}

/* Rank 0's n bytes at *p to every rank (the others: *p newly allocated, NULL when out of
 * memory; *n -1 on rank 0: there is nothing, every rank gets *p NULL). Collective. */
static void bcast_bytes(char **p, int64_t *n) {
    MPI_Bcast(n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (*n < 0) {
        if (mpi_rank != 0) *p = NULL;
        return;
    }
    char *buf = mpi_rank == 0 ? *p : malloc((size_t)*n + 1);
    /* every rank takes part, with or without room: a rank short of memory receives into sink */
    static char sink[1 << 16];
    for (int64_t i = 0; i < *n; i += 1 << 30) {
        int k = (int)(*n - i < (1 << 30) ? *n - i : (1 << 30));
        if (buf) {
            MPI_Bcast(buf + i, k, MPI_BYTE, 0, MPI_COMM_WORLD);
        } else {
            for (int j = 0; j < k; j += (int)sizeof sink) {
                int m = k - j < (int)sizeof sink ? k - j : (int)sizeof sink;
                MPI_Bcast(sink, m, MPI_BYTE, 0, MPI_COMM_WORLD);
            }
        }
    }
    if (mpi_rank != 0) *p = buf;
}

int nb_mpi_share_resume(nb_mpi_resume *r, const char *ckpt_path) {
    msg m = {0};
    int64_t n = -1;
    int bad = 0;
    if (mpi_rank == 0) {
        r->ckpt = NULL;
        r->ckpt_len = 0;
        nb_err err;
        nb_err_clear(&err);
        if (r->rc == 0 && ckpt_path && !(r->ckpt = slurp(ckpt_path, &r->ckpt_len, &err))) {
            bad = report_err(&err);
        } else {
            put_i64(&m, r->rc);
            put_str(&m, r->hosting);
            put_str(&m, r->config);
            put_i64(&m, r->step);
            put(&m, &r->ident, sizeof r->ident);
            put_i64(&m, r->bn_groups);
            put_i64(&m, r->ranks);
            if (r->ckpt)
                put_bytes(&m, r->ckpt, r->ckpt_len);
            else
                put_i64(&m, -1);
            if (m.bad)
                bad = die("out of memory for the checkpoint's message to the other ranks");
            else
                n = (int64_t)m.len;
        }
    }
    bcast_bytes(&m.p, &n);
    if (mpi_rank != 0) {
        memset(r, 0, sizeof *r);
        if (n >= 0 && !m.p) {
            bad = die("rank %d: out of memory for rank 0's checkpoint", mpi_rank);
        } else if (n >= 0) {
            m.len = m.cap = (size_t)n;
            r->rc = (int)get_i64(&m);
            r->hosting = get_str(&m);
            r->config = get_str(&m);
            r->step = get_i64(&m);
            take(&m, &r->ident, sizeof r->ident);
            r->bn_groups = get_i64(&m);
            r->ranks = get_i64(&m);
            r->ckpt = get_bytes(&m, &r->ckpt_len);
            if (m.bad) bad = die("rank %d: a malformed resume message from rank 0", mpi_rank);
        }
    }
    msg_free(&m);
    /* n < 0: rank 0 failed and said why */
    int rc = nb_mpi_agree(bad || n < 0 ? NB_EXIT_FAIL : 0);
    return rc ? rc : r->rc;
}

int nb_mpi_ckpt_copy(const char *p, size_t n, int64_t run, char *path, size_t size, nb_err *err) {
    char dir[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%.4000s/normbench-rank%d-%ld", tmp && *tmp ? tmp : "/tmp", mpi_rank,
             (long)getpid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return nb_errf(err, "rank %d cannot create '%s': %s", mpi_rank, dir, strerror(errno));
    if ((size_t)snprintf(path, size, "%s/run-%lld.ckpt", dir, (long long)run) >= size)
        return nb_errf(err, "directory '%s' is too long", dir);
    return write_atomic(path, p, n, err);
}

void nb_mpi_ckpt_copy_drop(const char *path) {
    if (!path || !*path) return;
    unlink(path);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        rmdir(dir);
    }
}
