/* cmd/cmd_bench.c — `normbench bench kernels|step TASK`: timings as ratios against a baseline
 * measured in the same run, with the thread and BLAS settings printed beside them. */
#include "cmd/cmd.h"
#include "bench/bench.h"
#include "run/mpi.h"

#include "nn/blas.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nn/cuda/nbcuda.h"
#include "nn/nn.h"
#include "tasks/task.h"
#include "util/json.h"

static const char bench_usage[] =
    "usage: normbench bench kernels [--norms LIST] [--shapes LIST] [--format table|csv|json]\n"
    "                               [--threads N]\n"
    "       normbench bench conv [--batch N] [--steps N] [--format table|csv|json] [--threads N]\n"
    "       normbench bench step TASK [--norms LIST] [--batch LIST] [--steps N]\n"
    "                               [--format table|csv|json] [--threads N] [--against pytorch]\n"
    "  mpirun -np N normbench bench step TASK [--bn-sync] [--against threads] [same options]\n"
    "       normbench bench --from FILE.csv [--format table|md]\n\n"
    "kernels: times each norm's forward and forward+backward on the MLP's shape (128x1000) and\n"
    "  a memory-bound one (65536x1024), or at the shapes --shapes lists (ROWSxCOLUMNS, comma-\n"
    "  separated), in GB/s (bytes read and written once) and as a ratio\n"
    "  to a parallel copy: each repetition of a kernel is paired with one of the copy, and\n"
    "  vs_copy is the median over pairs (copy GB/s is the median copy beside that kernel).\n"
    "  'all' (the default, kernels and step alike) is every norm (DyT, y = g*tanh(alpha*x) + b,\n"
    "  at alpha 0.5); with --device cuda, those with CUDA kernels.\n"
    "  For step, 'all' is the norms the task takes (lm's and draw's: all but batch).\n"
    "conv: the 3x3 layers of cifar's ConvPool-CNN-C (width 1) through each convolution engine of\n"
    "  'run cifar --conv': im2col + sgemm, Winograd F(2x2,3x3) (wino2) and F(4x4,3x3) (wino4),\n"
    "  forward and backward, with --grad-sums batch and example (exact) sums, at batch 100 (or\n"
    "  --batch N), over --steps rounds (5) in which the engines take turns; per engine the\n"
    "  median ms, and vs_w2 / vs_w4 = im2col's time / the engine's (median over rounds, 95%\n"
    "  interval). The settings line gives the load average at the start and the end.\n"
    "step TASK: milliseconds per training step (forward, backward, Adam) per norm on generated\n"
    "  data; mnist at batch 128 and 4 by default, cifar at 100, order at 128 (13-word\n"
    "  captions), mt at 80 sentences of 30 tokens each side (the task's options choose the\n"
    "  model: 'bench step mt --model transformer --batch 133' for ~4,000 tokens), draw at 128\n"
    "  synthetic images (the paper's DRAW: 256 units, 64 glimpses; 'bench step draw --preset\n"
    "  small': 64 units, 16 glimpses). vs_layer is layer's time / this norm's time, with its\n"
    "  95% interval (a bootstrap over the timed steps: whether the run can tell the norm from\n"
    "  layer at all); norm_share is (this - none) / this: the share of the step the norm costs\n"
    "  beyond the step without one (when none is timed too). Tasks that describe their GEMMs\n"
    "  (cifar, mt) also get GFLOP/s per norm and, after the table, OpenBLAS sgemm alone timed\n"
    "  on the same shapes in the same run: their sum is the step's GEMM floor, and\n"
    "  1 - floor/step the share of everything else.\n"
    "  reader also takes the name batch-everywhere in --norms (not in 'all'): 'run reader --norm\n"
    "  batch --bn-everywhere', BN on the attention and output layers too.\n"
    "step TASK --against pytorch: the same training step in PyTorch (compare/pytorch/TASK.py,\n"
    "  run by Debian's python3-torch or $NORMBENCH_PYTHON) in a child process, its steps and\n"
    "  normbench's interleaved in rounds; per norm both medians, PyTorch's / normbench's with\n"
    "  its 95% interval, and both sides' settings (threads, BLAS, oneDNN). Where PyTorch has a\n"
    "  fused form (nn.GRU, nn.LSTM) it gets its own row beside the task's norm. The task's\n"
    "  own options (mt's --model, --dim) go to both sides.\n"
    "step TASK under mpirun -np N (N > 1; every task): the data-parallel step of 'run' over\n"
    "  the ranks: each rank steps on its rows of the batch, the gradients are summed in one\n"
    "  MPI_Allreduce, every rank updates. Rank 0 prints (the others print nothing) the step time\n"
    "  on its clock, allreduce_share (time in the sums over the ranks / step time, median over\n"
    "  steps: communication plus waiting for the slowest rank), allreduce_ms and the bytes summed\n"
    "  per step (4 per parameter), with ranks, threads per rank and BLAS in the settings.\n"
    "  BatchNorm keeps per-rank statistics unless --bn-sync. --threads applies to every rank.\n"
    "  --against threads: after each round over the ranks, rank 0 alone (the others asleep)\n"
    "  runs the same steps at the whole batch with ranks x threads threads: one_proc_ms and\n"
    "  vs_one_proc = ms_per_step / one_proc_ms, interleaved so that a busy machine hits both.\n"
    "--format csv: one row per result, with the settings, and (last) machine (the processor as\n"
    "  /proc/cpuinfo names it, and the cores online) and date (UTC, when the benchmark started).\n"
    "--from FILE.csv: no benchmark: the table of a kept --format csv file (any of the above),\n"
    "  as text (table) or Markdown (md: what the results pages in docs/ hold, regenerated by\n"
    "  'make docs'), with the machine, date, threads and BLAS it records ('not recorded': a\n"
    "  file from before the machine and date columns) and its ratios with their intervals. A\n"
    "  file that is not such a CSV whole (another header or version, a row with another number\n"
    "  of fields, a value that is not a number where one is due, a file cut short) is refused,\n"
    "  naming the file and the line (exit 1).\n"
    "Timings are medians over repetitions; they move run to run, so compare within one run.\n";

