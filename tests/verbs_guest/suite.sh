#!/usr/bin/env bash
# Builds the verbs provider's tests, the rc_verbs tests of the root package
# and rucx-perftest, then runs them all in ONE soft-RoCE guest (run.sh
# --net lo,dummy,rails,veth --capture va): the provider's unit and device
# tests, the uct conformance suite on rc_verbs, the protocol-layer tests'
# rc_verbs variants, two-process rucx-perftest runs over rc_verbs with
# every byte checked, RoCEv2 across a veth pair checked with tshark, and
# rendezvous split over two devices.
# See usage().
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

usage() {
    cat <<'EOF'
Usage: tests/verbs_guest/suite.sh [--no-build] [RUN.SH OPTIONS]

Builds (unless --no-build) with cargo, in $CARGO_TARGET_DIR or target/:
  cargo test -p rucx-verbs --features sys --no-run
  cargo test --features verbs --no-run --test in_process --test rma ...
  cargo test --features verbs --no-run --test verbs_rails
  cargo build --release --features verbs --bin rucx-perftest --bin rucx-info
  CAPI_FEATURES=verbs capi/install.sh $CARGO_TARGET_DIR/verbs-capi
then boots one guest (tests/verbs_guest/run.sh --net lo,dummy,rails,veth
--capture va: rxe0 on lo, which the provider does not offer; rxed and
rxed1 on two dummy interfaces; rxea and rxeb on the two ends of a veth
pair, whose RoCEv2 traffic is captured on va) and runs there, each with
RUCX_REQUIRE_ALL=1 so that a missing device fails instead of skipping:
  - rucx-verbs' unit tests, tests/device.rs and tests/device_queues.rs;
  - the uct conformance suite on rc_verbs (tests/rc_conformance.rs) and
    40 peers bursting into one hub iface (tests/rc_star.rs);
  - the rc_verbs tests of in_process, active_messages, datatypes, rma and
    ep_close_modes, and tests/device_atomics.rs (fetch-and-add and
    compare-and-swap executed by the device);
  - rucx-info -d listing rc_verbs on rxed:1;
  - rucx-perftest --pair (server and client processes) with
    RUCX_TLS=rc_verbs and -V for tag_lat, tag_bw, ucp_put_bw, ucp_get;
  - between processes (tests/verbs_processes.rs): a peer killed mid get,
    put and tag rendezvous; forged and stale keys refused by the target's
    device, its memory untouched; puts, gets and device atomics from three
    processes while the target does not progress; device fetch-and-add
    and compare-and-swap streams of rucx-perftest;
  - Open MPI and MPICH running tests/mpi's programs on two ranks over
    rucx's libucp (built with CAPI_FEATURES=verbs) with UCX_TLS=rc_verbs
    (Open MPI: pingpong, datatype and onesided; MPICH: all five);
  - rucx-perftest with a server on rxeb and a client on rxea (pair.sh), so
    that the traffic crosses the veth pair: tag_lat (SENDs), tag_bw of
    1 MB (rendezvous by RDMA READ), ucp_put_bw (WRITEs), ucp_get (READs),
    ucp_fadd and ucp_cswap with RUCX_ATOMIC_MODE=device (fetch-and-add and
    compare-and-swap executed by rxeb); afterwards run.sh checks the
    capture with roce_check.sh: every frame well-formed for tshark's
    InfiniBand dissector, SEND, WRITE, READ, atomic and ACK frames present,
    responses after their requests;
  - multi-rail on rxed and rxed1: tests/verbs_rails.rs (4 MiB rendezvous
    split over two lanes on the two devices, several sizes intact) and
    rucx-perftest tag_bw of 4 MiB between two processes over both, whose
    protocol table (RUCX_PROTO_INFO) must show the split.

Other options go to run.sh (--out DIR, --quiet, --timeout SECS, ...).
Without qemu-system-x86_64, vng, busybox, rdma, a kernel image or
rdma-core's headers, prints "skipped: <why>" and exits 0, or exits 1 if
RUCX_REQUIRE_ALL=1.
EOF
}

skip() {
    if [ "${RUCX_REQUIRE_ALL:-}" = 1 ]; then
        echo "suite.sh: error: $* (RUCX_REQUIRE_ALL=1)" >&2
        exit 1
    fi
    echo "skipped: $*"
    exit 0
}

