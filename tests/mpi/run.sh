#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Builds the MPI test programs of this directory with one MPI's compiler
# and runs each of them on that MPI's UCX layer: Open MPI with pml ucx and
# osc ucx forced, or MPICH whose ch4 device is ucx (with shared memory of
# its own turned off, so that local ranks talk through UCX too).
#
# Usage: tests/mpi/run.sh [--impl openmpi|mpich] [--ucx-lib DIR] [--np N]
#                         [--tls shm|tcp|rc_verbs]
#
#   --impl     which MPI (default openmpi); Debian's names are used
#              explicitly: mpicc.openmpi + mpirun.openmpi, or
#              mpicc.mpich + mpiexec.mpich
#   --ucx-lib  run the ranks with LD_LIBRARY_PATH=DIR, so that they load
#              libucp.so.0 (and libucs/libucm/libuct) from DIR, e.g. the
#              lib/ of capi/install.sh PREFIX; default: the system's UCX
#   --np       number of ranks (default 2; they are oversubscribed)
#   --tls      UCX_TLS for the ranks: shm = sm,self (default),
#              tcp = tcp,self, rc_verbs = rc_verbs,self (an RDMA device;
#              rucx's libucp built with CAPI_FEATURES=verbs)
#
# Prints "ok NAME" or "FAILED NAME (exit N)" per program (with the tail of
# its output after a failure), then "N passed, N failed", and exits 1 if
# any failed. If the chosen MPI is not installed (or MPICH's device is not
# ucx) it prints "skipped: <why>" and exits 0, or 1 with RUCX_REQUIRE_ALL=1.
#
# Environment: RUCX_MPI_TIMEOUT (seconds per program, default 120),
# RUCX_MPI_ARGS (extra launcher arguments, split on spaces),
# RUCX_MPI_PROGRAMS (programs to run, default all, space separated),
# RUCX_MPI_PROGRAM_ARGS (arguments of each program, split on spaces; e.g.
# the iteration count of pingpong).
set -euo pipefail

usage() {
    sed -n '9,23p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

impl=openmpi
ucx_lib=
np=2
tls=shm

while [ "$#" -gt 0 ]; do
    case "$1" in
        --impl) [ "$#" -ge 2 ] || usage; impl=$2; shift 2 ;;
        --impl=*) impl=${1#*=}; shift ;;
        --ucx-lib) [ "$#" -ge 2 ] || usage; ucx_lib=$2; shift 2 ;;
        --ucx-lib=*) ucx_lib=${1#*=}; shift ;;
        --np) [ "$#" -ge 2 ] || usage; np=$2; shift 2 ;;
        --np=*) np=${1#*=}; shift ;;
        --tls) [ "$#" -ge 2 ] || usage; tls=$2; shift 2 ;;
        --tls=*) tls=${1#*=}; shift ;;
        -h|--help) usage ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done

case "$np" in
    ''|*[!0-9]*) echo "error: --np wants a number, got '$np'" >&2; exit 2 ;;
esac
if [ "$np" -lt 1 ]; then
    echo "error: --np must be at least 1" >&2
    exit 2
fi

case "$tls" in
    shm) ucx_tls=sm,self ;;
    tcp) ucx_tls=tcp,self ;;
    rc_verbs) ucx_tls=rc_verbs,self ;;
    *) echo "error: --tls is shm, tcp or rc_verbs, got '$tls'" >&2; exit 2 ;;
esac

if [ -n "$ucx_lib" ]; then
    if [ ! -d "$ucx_lib" ]; then
        echo "error: --ucx-lib $ucx_lib is not a directory" >&2
        exit 2
    fi
    ucx_lib=$(cd "$ucx_lib" && pwd)
    if [ ! -e "$ucx_lib/libucp.so.0" ]; then
        echo "error: $ucx_lib has no libucp.so.0" >&2
        exit 2
    fi
fi

skip() {
    echo "skipped: $*"
    if [ "${RUCX_REQUIRE_ALL:-0}" = 1 ]; then
        exit 1
    fi
    exit 0
}

case "$impl" in
    openmpi)
        mpicc=mpicc.openmpi
        launcher=mpirun.openmpi
        ;;
    mpich)
        mpicc=mpicc.mpich
        launcher=mpiexec.mpich
        ;;
    *) echo "error: --impl is openmpi or mpich, got '$impl'" >&2; exit 2 ;;
