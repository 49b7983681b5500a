#!/usr/bin/env bash
# Runs inside the guest that run.sh boots: creates the rxe devices asked for
# in OUT/job.sh, runs the commands and leaves per-command results in OUT
# (cmd-N.log: output, cmd-N.res: "exit-status seconds"), the setup log and
# the phase timings. run.sh reads them after the guest powers off.
set -uo pipefail

OUT=${1:?usage: guest.sh OUTDIR}
export OUT
# Defaults, replaced by job.sh.
has_lo=0 has_dummy=0 has_rails=0 has_veth=0 has_netns=0 capture='' cmd_timeout=300
cmds=()
# shellcheck disable=SC1091
. "$OUT/job.sh"

t_script=$EPOCHREALTIME
read -r uptime_at_start _ </proc/uptime

secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

setup_log=$OUT/setup.log
: >"$setup_log"

# Runs one setup step, logged; a failing step ends the script.
step() {
    echo "+ $*" >>"$setup_log"
    if ! "$@" >>"$setup_log" 2>&1; then
        echo "'$*' failed" >"$OUT/setup.error"
        echo "guest.sh: setup step failed: $*" >&2
        exit 1
    fi
}

export RXE_LO=rxe0 RXE_D=rxed ADDR_D=10.78.0.1 RXE_D1=rxed1 ADDR_D1=10.79.0.1 RXE_A=rxea RXE_B=rxeb ADDR_A=10.77.0.1 ADDR_B=10.77.0.2

t_setup=$EPOCHREALTIME
step modprobe rdma_rxe
step ip link set lo up
if [ "$has_lo" -eq 1 ]; then
    step rdma link add rxe0 type rxe netdev lo
fi
if [ "$has_dummy" -eq 1 ] || [ "$has_rails" -eq 1 ]; then
    step modprobe dummy
    step ip link add d0 type dummy
    step ip addr add "$ADDR_D/24" dev d0
    step ip link set d0 up
    step rdma link add rxed type rxe netdev d0
fi
if [ "$has_rails" -eq 1 ]; then
    step ip link add d1 type dummy
    step ip addr add "$ADDR_D1/24" dev d1
    step ip link set d1 up
    step rdma link add rxed1 type rxe netdev d1
fi
if [ "$has_veth" -eq 1 ] || [ "$has_netns" -eq 1 ]; then
    step ip link add va type veth peer name vb
    step ip addr add "$ADDR_A/24" dev va
    step ip link set va up
fi
if [ "$has_veth" -eq 1 ]; then
    # Both ends in one namespace: without help the kernel would deliver
    # traffic between the two local addresses through lo. Look up the local
    # table only for packets arriving on the pair, send what one end's
    # address sends to the other's out of the pair, and accept packets
    # whose source is a local address. Only traffic between the two
    # addresses: an end talking to itself, or another address talking to
    # an end, still goes through lo.
    step ip addr add "$ADDR_B/24" dev vb
    step ip link set vb up
    step sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.va.rp_filter=0 \
        net.ipv4.conf.vb.rp_filter=0 net.ipv4.conf.va.accept_local=1 \
        net.ipv4.conf.vb.accept_local=1
    step ip rule add pref 1000 lookup local
    step ip rule del pref 0
    step ip rule add pref 10 iif va lookup local
    step ip rule add pref 11 iif vb lookup local
    step ip route add "$ADDR_B" dev va src "$ADDR_A" table 100
    step ip route add "$ADDR_A" dev vb src "$ADDR_B" table 101
    step ip rule add pref 20 from "$ADDR_A" to "$ADDR_B" lookup 100
    step ip rule add pref 21 from "$ADDR_B" to "$ADDR_A" lookup 101
    step rdma link add rxea type rxe netdev va
    step rdma link add rxeb type rxe netdev vb
fi
if [ "$has_netns" -eq 1 ]; then
    step ip netns add b
    step ip link set vb netns b
    step ip -n b addr add "$ADDR_B/24" dev vb
    step ip -n b link set vb up
    step ip -n b link set lo up
    step rdma link add rxea type rxe netdev va
    step ip netns exec b rdma link add rxeb type rxe netdev vb
fi
step rdma link show

# The capture goes to the guest's /tmp and is copied to OUT at the end.
cap_pid=
if [ -n "$capture" ]; then
    cap_tmp=/tmp/roce.pcapng
    # A 64 MiB kernel buffer: the default 2 MiB drops frames in bursts
    # under TCG.
    dumpcap -q -B 64 -i "$capture" -f "udp port 4791" -w "$cap_tmp" >"$OUT/capture.log" 2>&1 &
    cap_pid=$!
    # dumpcap names its file once it captures; wait for that (slow in TCG).
    for _ in $(seq 1 120); do
        grep -q 'File:' "$OUT/capture.log" 2>/dev/null && break
        kill -0 "$cap_pid" 2>/dev/null || break
        sleep 0.5
    done
    if ! grep -q 'File:' "$OUT/capture.log" 2>/dev/null; then
        echo "dumpcap on $capture did not start" >"$OUT/setup.error"
        exit 1
    fi
fi
setup_secs=$(secs "$t_setup" "$EPOCHREALTIME")

# Runs command number $1 ($3, namespace prefix in $2) and records the result.
run_one() {
    local i=$1 ns=$2 cmd=$3 t rc=0
    t=$EPOCHREALTIME
    if [ -n "$ns" ]; then
        ip netns exec "$ns" timeout -k 5 "$cmd_timeout" bash -c "$cmd" \
            </dev/null >"$OUT/cmd-$i.log" 2>&1 || rc=$?
    else
        timeout -k 5 "$cmd_timeout" bash -c "$cmd" \
            </dev/null >"$OUT/cmd-$i.log" 2>&1 || rc=$?
    fi
    echo "$rc $(secs "$t" "$EPOCHREALTIME")" >"$OUT/cmd-$i.res"
    return "$rc"
}

t_cmds=$EPOCHREALTIME
failed=0
bg_pids=()
i=0
for cmd in "${cmds[@]}"; do
    i=$((i + 1))
    bg=0
    ns=
    while :; do
        case $cmd in
        bg:*) bg=1; cmd=${cmd#bg:} ;;
        b:*)
            cmd=${cmd#b:}
            [ "$has_netns" -eq 1 ] && ns=b
            ;;
        *) break ;;
        esac
    done
    if [ "$bg" -eq 1 ]; then
        run_one "$i" "$ns" "$cmd" &
        bg_pids+=("$!")
    else
        run_one "$i" "$ns" "$cmd" || failed=1
    fi
done
for p in "${bg_pids[@]}"; do
    wait "$p" || failed=1
done
commands_secs=$(secs "$t_cmds" "$EPOCHREALTIME")

if [ -n "$cap_pid" ]; then
    kill -INT "$cap_pid" 2>/dev/null
    wait "$cap_pid" 2>/dev/null
    cp "$cap_tmp" "$OUT/roce.pcapng" 2>>"$OUT/capture.log" || failed=1
fi

{
    echo "uptime_at_start=$uptime_at_start"
    echo "setup_secs=$setup_secs"
    echo "commands_secs=$commands_secs"
    echo "script_secs=$(secs "$t_script" "$EPOCHREALTIME")"
} >"$OUT/timing"
sync
exit "$failed"