build=1
run_opts=()
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --no-build) build=0; shift ;;
    *) run_opts+=("$1"); shift ;;
    esac
done

# What the guest needs, checked before a long build (run.sh checks again).
for t in qemu-system-x86_64 vng busybox rdma; do
    command -v "$t" >/dev/null || skip "$t not found (see tests/verbs_guest/run.sh --help)"
done
[ -n "$(find /boot -maxdepth 1 -name 'vmlinuz-*' -readable 2>/dev/null | head -n 1)" ] ||
    skip "no readable kernel image /boot/vmlinuz-* (apt-get install linux-image-amd64)"
pkg-config --exists libibverbs librdmacm 2>/dev/null ||
    skip "rdma-core headers not found (apt-get install libibverbs-dev librdmacm-dev libclang-dev)"
command -v python3 >/dev/null || skip "python3 not found (reads cargo's JSON messages)"

target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
bins=$target/verbs-guest-bins.txt

# Prints "name path" for each test executable of cargo's JSON messages.
executables() {
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        kind = m["target"]["kind"][0]
        name = "unit" if kind == "lib" else m["target"]["name"]
        print(name, m["executable"])
'
}

root_tests=(in_process active_messages datatypes rma ep_close_modes)
if [ "$build" -eq 1 ]; then
    cd "$root"
    t0=$EPOCHREALTIME
    {
        cargo test -q -p rucx-verbs --features sys --no-run --message-format=json
        cargo test -q --features verbs --no-run --message-format=json \
            "${root_tests[@]/#/--test=}" --test=device_atomics --test=verbs_processes
        cargo test -q --features verbs --no-run --message-format=json --test=verbs_rails
    } | executables >"$bins.new"
    cargo build -q --release --features verbs --bin rucx-perftest --bin rucx-info
    # rucx's libucp with rc_verbs, for Open MPI and MPICH in the guest.
    CAPI_FEATURES=verbs bash "$root/capi/install.sh" "$target/verbs-capi" >/dev/null
    mv "$bins.new" "$bins"
    printf 'build: %ss\n' "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
fi
[ -f "$bins" ] || { echo "suite.sh: error: no $bins (run without --no-build first)" >&2; exit 1; }

bin() {
    local p
    p=$(awk -v n="$1" '$1 == n { print $2 }' "$bins" | tail -n 1)
    if [ -z "$p" ] || [ ! -x "$p" ]; then
        echo "suite.sh: error: no test executable '$1' in $bins" >&2
        exit 1 # ends the script: set -e sees the failed substitution
    fi
    printf '%s' "$p"
}

req='RUCX_REQUIRE_ALL=1'
cmds=(
    "$req $(bin unit) --test-threads=1"
    "$req $(bin device) --test-threads=1"
    "$req $(bin device_queues) --test-threads=1"
    "$req $(bin rc_conformance) --test-threads=1"
    "$req $(bin rc_star) --test-threads=1"
)
for t in "${root_tests[@]}"; do
    cmds+=("$req $(bin "$t") --test-threads=1 rc_verbs")
done
# Device atomics: each test runs over the test double and over rc_verbs.
cmds+=("$req $(bin device_atomics) --test-threads=1")
info=$target/release/rucx-info
perf=$target/release/rucx-perftest
if [ ! -x "$perf" ] || [ ! -x "$info" ]; then
    echo "suite.sh: error: no $perf or $info" >&2
    exit 1
