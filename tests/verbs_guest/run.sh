#!/usr/bin/env bash
# Boots the host's kernel in a QEMU guest (virtme-ng, software emulation,
# the host's file system seen read-only), creates soft-RoCE (rdma_rxe)
# devices there and runs the given commands against them. See usage().
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
    cat <<'EOF'
Usage: tests/verbs_guest/run.sh [OPTIONS] [--] COMMAND...

Boots the host's kernel in a QEMU guest with virtme-ng (no KVM; the guest
sees this machine's files read-only, so host binaries run in it), creates
soft-RoCE devices, runs each COMMAND there with `bash -c`, in order, and
prints each command's status, time and output. Exits 1 if the guest does
not boot, the setup fails or any command fails.

Networks (--net, comma-separated; default: lo):
  lo     rxe0 on the loopback device. Data moves, but the kernel's RDMA
         connection manager cannot resolve a route on lo (rdma_resolve_route
         fails with ENODEV on Linux 6.1), so librdmacm users (rucx's verbs
         provider, ib_write_bw -R) need dummy or veth.
  dummy  a dummy interface d0 (10.78.0.1/24) with rxed on it: one device
         whose own address the connection manager resolves, for processes
         or contexts that connect to each other on one device.
  rails  dummy's d0 and rxed, and a second dummy interface d1
         (10.79.0.1/24) with rxed1: two devices that every process sees,
         for rendezvous split over two lanes (multi-rail). Between two
         processes that both use both, the lanes join rxed to rxed and
         rxed1 to rxed1 (the ifaces pair up in discovery order).
  veth   a veth pair va (10.77.0.1/24) <-> vb (10.77.0.2/24), both in the root
         namespace, rxea on va and rxeb on vb. Policy routing sends traffic
         between the two addresses across the pair (not through lo), so it
         can be captured on va.
  netns  the same pair with vb (and its address) in namespace b, rxeb
         created inside b. The kernel's rxe must support network namespaces
         for traffic to flow, and Linux 6.1's (Debian 12) does not, so use
         veth there. Seen in this guest (rdma system: netns shared): rxe's
         UDP socket on port 4791 exists in the root namespace only (ss -uan
         in b lists none); a rucx client on rxea sent its CM ConnectRequest
         across the pair, b counted it as UdpNoPorts and answered ICMP port
         unreachable, and the client gave up with a CM reject (timeout);
         nothing rxeb sent (the server's connection back) appeared on the
         pair: rxe looks its routes up in the root namespace too
         (rxe_net.c: ip_route_output_key(&init_net, ...), which rxe's
         namespace patches later make dev_net(ndev)), where 10.77.0.1 is
         local. ib_write_bw without librdmacm alike: its WRITEs cross, no
         ACK comes back.
  veth and netns exclude each other.

Command prefixes (may be combined, as bg:b:CMD):
  bg:    start in the background; the harness waits for it after the last
         foreground command, and it counts like any other command.
  b:     with --net netns, run in namespace b; otherwise no effect.

Inside the guest each command sees: OUT (a directory shared with the host,
writable), RXE_LO=rxe0, RXE_D=rxed, ADDR_D=10.78.0.1, RXE_D1=rxed1,
ADDR_D1=10.79.0.1, RXE_A=rxea, RXE_B=rxeb, ADDR_A=10.77.0.1,
ADDR_B=10.77.0.2.

Options:
  --net LIST          networks to set up (see above); default lo
  --capture IFACE     capture UDP port 4791 (RoCEv2) on IFACE in the guest
                      while the commands run; afterwards check it on the
                      host with roce_check.sh (tshark): fail unless it holds
                      RoCEv2 frames, all well-formed, and every response
                      and ACK comes after its request. Saved as
                      OUT/roce.pcapng.
  --capture-expect LIST
                      with --capture, also require each opcode family of
                      LIST (send, write, read, atomic, ack; see
                      roce_check.sh --help)
  --out DIR           keep logs, results and the capture in DIR (created;
                      kept). Default: a temporary directory, removed after a
                      successful run and kept after a failure.
  --kernel FILE       kernel image (default: the newest /boot/vmlinuz-*)
  --timeout SECS      limit for the whole guest, boot included (default 600)
  --cmd-timeout SECS  limit for each command (default 300)
  --memory SIZE       guest memory (default 2G)
  --cpus N            guest CPUs (default 2)
  --quiet             print the output of failed commands only
  -h, --help          this text

Requires qemu-system-x86_64, vng (pip install virtme-ng), busybox, a
readable kernel image, iproute2's rdma and ip, and for --capture dumpcap and
tshark. When one is missing, prints "skipped: <why>" and exits 0, or exits 1
if RUCX_REQUIRE_ALL=1. Only one guest runs at a time (a lock file in TMPDIR).

Example:
  tests/verbs_guest/run.sh --net lo 'ibv_devinfo -d rxe0' \
      'bg:ib_write_bw -d rxe0 -n 200' 'sleep 3; ib_write_bw -d rxe0 -n 200 127.0.0.1'
EOF
}

die() {
    echo "run.sh: error: $*" >&2
    exit 1
}