static const char *const format_choices[] = {"table", "csv", "json", "md", NULL};
static const char *const device_choices[] = {"cpu", "cuda", NULL};

/* The benchmarks' messages: on stderr. */
static void bench_say(void *ctx, const char *text) {
    fputs(text, stderr);
}

int cmd_bench(int argc, const char **argv) {
    static nb_bench bench; /* large (the task's options, the labels): not on the stack */
    nb_bench *b = &bench;
    memset(b, 0, sizeof *b);
    b->io = (nb_bench_io){.out = stdout, .say = bench_say}; /* the tables on stdout */
    const char *norms_arg = NULL, *batch_arg = NULL, *against = NULL, *shapes_arg = NULL,
               *from = NULL;
    int fmt = FMT_TABLE, threads = 0, steps = 30, dtype = 0;
    static const char *const dtype_choices[] = {"fp32", "bf16", NULL};
    nb_opt opts[] = {
        {"norms", NB_OPT_STR, &norms_arg, "LIST", "norms to time, comma-separated, or all (all)"},
        {"batch", NB_OPT_STR, &batch_arg, "LIST", "step: batch sizes (task default; mnist 128,4)"},
        {"shapes", NB_OPT_STR, &shapes_arg, "LIST",
         "kernels (CPU): rows x columns to time, e.g. 128x1000,4096x768 (128x1000,65536x1024)"},
        {"steps", NB_OPT_INT, &steps, "N", "step: timed steps per row (30)", NULL, 1, 100000},
        NB_OPT_FORMAT(&fmt, format_choices),
        {"threads", NB_OPT_INT, &threads, "N", "threads (default: OMP_NUM_THREADS or all cores)",
         NULL, 1, 1024},
        {"device", NB_OPT_CHOICE, &b->device, "D", "cpu, or cuda (kernels; step mnist)",
         device_choices},
        {"against", NB_OPT_STR, &against, "FW",
         "step: time the same step in another framework beside it (pytorch), or under mpirun in "
         "one process with all the ranks' threads (threads)"},
        {"dtype", NB_OPT_CHOICE, &dtype, "T", "kernels --device cuda: fp32 or bf16 I/O (fp32)",
         dtype_choices},
        {"bn-sync", NB_OPT_FLAG, &b->bn_sync, NULL,
         "step under mpirun: BatchNorm statistics over the global batch (default: per rank)"},
        {"from", NB_OPT_STR, &from, "FILE",
         "no benchmark: show a kept --format csv file as a table (--format table or md)"},
        {NULL},
    };
    /* the task's own options (mt's --model, --dim): kept aside for the step benchmark's task */
    const char *args[256];
    int nargs = 0;
    b->ngiven = 0;
    for (int i = 0; i < argc && nargs < 255; i++) {
        int known = 0, flag = 0;
        if (i > 0 && strncmp(argv[i], "--", 2) == 0 && argv[i][2] && !strchr(argv[i], '='))
            flag = nb_task_opt_is_flag(argv[i] + 2, &known);
        if (!known || b->ngiven >= MAXGIVEN) {
            args[nargs++] = argv[i];
            continue;
        }
        const char *name = argv[i] + 2, *v = NULL;
        if (!flag) {
            if (i + 1 >= argc) return nb_usage_error("bench", "option '%s' needs a value", argv[i]);
            v = argv[++i];
        }
        b->given[b->ngiven++] = (nb_given){name, v};
    }
    args[nargs] = NULL;
    const char *pos[2];
    int npos = 0;
    int rc = nb_parse_opts("bench", bench_usage, nargs, args, opts, pos, 2, &npos);
    if (rc < 0) return NB_EXIT_OK;
    if (rc) return rc;
    if (from) { /* a kept CSV shown: nothing else applies */
        if (npos > 0)
            return nb_usage_error("bench", "--from FILE shows a kept CSV: leave out '%s'", pos[0]);
        if (b->ngiven)
            return nb_usage_error("bench", "--from FILE takes only --format, not '--%s'",
                                  b->given[0].name);
        for (const nb_opt *o = opts; o->name; o++)
            if (o->seen && strcmp(o->name, "from") != 0 && strcmp(o->name, "format") != 0)
                return nb_usage_error("bench", "--from FILE takes only --format, not '--%s'",
                                      o->name);
        if (fmt != FMT_TABLE && fmt != FMT_MD)
            return nb_usage_error("bench", "--from FILE prints a table: --format table or md (the "
                                           "file is the csv)");
        return nb_bench_from(&b->io, from, fmt == FMT_MD);
    }
    if (fmt == FMT_MD)
        return nb_usage_error("bench", "--format md is for --from FILE.csv: a benchmark prints "
                                       "table, csv or json");
    if (npos < 1)
        return nb_usage_error("bench", "what to benchmark? 'kernels', 'conv' or 'step TASK'");
    if (b->ngiven && (strcmp(pos[0], "step") != 0 || npos < 2))
        return nb_usage_error("bench", "'--%s' is a task's option: it goes with 'bench step TASK'",
                              b->given[0].name);
    nb_note_blas_core();
    /* the labels (batch-everywhere) are taken out of the list before the six norms are parsed */
    nb_bench_find_labels(b);
    int norms[NB_NORMS_MAX + MAXLABELS], lrows[MAXLABELS], nl = 0;
    char rest[512];
    int src =
        nb_bench_split_labels(b, norms_arg ? norms_arg : "all", rest, sizeof rest, lrows, &nl);
    if (src < 0) return nb_usage_error("bench", "invalid norm list '%s'", norms_arg);
    if (src > 0) return nb_usage_error("bench", "a norm is listed twice in '%s'", norms_arg);
    int nnorms = rest[0] || !nl ? nb_parse_norm_list("bench", rest, norms, NB_NORMS_MAX) : 0;
    if (nnorms < 0) return NB_EXIT_USAGE;
    /* 'all': the benchmarks, kernels and step alike, time every norm of the table (a norm out
     * of sweep's 'all' too, last); on CUDA those with kernels */
    if (strcmp(rest, "all") == 0) {
        if (!b->device)
            for (int k = 0; k < nb_norm_count(); k++)
                if (!nb_norm_get((nb_norm_kind)k)->in_all) norms[nnorms++] = k;
        int kept = 0;
        for (int i = 0; i < nnorms; i++)
            if (!b->device || nb_norm_get((nb_norm_kind)norms[i])->cuda) norms[kept++] = norms[i];
        nnorms = kept;
    }
    for (int i = 0; i < nnorms; i++)
        if (b->device && !nb_norm_get((nb_norm_kind)norms[i])->cuda)
            return nb_usage_error("bench",
                                  "%s has no CUDA kernels yet: leave it out of --norms "
                                  "with --device cuda",
                                  nb_norm_name((nb_norm_kind)norms[i]));
    for (int l = 0; l < nl; l++) {
        const char *t = npos > 1 ? pos[1] : "";
        int li = lrows[l] - NB_NORMS_MAX;
        if (strcmp(pos[0], "step") != 0 || strcmp(t, b->labels[li].task->name) != 0) {
            fprintf(stderr,
                    "error: '%s' (%s --%s) exists only for 'bench step %s'\nhint: leave it out "
                    "of --norms, or time 'normbench bench step %s --norms %s,%s'\n",
                    b->labels[li].name, b->labels[li].task->name, b->labels[li].flag,
                    b->labels[li].task->name, b->labels[li].task->name,
                    nb_norm_name((nb_norm_kind)b->labels[li].base), b->labels[li].name);
            return NB_EXIT_USAGE;
        }
        /* shown right after its base norm when that is timed too, else last */
        int at = nnorms;
        for (int i = 0; i < nnorms; i++)
            if (norms[i] == b->labels[li].base) at = i + 1;
        memmove(norms + at + 1, norms + at, sizeof(int) * (size_t)(nnorms - at));
        norms[at] = lrows[l];
        nnorms++;
    }
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    b->dp = nb_mpi_on() && nb_mpi_size() > 1;
    b->vs_threads = against && strcmp(against, "threads") == 0;
    if (b->vs_threads && !b->dp)
        return nb_usage_error("bench", "--against threads compares 'bench step' under mpirun -np N "
                                       "(N > 1) with one process: start it with mpirun");
    if (b->vs_threads) against = NULL; /* a mode of the data-parallel step, not another side */
    if (against && strcmp(against, "pytorch") != 0)
        return nb_usage_error("bench",
                              "unknown framework '%s' for --against: use 'pytorch' (or 'threads' "
                              "under mpirun)",
                              against);
    if (against && strcmp(pos[0], "step") != 0)
        return nb_usage_error("bench", "--against is for 'bench step TASK'");
    if (against && b->device)
        return nb_usage_error("bench", "--against pytorch compares CPU steps: leave out --device");
    /* under mpirun with more than one rank: the data-parallel step, timed over the ranks */
    if (b->bn_sync && !b->dp)
        return nb_usage_error("bench", "--bn-sync is for 'bench step TASK' under mpirun with more "
                                       "than one rank");
    if (b->dp) {
        const char *why = strcmp(pos[0], "step") != 0 ? "'bench kernels' times one process"
                          : against                   ? "--against pytorch times one process"
                          : b->device                 ? "--device cuda has no data-parallel step"
                                                      : NULL;
        if (why)
            return nb_usage_error("bench", "%s, not %d ranks: run it without mpirun", why,
                                  nb_mpi_size());
    }
    if (strcmp(pos[0], "conv") == 0) {
        if (npos > 1) return nb_usage_error("bench", "unexpected argument '%s'", pos[1]);
        if (norms_arg || shapes_arg || against || b->device)
            return nb_usage_error("bench", "'bench conv' takes --batch N, --steps N, --format and "
                                           "--threads (its layers and engines are fixed)");
        int N = 100, rounds = 5;
        if (batch_arg && (nb_bench_parse_int_list(batch_arg, &N, 1) != 1 || N < 1 || N > 4096))
            return nb_usage_error("bench",
                                  "--batch '%s': 'bench conv' takes one batch size, 1 to "
                                  "4096",
                                  batch_arg);
        for (int i = 1; i < argc; i++)
            if (strcmp(argv[i], "--steps") == 0 || strncmp(argv[i], "--steps=", 8) == 0)
                rounds = steps; /* given: else 5 rounds, not step's 30 */
        return nb_bench_conv(&b->io, N, rounds, fmt);
    }
    if (shapes_arg && strcmp(pos[0], "kernels") != 0)
        return nb_usage_error("bench", "--shapes goes with 'bench kernels'");
    if (strcmp(pos[0], "kernels") == 0) {
        if (npos > 1) return nb_usage_error("bench", "unexpected argument '%s'", pos[1]);
        if (b->device && shapes_arg)
            return nb_usage_error("bench", "--shapes is for the CPU kernels: leave it out with "
                                           "--device cuda (its shapes are fixed)");
        if (b->device)
            return nb_bench_kernels_cuda(&b->io, norms, nnorms, fmt,
                                         dtype ? NB_CUDA_BF16 : NB_CUDA_F32);
        int shapes[NB_BENCH_MAX_SHAPES][2], nshapes = 0;
        nb_err err;
        nb_err_clear(&err);
        if (shapes_arg && nb_bench_parse_shapes(shapes_arg, shapes, &nshapes, &err))
            return nb_usage_error("bench", "%s", err.msg);
        return nb_bench_kernels(&b->io, norms, nnorms, fmt, shapes_arg ? shapes : NULL, nshapes);
    }
    if (strcmp(pos[0], "step") != 0)
        return nb_usage_error(
            "bench", "unknown benchmark '%s': use 'kernels', 'conv' or 'step TASK'", pos[0]);
    if (npos < 2) return nb_usage_error("bench", "which task? e.g. 'normbench bench step mnist'");
    const nb_task *task = nb_task_find(pos[1]);
    if (!task) return nb_unknown_task("bench", pos[1]);
    if (!task->bench_open || !task->bench_step || !task->bench_close)
        return nb_die("task '%s' has no step benchmark", task->name);
    if (b->dp && !task->data_parallel) {
        fprintf(stderr,
                "error: task '%s' has no data-parallel step benchmark: 'bench step %s' cannot run "
                "over %d ranks\nhint: run it without mpirun ('mpirun normbench run %s' trains "
                "it over ranks); the tasks whose step benchmark runs over ranks are:",
                task->name, task->name, nb_mpi_size(), task->name);
        for (int i = 0; nb_task_at(i); i++)
            if (nb_task_at(i)->data_parallel) fprintf(stderr, " %s", nb_task_at(i)->name);
        fputc('\n', stderr);
        return NB_EXIT_USAGE;
    }
    if (b->ngiven) { /* the task's options checked once, as `run` checks them */
        nb_train_cfg cfg;
        nb_err gerr;
        memset(&cfg, 0, sizeof cfg);
        cfg.norm.kind = nb_norm_default();
        cfg.task = task->name;
        cfg.dataset = task->default_dataset;
        int bad = nb_task_configure(task, &cfg, nb_norm_default(), b->given, b->ngiven, &gerr);
        /* and their combinations (cifar's --precision bf16 on a CPU without it) */
        if (!bad && task->finish) bad = task->finish(&cfg, b->given, b->ngiven, &gerr) != 0;
        nb_task_opts_free(&cfg);
        if (bad) return nb_usage_error("bench", "%s", gerr.msg);
    }
    /* step's 'all': the table's norms that this task takes (lm refuses batch) */
    if (strcmp(rest, "all") == 0)
        nnorms = nb_norms_task_takes(task, norms, nnorms, b->given, b->ngiven);
    if (b->device) {
        nb_err derr;
        nb_err_clear(&derr);
        if (!task->cuda)
            return nb_usage_error("bench", "--device cuda has no GPU path for 'step %s'",
                                  task->name);
        if (nb_cuda_init(&derr)) return nb_report_err(&derr);
    }
    int batches[16], nbatches = 0;
    for (; nbatches < 16 && task->bench_batches[nbatches]; nbatches++)
        batches[nbatches] = task->bench_batches[nbatches];
    if (batch_arg) {
        nbatches = nb_bench_parse_int_list(batch_arg, batches, 16);
        if (nbatches < 1)
            return nb_usage_error("bench", "invalid batch list '%s' (e.g. 128,4)", batch_arg);
    }
    if (against) {
        signal(SIGPIPE, SIG_IGN); /* a child that dies is an error on write, not a signal */
        return nb_bench_against(b, task, norms, nnorms, batches, nbatches, steps, fmt);
    }
    if (b->dp) {
        for (int i = 0; i < nbatches; i++)
            if (batches[i] < nb_mpi_size())
                return nb_usage_error("bench", "batch %d is smaller than the number of ranks (%d)",
                                      batches[i], nb_mpi_size());
        nb_mpi_dist(&b->dist, b->bn_sync);
        b->rank_threads = omp_get_max_threads();
        b->solo_threads = b->rank_threads * b->dist.size;
        int cpus = nb_mpi_cpus();
        if (b->vs_threads && b->dist.rank == 0 && cpus > 0 && cpus < b->solo_threads)
            fprintf(stderr,
                    "warning: rank 0 may run on %d CPU(s) only (mpirun binds ranks to cores), so "
                    "its %d threads alone share them\nhint: start mpirun with --bind-to none for "
                    "--against threads\n",
                    cpus, b->solo_threads);
        /* rank 0 prints; the others time their share in silence */
        if (b->dist.rank != 0 && !freopen("/dev/null", "w", stdout))
            return nb_die("cannot silence rank %d's output", b->dist.rank);
    }
    return nb_bench_step(b, task, norms, nnorms, batches, nbatches, steps, fmt);
}