fi
# rucx-info -d lists rc_verbs on rxed:1, and not on rxe0 (on lo, where the
# connection manager resolves no route). $3 and $RXE_* expand in the guest.
# shellcheck disable=SC2016
cmds+=("$info -d | awk '/# *Transport:/ { t = \$3 } /# *Device:/ { print t, \$3 }' | sort -u >/tmp/tls; cat /tmp/tls; grep -qx \"rc_verbs \$RXE_D:1\" /tmp/tls && ! grep -q \"^rc_verbs \$RXE_LO\" /tmp/tls")
# Small counts: the guest emulates its CPUs (soft-RoCE moves 10-30 MB/s).
pt="RUCX_TLS=rc_verbs $perf --pair -V"
cmds+=(
    "$pt -t tag_lat -s 8 -n 2000"
    "$pt -t tag_bw -s 1000000 -n 100"
    "$pt -t ucp_put_bw -s 65536 -n 500"
    "$pt -t ucp_get -s 65536 -n 500"
)
# Between processes (tests/verbs_processes.rs): a peer killed mid get,
# put and tag rendezvous (either way); forged and stale keys refused by the
# target's device; puts, gets and device atomics from three processes
# while the target does not progress. Then device fetch-and-add and
# compare-and-swap streams of rucx-perftest (-V: every fetched value and
# the final word checked).
vp=$(bin verbs_processes)
cmds+=(
    "$req $vp --test-threads=1 --nocapture peer_death::"
    "$req $vp --test-threads=1 --nocapture keys::"
    "$req $vp --test-threads=1 --nocapture one_sided::"
    "RUCX_ATOMIC_MODE=device $pt -t ucp_fadd -s 8 -n 2000"
    "RUCX_ATOMIC_MODE=device $pt -t ucp_cswap -s 8 -n 2000"
)
# Open MPI (pml ucx, osc ucx) and MPICH (ch4:ucx) on rucx's libucp over
# rc_verbs: the programs of tests/mpi, two ranks, few iterations.
mpi="RUCX_REQUIRE_ALL=1 RUCX_MPI_TIMEOUT=240 RUCX_MPI_PROGRAM_ARGS=200 $root/tests/mpi/run.sh"
mpi_lib=$target/verbs-capi/lib
if [ ! -e "$mpi_lib/libucp.so.0" ]; then
    echo "suite.sh: error: no $mpi_lib/libucp.so.0 (run without --no-build first)" >&2
    exit 1
fi
# Open MPI runs the programs that use its own components (pingpong: pml
# ucx; onesided: osc ucx) and derived datatypes: each of its runs takes
# about 40 s of the guest's time. MPICH runs all five.
cmds+=(
    "RUCX_MPI_PROGRAMS='pingpong datatype onesided' $mpi --impl openmpi --ucx-lib $mpi_lib --np 2 --tls rc_verbs"
    "RUCX_MPI_PROGRAMS='pingpong nonblocking probe onesided datatype' $mpi --impl mpich --ucx-lib $mpi_lib --np 2 --tls rc_verbs"
)

# RoCEv2 across a real interface: a server on rxeb and a client on rxea
# (the veth pair; captured on va and checked after the guest), and
# multi-rail over rxed and rxed1. $ADDR_* expand in the guest.
pair="$here/pair.sh $perf"
tv='RUCX_TLS=rc_verbs'
veth="$pair rxeb:1 rxea:1 \$ADDR_B"
cmds+=(
    "$tv $veth 13401 -t tag_lat -s 8 -n 100 -V"
    "$tv $veth 13402 -t tag_bw -s 1000000 -n 10 -V"
    "$tv $veth 13403 -t ucp_put_bw -s 65536 -n 50 -V"
    "$tv $veth 13404 -t ucp_get -s 65536 -n 50 -V"
    "$tv RUCX_ATOMIC_MODE=device $veth 13405 -t ucp_fadd -n 100 -V"
    "$tv RUCX_ATOMIC_MODE=device $veth 13406 -t ucp_cswap -n 100 -V"
    "$req RUCX_NET_DEVICES=rxed:1,rxed1:1 $(bin verbs_rails) --test-threads=1 --nocapture"
)
cmds+=("$tv RUCX_MAX_RNDV_LANES=2 RUCX_PROTO_INFO=y $pair rxed:1,rxed1:1 rxed:1,rxed1:1 \$ADDR_D 13407 -t tag_bw -s 4194304 -n 5 -V >/tmp/rails.log 2>&1; rc=\$?; cat /tmp/rails.log; [ \$rc -eq 0 ] && grep -q 'rendezvous.*% on rc_verbs/rxed:1 and .*% on rc_verbs/rxed1:1' /tmp/rails.log")
exec "$here/run.sh" --net lo,dummy,rails,veth --capture va \
    --capture-expect send,write,read,atomic,ack --timeout 900 "${run_opts[@]}" -- "${cmds[@]}"
