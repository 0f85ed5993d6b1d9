#!/bin/bash
# Two "hosts": two network namespaces joined by a veth pair, mpirun in one starting the other
# rank in the other through a launcher agent (Open MPI's plm_rsh_agent, as ssh would), and MPI
# restricted to TCP over the pair (--mca btl tcp,self: the namespaces share one hostname, so Open
# MPI would otherwise use shared memory between them). A sweep and a data-parallel run cross the
# link; the veth pair's byte counters must rise. Skipped where namespaces cannot be made (needs
# root and CAP_SYS_ADMIN, as in CI).
set -u
. "$(dirname "$0")/lib.sh"

if ! command -v mpirun >/dev/null 2>&1; then
    echo "1..0 # skip mpirun is not installed (Debian: openmpi-bin libopenmpi-dev)"
    exit 0
fi
nsa=nbA$$ nsb=nbB$$ va=nbva$$ vb=nbvb$$
cleanup() {
    ip netns del "$nsa" 2>/dev/null
    ip netns del "$nsb" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
if ! { ip netns add "$nsa" && ip netns add "$nsb" && ip link add "$va" type veth peer name "$vb" &&
    ip link set "$va" netns "$nsa" && ip link set "$vb" netns "$nsb" &&
    ip -n "$nsa" addr add 10.77.0.1/24 dev "$va" && ip -n "$nsb" addr add 10.77.0.2/24 dev "$vb" &&
    ip -n "$nsa" link set "$va" up && ip -n "$nsb" link set "$vb" up &&
    ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up; } 2>"$tmp/ns.err"; then
    echo "1..0 # skip network namespaces cannot be created here: $(head -n 1 "$tmp/ns.err")"
    exit 0
fi
# The launcher agent: "HOST COMMAND...", COMMAND run in the namespace of HOST.
cat >"$tmp/agent" <<EOF
#!/bin/sh
host=\$1; shift
case "\$host" in 10.77.0.2) ns=$nsb ;; *) ns=$nsa ;; esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$tmp/agent"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="ip netns exec $nsa mpirun --mca plm_rsh_agent $tmp/agent --mca btl tcp,self
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24
    --host 10.77.0.1:1,10.77.0.2:1 --bind-to none -np 2"
bytes() { ip netns exec "$nsa" cat "/sys/class/net/$va/statistics/tx_bytes"; }

b0=$(bytes)
check "a sweep over two hosts" 0 timeout 300 $MPIRUN "$NB" sweep mnist --norms rms,layer --seeds 1 \
    --dataset synthetic --subset 1000 --batch 32 --steps 12 --threads 1 --db "$tmp/h.db"
has "every job finished" "$tmp/out" '^sweep: 2 jobs: 2 finished now'
has "rank 1 trained one" "$tmp/err" 'finished on rank 1 '
b1=$(bytes)
[ "$b1" -gt "$b0" ] && ok "the sweep crossed the veth pair ($((b1 - b0)) bytes)" \
    || not_ok "the sweep crossed the veth pair ($b0 -> $b1)"
c=$(sqlite3 "$tmp/h.db" "select count(*) from runs where status='finished'")
[ "$c" = 2 ] && ok "rank 0 recorded both runs" || not_ok "rank 0 recorded both runs ($c)"

check "a data-parallel run over two hosts" 0 timeout 300 $MPIRUN "$NB" run mnist --norm batch --bn-sync \
    --dataset synthetic --subset 600 --batch 30 --steps 10 --threads 1 --quiet --db "$tmp/d.db"
b2=$(bytes)
# ten steps of the MLP's 1.8 M fp32 gradients each way
[ "$((b2 - b1))" -gt 10000000 ] && ok "the gradients crossed the veth pair ($((b2 - b1)) bytes)" \
    || not_ok "the gradients crossed the veth pair ($b1 -> $b2)"
c=$(sqlite3 "$tmp/d.db" "select json_extract(config, '\$.ranks') from runs")
[ "$c" = 2 ] && ok "one run over 2 ranks recorded" || not_ok "one run over 2 ranks ($c)"

echo "1..$n"
[ $fails -eq 0 ]
