#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# MPI ping-pong (tests/mpi/pingpong.c: 8 B, 64 KiB, 1 MiB) over UCX's own
# libraries and over rucx's, alternating UCX, rucx, UCX, rucx, ... so that
# the machine's drift hits both alike. Prints per size the median one-way
# latency and ping-pong bandwidth of each, and the ratios rucx/UCX (median
# of the per-pair ratios; latency: lower is better, bandwidth: higher).
#
# Usage: benches/mpi-vs-ucx.sh --rucx-lib DIR [--impl openmpi|mpich]
#                              [--tls shm|tcp] [--runs N] [--iters N]
#
#   --rucx-lib  the lib/ of `capi/install.sh PREFIX`
#   --impl      the MPI (default openmpi: pml ucx)
#   --tls       shm or tcp (default shm), as tests/mpi/run.sh
#   --runs      pairs of runs (default 5)
#   --iters     round trips of the 8 B size (default 20000; 64 KiB runs
#               a fifth, 1 MiB a fiftieth)
set -euo pipefail

usage() {
    sed -n '9,18p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

rucx_lib=
impl=openmpi
tls=shm
runs=5
iters=20000
while [ "$#" -gt 0 ]; do
    case "$1" in
        --rucx-lib) [ "$#" -ge 2 ] || usage; rucx_lib=$2; shift 2 ;;
        --impl) [ "$#" -ge 2 ] || usage; impl=$2; shift 2 ;;
        --tls) [ "$#" -ge 2 ] || usage; tls=$2; shift 2 ;;
        --runs) [ "$#" -ge 2 ] || usage; runs=$2; shift 2 ;;
        --iters) [ "$#" -ge 2 ] || usage; iters=$2; shift 2 ;;
        -h|--help) usage ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done
[ -n "$rucx_lib" ] || { echo "error: --rucx-lib is missing" >&2; usage; }
for n in "$runs" "$iters"; do
    case "$n" in
        ''|*[!0-9]*|0) echo "error: --runs and --iters want positive numbers" >&2; exit 2 ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
run=$here/../tests/mpi/run.sh
out=$(mktemp)
trap 'rm -f "$out"' EXIT

one() { # one LABEL [--ucx-lib DIR]: appends "LABEL PAIR SIZE LAT BW" rows
    local label=$1 pair=$2
    shift 2
    local log
    log=$(RUCX_MPI_PROGRAMS=pingpong RUCX_MPI_PROGRAM_ARGS=$iters \
        "$run" --impl "$impl" --np 2 --tls "$tls" "$@" 2>&1) || {
        echo "error: $label run failed:" >&2
        echo "$log" | tail -n 20 >&2
        exit 1
    }
    echo "$log" | sed -n 's/^ *pingpong: size=\([0-9]*\) iters=[0-9]* latency_us=\([0-9.]*\) bandwidth_MBps=\([0-9.]*\)$/\1 \2 \3/p' |
        while read -r size lat bw; do
            echo "$label $pair $size $lat $bw" >>"$out"
        done
}

for ((i = 0; i < runs; i++)); do
    one ucx "$i"
    one rucx "$i" --ucx-lib "$rucx_lib"
done

echo "MPI ping-pong, $impl, $tls, $runs pairs, $iters round trips at 8 B"
awk '
function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ lat[$1, $2, $3] = $4; bw[$1, $2, $3] = $5; pairs[$2] = 1 }
END {
    printf "%-8s %12s %12s %9s %14s %14s %9s\n", "size", "ucx_lat_us", "rucx_lat_us",
        "lat_ratio", "ucx_MBps", "rucx_MBps", "bw_ratio"
    n = split("8 65536 1048576", order, " ")
    for (k = 1; k <= n; k++) {
        s = order[k]; m = 0
        for (p in pairs) {
            if (!(("ucx", p, s) in lat) || !(("rucx", p, s) in lat)) continue
            m++
            ul[m] = lat["ucx", p, s]; rl[m] = lat["rucx", p, s]
            ub[m] = bw["ucx", p, s]; rb[m] = bw["rucx", p, s]
            lr[m] = ul[m] > 0 ? rl[m] / ul[m] : 0
            br[m] = ub[m] > 0 ? rb[m] / ub[m] : 0
        }
        if (m == 0) continue
        printf "%-8s %12.3f %12.3f %9.3f %14.1f %14.1f %9.3f\n", s, median(ul, m),
            median(rl, m), median(lr, m), median(ub, m), median(rb, m), median(br, m)
    }
}' "$out"