skip() {
    if [ "${RUCX_REQUIRE_ALL:-}" = 1 ]; then
        echo "run.sh: error: $* (RUCX_REQUIRE_ALL=1)" >&2
        exit 1
    fi
    echo "skipped: $*"
    exit 0
}

net=lo
capture=
capture_expect=
out=
keep=0
kernel=
timeout_s=600
cmd_timeout=300
memory=2G
cpus=2
quiet=0

need_arg() {
    [ $# -ge 2 ] || die "$1 needs a value (see --help)"
}

while [ $# -gt 0 ]; do
    case $1 in
    -h | --help)
        usage
        exit 0
        ;;
    --net) need_arg "$@"; net=$2; shift 2 ;;
    --capture) need_arg "$@"; capture=$2; shift 2 ;;
    --capture-expect) need_arg "$@"; capture_expect=$2; shift 2 ;;
    --out) need_arg "$@"; out=$2; keep=1; shift 2 ;;
    --kernel) need_arg "$@"; kernel=$2; shift 2 ;;
    --timeout) need_arg "$@"; timeout_s=$2; shift 2 ;;
    --cmd-timeout) need_arg "$@"; cmd_timeout=$2; shift 2 ;;
    --memory) need_arg "$@"; memory=$2; shift 2 ;;
    --cpus) need_arg "$@"; cpus=$2; shift 2 ;;
    --quiet) quiet=1; shift ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
    esac
done

[ $# -gt 0 ] || {
    usage >&2
    die "no command given"
}
cmds=("$@")

# Validate the options before looking for the tools.
has_lo=0 has_dummy=0 has_rails=0 has_veth=0 has_netns=0
IFS=, read -r -a nets <<<"$net"
[ ${#nets[@]} -gt 0 ] || die "--net is empty"
for n in "${nets[@]}"; do
    case $n in
    lo) has_lo=1 ;;
    dummy) has_dummy=1 ;;
    rails) has_rails=1 ;;
    veth) has_veth=1 ;;
    netns) has_netns=1 ;;
    *) die "unknown network '$n' in --net (lo, dummy, rails, veth, netns)" ;;
    esac
done
[ $((has_veth + has_netns)) -le 1 ] || die "--net veth and netns exclude each other"
for v in "$timeout_s" "$cmd_timeout" "$cpus"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || die "'$v' is not a positive whole number"
done
for c in "${cmds[@]}"; do
    rest=$c
    while :; do
        case $rest in
        bg:*) rest=${rest#bg:} ;;
        b:*) rest=${rest#b:} ;;
        *) break ;;
        esac
    done
    [ -n "${rest//[[:space:]]/}" ] || die "empty command in '$c'"
done
[ -z "$capture_expect" ] || [ -n "$capture" ] || die "--capture-expect needs --capture"
if [ -n "$capture" ]; then
    case $capture in
    va | vb) [ $((has_veth + has_netns)) -eq 1 ] || die "--capture $capture needs --net veth or netns" ;;
    lo) echo "run.sh: note: rxe delivers traffic between devices on lo without a packet; a capture on lo stays empty" >&2 ;;
    *) ;;
    esac
fi

# The tools: missing ones mean "skipped", not a failure.
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
command -v vng >/dev/null || skip "vng not found (pip install virtme-ng)"
command -v busybox >/dev/null || skip "busybox not found, vng needs it for the guest's initramfs (apt-get install busybox-static)"
command -v rdma >/dev/null || skip "rdma not found (apt-get install iproute2)"
if [ -z "$kernel" ]; then
    kernel=$(find /boot -maxdepth 1 -name 'vmlinuz-*' 2>/dev/null | sort -V | tail -n 1)
    [ -n "$kernel" ] || skip "no kernel image /boot/vmlinuz-* (apt-get install linux-image-amd64)"
