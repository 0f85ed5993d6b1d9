# normbench — build, test, demo. See README.md.
#
#   make            build ./normbench
#   make test       install missing Debian packages, build, run unit + gradient + reference + CLI tests
#   make asan       the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make demo       every norm on Fashion-MNIST, then the report
#   make docs       the generated tables and docs/commands.md from their sources, the figures redrawn
#   make lint       -Wall -Wextra -Werror build, cppcheck, clang-format check, banned functions
#   make install    PREFIX=/usr/local (the binary, the man page normbench.1, the bash completion)
#   make cuda       ./normbench with the CUDA backend (nn/cuda/, needs nvcc; see docs/cuda.md)
#   make test-cuda  the CUDA kernels against the CPU ones (on a machine with an NVIDIA GPU)

CC      ?= gcc
BUILD   ?= build
PREFIX  ?= /usr/local
OPT     ?= -O2 -march=native
# -fopenmp: the OpenMP build of OpenBLAS (libopenblas0-openmp) shares libgomp's thread pool with
# our own parallel loops (docs/numerics.md#threads: pthread OpenBLAS beside OpenMP loops slowed both here).
# Open MPI (Debian's libopenmpi-dev): run/mpi.c, for sweeps and data-parallel runs under mpirun
# or srun (docs/mpi.md). Only run/mpi.c includes <mpi.h>.
# -Wno-psabi: gcc notes that 64-byte vector arguments change ABI where AVX-512 is off (an
# -march without it); the helpers are static, so no ABI is crossed.
MPI_CFLAGS ?= $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   ?= $(shell pkg-config --libs ompi-c 2>/dev/null || echo -lmpi)
CFLAGS_ALL = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra -Wshadow \
             -Wno-unused-parameter -Wno-missing-field-initializers -Wno-psabi -fopenmp -I. \
             -I$(BUILD)/gen \
             $(MPI_CFLAGS) $(OPT) $(CFLAGS)
LDLIBS_ALL = -lopenblas -lsqlite3 -larchive -lcurl -lcrypto -lm $(MPI_LIBS) -lpthread $(LDLIBS)

