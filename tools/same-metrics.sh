#!/bin/bash
# tools/same-metrics.sh BASE_BIN NEW_BIN [WORKDIR]: whether two normbench binaries record the
# same runs (a refactoring's check; not run by `make test`, a few minutes on 2 cores, needs
# mpirun). The same commands by both binaries -- runs, resume and --from-scratch, a sweep with
# --jobs 2, an MPI sweep, an interrupted sweep resumed, a data-parallel run and its resume (2
# ranks) -- with a fixed seed and --threads 1; every stored metric but the timings printed with
# printf('%.17g') and compared, with each run's configuration. Interrupted stores are made once
# (by BASE) and copied, so that both binaries resume the very same checkpoint. Prints SAME or
# DIFF per case; exits 1 on any difference.
set -u
B=$1 N=$2 W=${3:-${TMPDIR:-/tmp}/same-metrics}
rm -rf "$W"; mkdir -p "$W"
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
unset NORMBENCH_DB
MPIRUN="mpirun --bind-to none"
dump() { sqlite3 "$1" "select r.id, r.norm, r.seed, r.status, m.name, m.step, m.kind, printf('%.17g', m.value) from metrics m join runs r on r.id = m.run where m.name not in ('ms_per_step','epoch_seconds','allreduce_ms_per_step') order by r.norm, r.seed, r.id, m.name, m.step;
  select id, norm, seed, status, config from runs order by id;"; }
fail=0
cpdb() { for x in "" -wal -shm; do [ -e "$W/$1.db$x" ] && cp "$W/$1.db$x" "$W/$3.$2.db$x"; done; cp -r "$W/$1.db-checkpoints" "$W/$3.$2.db-checkpoints"; }
same() { # name dbA dbB
  if [ -s "$W/$1.a" ] && cmp -s "$W/$1.a" "$W/$1.b"; then echo "SAME  $1 ($(wc -l <"$W/$1.a") lines)"; else echo "DIFF  $1"; diff "$W/$1.a" "$W/$1.b" | head -5; fail=1; fi; }
q="--dataset synthetic --subset 1000 --batch 32 --threads 1"
# 1. plain runs
for who in a b; do bin=$B; [ $who = b ] && bin=$N
  "$bin" run mnist $q --epochs 2 --norm batch --log-every 7 --quiet --db "$W/run.$who.db" >/dev/null 2>&1
  "$bin" run mnist $q --epochs 2 --norm rms --seed 3 --quiet --db "$W/run.$who.db" >/dev/null 2>&1
  dump "$W/run.$who.db" > "$W/run.$who"; done
same run
# 2. resume (one process): a run killed after its first checkpoint, resumed by each binary
mk_killed() { # [-INT] db args...: start, kill -9 (or SIGINT) after the first checkpoint
  local sig=KILL; [ "$1" = -INT ] && { sig=INT; shift; }
  local db=$1; shift
  "$@" --db "$db" >/dev/null 2>&1 & local pid=$!
  for _ in $(seq 1 2400); do ls "$db-checkpoints"/*.ckpt >/dev/null 2>&1 && break; sleep 0.05; done
  sleep 0.3; kill -$sig $pid; wait $pid 2>/dev/null; }
mk_killed "$W/res.db" "$B" run mnist $q --epochs 6 --norm weight --log-every 7 --quiet
for who in a b; do bin=$B; [ $who = b ] && bin=$N
  cpdb res $who res
  "$bin" run --resume 1 --quiet --db "$W/res.$who.db" >/dev/null 2>&1; echo "resume rc $?"
  dump "$W/res.$who.db" > "$W/res.$who"; done
same res
# 2b. --from-scratch
for who in a b; do bin=$B; [ $who = b ] && bin=$N
  cpdb res $who rfs
  "$bin" run --resume 1 --from-scratch --quiet --db "$W/rfs.$who.db" >/dev/null 2>&1
  dump "$W/rfs.$who.db" > "$W/rfs.$who"; done
same rfs
# 3. sweep (plain, 2 jobs at a time) and MPI sweep
for who in a b; do bin=$B; [ $who = b ] && bin=$N
  "$bin" sweep mnist --norms rms,layer,batch --seeds 2 $q --steps 12 --jobs 2 --db "$W/sw.$who.db" >/dev/null 2>&1
  dump "$W/sw.$who.db" | cut -d'|' -f2- | sort > "$W/sw.$who"
  $MPIRUN -np 2 "$bin" sweep mnist --norms rms,layer --seeds 2 $q --steps 12 --db "$W/msw.$who.db" >/dev/null 2>&1
  dump "$W/msw.$who.db" | cut -d'|' -f2- | sort > "$W/msw.$who"; done
same sw; same msw
# 3b. an interrupted sweep resumed (store copied)
mk_killed -INT "$W/swi.db" "$B" sweep mnist --norms rms,batch --seeds 1 $q --epochs 4 --quiet
for who in a b; do bin=$B; [ $who = b ] && bin=$N
  cpdb swi $who swi
  "$bin" sweep mnist --norms rms,batch --seeds 1 $q --epochs 4 --db "$W/swi.$who.db" >/dev/null 2>&1
  dump "$W/swi.$who.db" | cut -d'|' -f2- | sort > "$W/swi.$who"; done
same swi
# 4. data-parallel run and data-parallel resume (2 ranks), store copied
for who in a b; do bin=$B; [ $who = b ] && bin=$N
  $MPIRUN -np 2 "$bin" run mnist $q --epochs 2 --norm batch --quiet --db "$W/dp.$who.db" >/dev/null 2>&1
  dump "$W/dp.$who.db" > "$W/dp.$who"; done
same dp
rm -rf "$W/dpr.db" "$W/dpr.db-checkpoints"
$MPIRUN -np 2 "$B" run mnist $q --epochs 6 --norm batch --quiet --db "$W/dpr.db" >/dev/null 2>&1 & pid=$!
for _ in $(seq 1 2400); do ls "$W/dpr.db-checkpoints"/*.ckpt >/dev/null 2>&1 && break; sleep 0.05; done
sleep 0.3; kill -INT $pid; wait $pid 2>/dev/null
for _ in $(seq 1 300); do [ "$(sqlite3 "$W/dpr.db" 'select status from runs')" = running ] || break; sleep 0.1; done
sleep 1
echo "dpr status: $(sqlite3 "$W/dpr.db" 'select status from runs')"
for who in a b; do bin=$B; [ $who = b ] && bin=$N
  cpdb dpr $who dpr
  $MPIRUN -np 2 "$bin" run --resume 1 --db "$W/dpr.$who.db" >/dev/null 2>&1; echo "dp resume rc $?"
  dump "$W/dpr.$who.db" > "$W/dpr.$who"; done
same dpr
exit $fail