fi
[ -e "$kernel" ] || die "kernel image $kernel does not exist"
[ -r "$kernel" ] || skip "kernel image $kernel is not readable by this user"
kver=${kernel##*/vmlinuz-}
if [ -d "/lib/modules/$kver" ] && [ -z "$(find "/lib/modules/$kver" -name 'rdma_rxe.ko*' -print -quit)" ]; then
    skip "kernel $kver has no rdma_rxe module"
fi
if [ -n "$capture" ]; then
    command -v dumpcap >/dev/null || skip "dumpcap not found (apt-get install tshark)"
    command -v tshark >/dev/null || skip "tshark not found (apt-get install tshark)"
fi

# The directory shared with the guest.
if [ -n "$out" ]; then
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    rm -f "$out"/cmd-* "$out"/setup.* "$out"/timing "$out"/console.log "$out"/roce.pcapng "$out"/capture.log "$out"/job.sh
else
    out=$(mktemp -d "${TMPDIR:-/tmp}/rucx-verbs-guest.XXXXXX")
fi
chmod 0777 "$out"

# One guest at a time on this machine.
lock=${TMPDIR:-/tmp}/rucx-verbs-guest.lock
exec 9>>"$lock"
if ! flock -n 9; then
    echo "run.sh: waiting for another guest to finish (lock $lock)" >&2
    flock -w "$timeout_s" 9 || die "another guest still holds $lock after ${timeout_s}s"
fi

{
    printf '# written by run.sh, read by guest.sh\n'
    declare -p has_lo has_dummy has_rails has_veth has_netns capture cmd_timeout
    declare -p cmds
} >"$out/job.sh"

printf 'guest: kernel %s, --net %s, %s CPUs, %s, limit %ss; logs in %s\n' \
    "$kver" "$net" "$cpus" "$memory" "$timeout_s" "$out"
vng_user=()
[ "$(id -u)" -eq 0 ] || vng_user=(--user root) # modprobe and rdma need root in the guest
t0=$EPOCHREALTIME
rc=0
timeout -k 15 "$timeout_s" \
    vng -r "$kernel" --disable-kvm --memory "$memory" --cpus "$cpus" \
    --rwdir "$out" "${vng_user[@]}" \
    --exec "bash $(printf '%q' "$here/guest.sh") $(printf '%q' "$out")" \
    </dev/null >"$out/console.log" 2>&1 || rc=$?
t1=$EPOCHREALTIME

secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

failed=0
show_console() {
    echo "---- guest console (last 60 lines of $out/console.log)"
    tail -n 60 "$out/console.log" | sed 's/^/  | /'
    echo "----"
}

if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "FAIL: the guest did not finish within ${timeout_s}s (killed)"
    failed=1
fi

# Timing written by the guest: uptime at script start, setup and command phases.
guest_total=
if [ -f "$out/timing" ]; then
    # shellcheck disable=SC1091
    . "$out/timing"
    guest_total=${script_secs:-}
    printf 'time: whole run %ss; guest kernel up %ss when the script started; setup %ss; commands %ss\n' \
        "$(secs "$t0" "$t1")" "${uptime_at_start:-?}" "${setup_secs:-?}" "${commands_secs:-?}"
    if [ -n "$guest_total" ]; then
        printf 'time: boot and shutdown (whole run minus the script) %ss\n' \
            "$(awk -v w="$(secs "$t0" "$t1")" -v s="$guest_total" 'BEGIN { printf "%.1f", w - s }')"
    fi
else
    printf 'time: whole run %ss (the guest script left no timing)\n' "$(secs "$t0" "$t1")"
fi

if [ -f "$out/setup.error" ]; then
    echo "FAIL: setup in the guest: $(cat "$out/setup.error")"
    [ -f "$out/setup.log" ] && sed 's/^/  | /' "$out/setup.log"
    failed=1
fi

i=0
for c in "${cmds[@]}"; do
    i=$((i + 1))
    res=$out/cmd-$i.res
    log=$out/cmd-$i.log
    if [ -f "$res" ]; then
        crc='' csecs=''
        read -r crc csecs <"$res" || true
        [[ $crc =~ ^[0-9]+$ ]] || crc=255
        if [ "$crc" -eq 0 ]; then
            printf '[ ok ] %6ss  %s\n' "$csecs" "$c"
            [ "$quiet" -eq 1 ] || sed 's/^/  | /' "$log"
        else
            failed=1
            if [ "$crc" -eq 124 ]; then
                printf '[FAIL] %6ss  %s  (timed out after %ss)\n' "$csecs" "$c" "$cmd_timeout"
            else
                printf '[FAIL] %6ss  %s  (exit %s)\n' "$csecs" "$c" "$crc"
            fi
            sed 's/^/  | /' "$log"
        fi
    else
        failed=1
        printf '[FAIL]      -  %s  (did not run or did not finish)\n' "$c"
        [ -f "$log" ] && sed 's/^/  | /' "$log"
    fi
done

if [ -n "$capture" ]; then
    pcap=$out/roce.pcapng
    if [ -s "$pcap" ]; then
        echo "capture on $capture:"
        grep -h 'dropped' "$out/capture.log" 2>/dev/null | sed 's/^/  dumpcap: /' || true
        # "Packets received/dropped on interface 'va': 17409/1796 (...)":
        # answers to dropped requests are no protocol error.
        cap_dropped=$(sed -n 's/.*received\/dropped[^:]*: [0-9]*\/\([0-9]*\).*/\1/p' \
            "$out/capture.log" 2>/dev/null | head -n 1)
        # Well-formed RoCEv2 frames, per-opcode counts, and with
        # --capture-expect the opcode families and their order.
        "$here/roce_check.sh" ${capture_expect:+--expect "$capture_expect"} \
            --dropped "${cap_dropped:-0}" "$pcap" |
            sed 's/^/  /' || failed=1
    else
        echo "FAIL: no capture was written ($pcap)"
        [ -f "$out/capture.log" ] && sed 's/^/  | /' "$out/capture.log"
        failed=1
    fi
fi

if [ "$failed" -eq 0 ] && [ "$rc" -ne 0 ]; then
    echo "FAIL: the guest exited with status $rc"
    failed=1
fi

if [ "$failed" -ne 0 ]; then
    show_console
    echo "result: FAIL (logs kept in $out)"
    exit 1
fi
echo "result: ok (${#cmds[@]} commands)"
[ "$keep" -eq 1 ] || rm -rf "$out"
exit 0