LIB_SRC  := $(sort $(wildcard util/*.c nn/*.c nn/norms/*.c datasets/*.c results/*.c tasks/*.c plots/*.c))
# Generic kernels (nn/real.h) are compiled a second time in double precision for the
# finite-difference tests; see nn/nn.h.
GENERIC  := $(shell grep -l '^#include "\(nn/\)\{0,1\}real.h"' nn/*.c nn/norms/*.c 2>/dev/null)
# The program above the library: the commands (cmd/), and what they call: the run layer (run/: a
# run as a value, executed in-process or over MPI), the benchmarks (bench/) and the report's
# tables and HTML page (report/). See docs/source-tour.md.
CMD_SRC  := $(sort $(wildcard cmd/*.c run/*.c bench/*.c report/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
# Fuzz targets (libFuzzer entry points), one per parser: tests/fuzz/fuzz_NAME.c with seeds in
# tests/fuzz/corpus/NAME/. Adding a file adds the target; see tests/fuzz/driver.c.
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(GENERIC:%.c=$(BUILD)/%_f64.o)

# The CUDA backend: NB_CUDA=1 (what `make cuda` sets) compiles nn/cuda/*.cu with nvcc for
# Hopper (sm_90 machine code) plus compute_90 PTX that newer GPUs' drivers compile at load;
# without it nn/cuda/stub.c says "no CUDA device was found". The flavour is recorded in
# $(BUILD)/gen/flavour so that switching rebuilds the library and relinks.
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS  = -std=c++17 -O3 -I. $(CUDA_ARCH) -Xcompiler -Wall,-Wno-unused-parameter
CU_SRC    := $(sort $(wildcard nn/cuda/*.cu))
ifeq ($(NB_CUDA),1)
LIB_OBJ   += $(CU_SRC:%.cu=$(BUILD)/%.o)
LDLIBS_ALL += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart_static -lstdc++ \
              -ldl -lrt -lpthread
FLAVOUR    = cuda
else
LIB_OBJ   += $(BUILD)/nn/cuda/stub.o
FLAVOUR    = cpu
endif
CMD_OBJ  := $(CMD_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:%.c=$(BUILD)/%)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
LIB      := $(BUILD)/libnormbench.a
BIN      := $(if $(filter build,$(BUILD)),normbench,$(BUILD)/normbench)
MAN      := $(BUILD)/normbench.1

.PHONY: all test check unit cli test-build asan asan-ci demo docs compare lint format install install-files deps clean fuzz cuda test-cuda FORCE
.DEFAULT_GOAL := all

all: $(BIN) $(MAN)

$(BIN): $(CMD_OBJ) $(LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $(CMD_OBJ) $(LIB) $(LDLIBS_ALL)

# The manual page is made from the binary's own help texts (tools/mkman.pl): it cannot drift.
$(MAN): $(BIN) tools/mkman.pl
	@mkdir -p $(dir $@)
	perl tools/mkman.pl $(CURDIR)/$(BIN) > $@.tmp && mv $@.tmp $@

# tools/f64names.sh first: every generic name renamed for double (nn/f64names.h, nn/real.h).
$(LIB): $(LIB_OBJ) $(BUILD)/gen/flavour nn/f64names.h tools/f64names.sh
	@sh tools/f64names.sh nn/f64names.h $(GENERIC:%.c=$(BUILD)/%_f64.o)
	@rm -f $@
	ar rcs $@ $(LIB_OBJ)

$(BUILD)/gen/flavour: FORCE
	@mkdir -p $(dir $@)
	@echo $(FLAVOUR) > $@.tmp; cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

$(BUILD)/%.o: %.cu nn/cuda/nbcuda.h | $(BUILD)/gen/buildinfo.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c -o $@ $<

cuda:
	@test -x "$(NVCC)" || { echo "make cuda: no nvcc at $(NVCC) (set CUDA_HOME or NVCC)"; exit 2; }
	@$(MAKE) --no-print-directory NB_CUDA=1 all

# The CUDA kernels against the CPU's (a plain C program, no cmocka); it says SKIP and passes
# where no GPU is present.
$(BUILD)/tests/cuda/test_cuda: tests/cuda/test_cuda.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB) $(LDLIBS_ALL)

test-cuda:
	@test -x "$(NVCC)" || { echo "make test-cuda: no nvcc at $(NVCC)"; exit 2; }
	@$(MAKE) --no-print-directory NB_CUDA=1 $(BUILD)/tests/cuda/test_cuda
	$(BUILD)/tests/cuda/test_cuda

# Build information (git revision, compiler, flags) for the runs' provenance; rewritten only
# when it changes so that an unchanged tree does not rebuild.
$(BUILD)/gen/buildinfo.h: FORCE
	@mkdir -p $(dir $@)
	@{ printf '#define NB_GIT_REV "%s"\n' "$$(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)"; \
	   printf '#define NB_CC_VERSION "%s"\n' "$$($(CC) --version | head -n 1)"; \
	   printf '#define NB_BLAS_BUILD "%s"\n' "$$(v=$$(pkg-config --modversion openblas 2>/dev/null) && echo "openblas $$v headers" || echo "the system's cblas.h")"; \
	   printf '#define NB_CFLAGS "%s"\n' "$(strip $(CFLAGS_ALL))"; } > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

$(BUILD)/%.o: %.c | $(BUILD)/gen/buildinfo.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c -o $@ $<

$(BUILD)/%_f64.o: %.c | $(BUILD)/gen/buildinfo.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DNB_F64 -MMD -MP -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(LIB) tests/testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -o $@ $< $(LIB) -lcmocka $(LDLIBS_ALL)

# The bounded fuzz run: the plain driver with gcc (and the sanitizers under `make asan`).
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/driver.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ tests/fuzz/driver.c $< $(LIB) $(LDLIBS_ALL)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---- tests -----------------------------------------------------------------------------------
# Threads pinned so that reproducibility checks compare like with like.
# A directory holding the real Multi30k text (the eight .gz files as published), for the tests
# that use real data offline (BPE round trip, fetch --from, a short mt run); they skip when it
# is unset. CI sets it (.ci/run).
MULTI30K ?= $(NB_TEST_MULTI30K)
# Likewise the Tiny Shakespeare text (input.txt as published) for the lm task's real-data tests.
TINYSHAKESPEARE ?= $(NB_TEST_TINYSHAKESPEARE)
TEST_ENV = OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive NORMBENCH_BIN=$(CURDIR)/$(BIN) \
           NORMBENCH_REF=$(CURDIR)/tests/ref NB_TEST_MULTI30K=$(MULTI30K) \
           NB_TEST_TINYSHAKESPEARE=$(TINYSHAKESPEARE) \
           NORMBENCH_ARTIFACTS=$(CURDIR)/$(BUILD)/artifacts

# Everything the tests run is built first, TEST_JOBS at a time; then the tests.
TEST_BUILD = $(BIN) $(MAN) $(TEST_BIN) $(FUZZ_BIN) $(TOY_BIN) $(SYNTH_BIN)
test check: deps
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) test-build
	@$(MAKE) --no-print-directory unit cli

test-build: $(TEST_BUILD)

# The unit test binaries and the bounded fuzz runs, TEST_JOBS at a time (below); each one's
# output is printed whole when it ends (make -O), and every one runs even when another fails.
unit: $(TEST_BIN) $(FUZZ_BIN)
	@$(MAKE) --no-print-directory -k -j$(TEST_JOBS) -Otarget \
	  $(TEST_BIN:%=%.run) $(FUZZ_BIN:%=%.run) || { echo "FAILED: unit tests (see above)"; exit 1; }

$(BUILD)/tests/%.run: FORCE
	@echo "== $(@:.run=)"; $(TEST_ENV) $(@:.run=) || { echo "FAILED: $(@:.run=)"; exit 1; }

$(BUILD)/fuzz/%.run: FORCE
	@c=tests/fuzz/corpus/$(patsubst fuzz_%,%,$*); echo "== $(@:.run=) $$c"; \
	  $(TEST_ENV) $(@:.run=) $$c || { echo "FAILED: $(@:.run=)"; exit 1; }

# The test build: the product plus the test task of tests/task_toy.c and the test norm of
# tests/norm_centre.c, each registered by its file alone (tests/cli/13-tasks.t,
# tests/cli/41-test-norm.t): a task lives in one file, and so does a norm.
TOY_BIN := $(BUILD)/tests/normbench-toy
$(TOY_BIN): $(CMD_OBJ) $(LIB) tests/task_toy.c tests/norm_centre.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $(CMD_OBJ) tests/task_toy.c tests/norm_centre.c $(LIB) $(LDLIBS_ALL)

# A split of mt's synthetic transduction as text (tests/cli/76-mt.t scores a translation of it).
SYNTH_BIN := $(BUILD)/tests/mt-synth-text
$(SYNTH_BIN): tests/mt_synth_text.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB) $(LDLIBS_ALL)

# The command-line test files run TEST_JOBS at a time (default: the number of cores, at most 4;
# each file keeps its own store, data and ports), the longest first so that they overlap the
# rest; prove prints each file's output whole when it ends.
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
CLI_FIRST := tests/cli/85-mpi.t tests/cli/60-resume.t tests/cli/74-reader.t tests/cli/50-sweep.t \
             tests/cli/76-mt.t tests/cli/87-mpi-bench.t
CLI_TESTS := $(CLI_FIRST) $(filter-out $(CLI_FIRST),$(sort $(wildcard tests/cli/*.t)))
cli: $(BIN) $(TOY_BIN) $(SYNTH_BIN) $(MAN)
	$(TEST_ENV) NORMBENCH_TOY_BIN=$(CURDIR)/$(TOY_BIN) NORMBENCH_SYNTH_BIN=$(CURDIR)/$(SYNTH_BIN) \
	  prove -j$(TEST_JOBS) -v --timer $(CLI_TESTS)

# LeakSanitizer: Open MPI's own allocations are suppressed (tests/lsan-mpi.supp names only its
# libraries; its components stay loaded so that their frames can be named).
asan:
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan-mpi.supp:fast_unwind_on_malloc=0 \
	OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1 \
	$(MAKE) --no-print-directory BUILD=build-asan $(ASAN_OPT) -j$(TEST_JOBS) test-build
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan-mpi.supp:fast_unwind_on_malloc=0 \
	OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1 \
	$(MAKE) --no-print-directory BUILD=build-asan $(ASAN_OPT) unit cli
ASAN_OPT = OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"

# CI's sanitizer pass (.ci/run: make asan-ci) runs every unit test and the command-line files but
# these training-heavy ones, whose code runs under the sanitizers in other files (in brackets) and
# in the unit tests; together they are two thirds of make asan's time. make asan runs them all.
#   60-resume (42-lm-resume, 62-claims, 63-resume-config), 50-sweep (51-sweep-fork),
#   74-reader 72-cifar 65-order (39-dyt's runs of each task; test_reader_model, test_conv,
#   test_oe), 76-mt (81-mt-fidelity, 34-translate-*, 36-mt-cache, 39-dyt), 41-test-norm (the
#   test build's own norm; 39-dyt takes the same unfused paths), 39-dyt-step and 87-mpi-bench
#   (43-lm-bench, 37-mpi-agree), and 85-mpi: 12 minutes alone under the sanitizers on two cores
#   (37-mpi-agree and 86-mpi-hosts run sweeps and data-parallel runs over ranks).
ASAN_CI_SKIP := $(addprefix tests/cli/,60-resume.t 50-sweep.t 74-reader.t 72-cifar.t 65-order.t \
                76-mt.t 41-test-norm.t 39-dyt-step.t 87-mpi-bench.t 85-mpi.t)
asan-ci:
	@$(MAKE) --no-print-directory asan CLI_TESTS="$(filter-out $(ASAN_CI_SKIP),$(CLI_TESTS))"

deps:
	@sh .ci/deps

# Open-ended fuzzing with libFuzzer (clang; libclang-rt-14-dev): every target for FUZZ_TIME
# seconds, its growing corpus in build-fuzz/corpus/NAME, crashes as build-fuzz/crash-*.
FUZZ_TIME ?= 60
FUZZ_SAN  = -fsanitize=address,undefined -fno-sanitize-recover=all
fuzz:
	$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang \
	  OPT="-O1 -g -fopenmp=libgomp -fsanitize=fuzzer-no-link $(FUZZ_SAN)" build-fuzz/libnormbench.a
	@for src in $(FUZZ_SRC); do \
	  name=$$(basename $$src .c); corpus=tests/fuzz/corpus/$${name#fuzz_}; \
	  mkdir -p build-fuzz/corpus/$${name#fuzz_} || exit 1; \
	  echo "== $$name ($(FUZZ_TIME) s)"; \
	  clang -I. -g -O1 -fsanitize=fuzzer $(FUZZ_SAN) -o build-fuzz/$$name $$src \
	    build-fuzz/libnormbench.a -fopenmp=libgomp $(LDLIBS_ALL) || exit 1; \
	  ./build-fuzz/$$name -max_total_time=$(FUZZ_TIME) -rss_limit_mb=4096 \
	    -artifact_prefix=build-fuzz/ build-fuzz/corpus/$${name#fuzz_} $$corpus || exit 1; \
	done

# Every norm on real data (Fashion-MNIST from Debian's dataset-fashion-mnist), then the report.
DEMO_DB     ?= normbench-demo.db
DEMO_EPOCHS ?= 5
demo: deps $(BIN)
	./$(BIN) sweep mnist --dataset fashion-mnist --norms all --seeds 1 --epochs $(DEMO_EPOCHS) \
	  --db $(DEMO_DB)
	./$(BIN) report --db $(DEMO_DB)

# The documentation's generated parts (tools/mkdocs.pl): every `<!-- generated: COMMAND -->`
# block of README.md and docs/ rewritten by running its command (report, runs, show on the
# stores kept in docs/results/; bench --from on the bench CSVs kept there), docs/commands.md from the help texts, every relative link
# checked; first every figure is redrawn: those of the stores kept here (Fashion-MNIST, mt
# synthetic) from their stores, data and script too, the historical ones (their stores are
# elsewhere) by gnuplot from the data beside them.
# No training, no benchmark; tests/cli/90-docs.t fails when a page differs from what this writes.
docs: $(BIN)
	@command -v gnuplot >/dev/null || { echo "make docs: gnuplot is needed to redraw the figures (apt-get install gnuplot-nox)"; exit 1; }
	./$(BIN) plot --task mnist --db docs/results/mnist-fashion.db --out docs/results/mnist-fashion
	./$(BIN) plot --task mt --db docs/results/mt-rnnsearch-synthetic.db --metric train_loss,val_bleu \
	  --out docs/results/mt-rnnsearch-synthetic
	./$(BIN) plot --task lm --db docs/results/lm.db --out docs/results/lm-tinyshakespeare
	@for gp in docs/results/*.gp; do \
	  (cd docs/results && gnuplot "$$(basename $$gp)") || { echo "make docs: gnuplot $$gp failed"; exit 1; }; \
	done
	perl tools/mkdocs.pl $(CURDIR)/$(BIN)

# normbench against PyTorch on every task's training step, both in one session (needs Debian's
# python3-torch; never run by `make test`). docs/speed.md's tables come from this. A task joins
# by adding compare/pytorch/TASK.py and a line here.
COMPARE_THREADS ?= 2
compare: $(BIN)
	@uptime
	@grep -m1 'model name' /proc/cpuinfo
	OMP_NUM_THREADS=$(COMPARE_THREADS) ./$(BIN) bench step mnist --against pytorch --steps 40
	OMP_NUM_THREADS=$(COMPARE_THREADS) ./$(BIN) bench step cifar --against pytorch --steps 5
	OMP_NUM_THREADS=$(COMPARE_THREADS) ./$(BIN) bench step order --against pytorch --steps 10
	OMP_NUM_THREADS=$(COMPARE_THREADS) ./$(BIN) bench step reader --against pytorch --steps 10
	OMP_NUM_THREADS=$(COMPARE_THREADS) ./$(BIN) bench step mt --model rnnsearch --dim-word 256 --dim 512 --against pytorch --steps 8 --norms none,layer,rms,prms
	OMP_NUM_THREADS=$(COMPARE_THREADS) ./$(BIN) bench step mt --model transformer --batch 133 --against pytorch --steps 10 --norms layer,rms,prms
	OMP_NUM_THREADS=$(COMPARE_THREADS) ./$(BIN) bench step lm --preset cpu --against pytorch --steps 20 --norms none,layer,rms,prms
	OMP_NUM_THREADS=$(COMPARE_THREADS) ./$(BIN) bench step draw --preset small --against pytorch --steps 20 --norms none,layer,rms,prms
	@uptime

lint:
	$(MAKE) --no-print-directory BUILD=build-lint CFLAGS=-Werror all
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	  --suppress=missingIncludeSystem --inline-suppr -I. $(LIB_SRC) $(CMD_SRC)
	clang-format --dry-run --Werror $(LIB_SRC) $(CMD_SRC) $(TEST_SRC) $(wildcard */*.h nn/norms/*.h) \
	  $(FUZZ_SRC) tests/fuzz/driver.c tests/task_toy.c tests/norm_centre.c tests/mt_synth_text.c
	@! grep -n -E '\b(atoi|atol|sprintf|strcpy|strcat|gets)\s*\(' $(LIB_SRC) $(CMD_SRC) \
	  || { echo "lint: banned function (use strtol/snprintf/memcpy)"; exit 1; }

format:
	clang-format -i $(LIB_SRC) $(CMD_SRC) $(TEST_SRC) $(wildcard */*.h nn/norms/*.h) $(FUZZ_SRC) \
	  tests/fuzz/driver.c tests/task_toy.c tests/norm_centre.c tests/mt_synth_text.c

# install-files copies what is built, building nothing (tests/cli/78-install.t uses it).
install: $(BIN) $(MAN)
	@$(MAKE) --no-print-directory install-files

install-files:
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/normbench
	install -m 644 $(MAN) $(DESTDIR)$(PREFIX)/share/man/man1/normbench.1
	install -m 644 completions/normbench.bash \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/normbench

clean:
	rm -rf build build-asan build-lint build-fuzz build-cuda normbench