esac

for tool in "$mpicc" "$launcher" timeout; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        skip "$impl: $tool not found (Debian: apt-get install" \
            "$([ "$impl" = openmpi ] && echo openmpi-bin libopenmpi-dev ||
                echo mpich libmpich-dev))"
    fi
done

if [ "$impl" = mpich ]; then
    device=$(mpichversion 2>/dev/null | sed -n 's/^MPICH Device:[[:space:]]*//p')
    case "$device" in
        *ucx*) ;;
        *) skip "mpich: its device is '${device:-unknown}', not ucx" ;;
    esac
fi

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/rucx-mpi.XXXXXX")
trap 'rm -rf "$work"' EXIT

programs=${RUCX_MPI_PROGRAMS:-"pingpong nonblocking probe datatype onesided"}
timeout_s=${RUCX_MPI_TIMEOUT:-120}
extra=()
if [ -n "${RUCX_MPI_ARGS:-}" ]; then
    read -r -a extra <<<"$RUCX_MPI_ARGS"
fi
prog_args=()
if [ -n "${RUCX_MPI_PROGRAM_ARGS:-}" ]; then
    read -r -a prog_args <<<"$RUCX_MPI_PROGRAM_ARGS"
fi

# The launcher and its arguments; the program follows.
case "$impl" in
    openmpi)
        # pml ucx and osc ucx only select themselves when UCX offers one
        # of the transports and devices of pml_ucx_tls/pml_ucx_devices
        # (InfiniBand by default); "any" lifts that. The BTLs that could
        # carry MPI traffic besides UCX are excluded.
        launch=("$launcher" --allow-run-as-root --oversubscribe -np "$np"
            --mca pml ucx --mca osc ucx
            --mca btl '^vader,tcp,openib,uct'
            --mca pml_ucx_tls any --mca pml_ucx_devices any
            --mca osc_ucx_tls any --mca osc_ucx_devices any
            -x "UCX_TLS=$ucx_tls")
        if [ -n "$ucx_lib" ]; then
            launch+=(-x "LD_LIBRARY_PATH=$ucx_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
        fi
        ;;
    mpich)
        # MPIR_CVAR_NOLOCAL=1: ranks on this host use the netmod (UCX)
        # instead of MPICH's own shared memory.
        launch=("$launcher" -n "$np"
            -genv UCX_TLS "$ucx_tls"
            -genv MPIR_CVAR_NOLOCAL 1)
        if [ -n "$ucx_lib" ]; then
            launch+=(-genv LD_LIBRARY_PATH "$ucx_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
        fi
        ;;
esac
launch+=(${extra[@]+"${extra[@]}"})

echo "mpi: $impl ($launcher), $np ranks, UCX_TLS=$ucx_tls, UCX from ${ucx_lib:-the system}"

passed=0
failed=0
for prog in $programs; do
    src="$here/$prog.c"
    log="$work/$prog.log"
    if [ ! -f "$src" ]; then
        echo "FAILED $prog (no $src)"
        failed=$((failed + 1))
        continue
    fi
    if ! "$mpicc" -O2 -Wall -o "$work/$prog" "$src" >"$log" 2>&1; then
        echo "FAILED $prog (build)"
        sed 's/^/  | /' "$log" | tail -n 20
        failed=$((failed + 1))
        continue
    fi
    rc=0
    (cd "$work" && timeout -k 10 "$timeout_s" "${launch[@]}" "./$prog" ${prog_args[@]+"${prog_args[@]}"}) \
        >"$log" 2>&1 </dev/null || rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "ok $prog"
        grep '^pingpong: size=' "$log" | sed 's/^/  /' || true
        passed=$((passed + 1))
    else
        echo "FAILED $prog (exit $rc)"
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            if grep -q "^$prog: ok (" "$log"; then
                # Rank 0 got through the final barrier: the hang is in
                # MPI_Finalize (seen with MPICH 4.0.2 on UCX 1.13.1's tcp).
                echo "  | timed out after $timeout_s s, in MPI_Finalize"
            else
                echo "  | timed out after $timeout_s s"
            fi
        fi
        tail -n 20 "$log" | sed 's/^/  | /'
        failed=$((failed + 1))
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
