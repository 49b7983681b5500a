#!/usr/bin/env bash
# Kill -9 to error callback, UCX against rucx: builds both probes, runs
# every case N times and prints a table. See README.md.
#
# Environment:
#   N          runs per case (5)
#   TIMEOUT    seconds to wait for a callback after the kill (30)
#   INTERVALS  keepalive intervals to try ("100ms 1s")
#   NUM_EPS    UCX_KEEPALIVE_NUM_EPS / RUCX_KEEPALIVE_NUM_EPS (128)
#   CASES      transports ("tcp shm rc_iwarp")
#   TRAFFIC    "idle traffic"
#   ONLY       "ucx" or "rucx" to run one side only
#   KEEP       1: keep the per-run directory (logs) and print its path
set -u

N=${N:-5}
TIMEOUT=${TIMEOUT:-30}
INTERVALS=${INTERVALS:-"100ms 1s"}
NUM_EPS=${NUM_EPS:-128}
CASES=${CASES:-"tcp shm rc_iwarp"}
TRAFFIC=${TRAFFIC:-"idle traffic"}
ONLY=${ONLY:-}
KEEP=${KEEP:-0}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$root/target/keepalive
mkdir -p "$out"
UCX_PROBE=$out/ka_ucx
RUCX_PROBE=$root/target/release/examples/keepalive_probe

# --- build -------------------------------------------------------------
if [ "$ONLY" != rucx ]; then
    echo "building $UCX_PROBE" >&2
    gcc -O2 -Wall -Wextra -o "$UCX_PROBE" "$here/ka_ucx.c" -lucp -lucs || exit 1
fi
if [ "$ONLY" != ucx ]; then
    echo "building $RUCX_PROBE" >&2
    (cd "$root" && cargo build --release --example keepalive_probe) || exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ka.XXXXXX")
# The processes of a run not yet waited for are in its directory's
# "pids" file (runs happen in subshells); an interrupted run leaves them
# to end here.
cleanup() {
    local f p
    for f in "$work"/run.*/pids; do
        [ -f "$f" ] || continue
        while read -r p; do
            kill -9 "$p" 2>/dev/null
        done <"$f"
    done
    if [ "$KEEP" = 1 ]; then
        echo "logs in $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

# Seconds in an interval such as 100ms or 1s.
secs() {
    case $1 in
    *ms) awk -v v="${1%ms}" 'BEGIN { print v / 1000 }' ;;
    *us) awk -v v="${1%us}" 'BEGIN { print v / 1000000 }' ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
    esac
}

# The transports of a case, for one side ("" if it has none).
tls_of() { # impl case
    case $1:$2 in
    *:tcp) echo tcp ;;
    *:shm) echo posix,cma ;;
    rucx:rc_iwarp) echo rc_iwarp ;;
    *) echo "" ;;
    esac
}

# One run; prints the milliseconds from kill to callback, "none" if the
# callback did not run within TIMEOUT, or "fail:<why>" if the pair never
# got ready. The callback's status goes to $d/status.
run_one() { # impl tls mode interval
    local impl=$1 tls=$2 mode=$3 interval=$4
    local d prog env cpid spid settle i
    d=$(mktemp -d "$work/run.XXXXXX")
    if [ "$impl" = ucx ]; then
        prog=$UCX_PROBE
        env=(UCX_TLS="$tls" UCX_KEEPALIVE_INTERVAL="$interval"
            UCX_KEEPALIVE_NUM_EPS="$NUM_EPS")
    else
        prog=$RUCX_PROBE
        env=(RUCX_TLS="$tls" RUCX_KEEPALIVE_INTERVAL="$interval"
            RUCX_KEEPALIVE_NUM_EPS="$NUM_EPS")
    fi
    # Each side sees only its own variables.
    local clean=(env -u UCX_TLS -u UCX_KEEPALIVE_INTERVAL -u UCX_KEEPALIVE_NUM_EPS
        -u RUCX_TLS -u RUCX_KEEPALIVE_INTERVAL -u RUCX_KEEPALIVE_NUM_EPS
        -u RUCX_KEEPALIVE_MISSES)
    settle=$(awk -v s="$(secs "$interval")" 'BEGIN { t = 2.5 * s; if (t < 0.5) t = 0.5; print t }')

    "${clean[@]}" "${env[@]}" "$prog" client "$d/addr" >"$d/client.out" 2>"$d/client.err" &
    cpid=$!
    echo "$cpid" >>"$d/pids"
    "${clean[@]}" "${env[@]}" "$prog" server "$d/addr" "$mode" \
        "$(awk -v a="$settle" -v b="$TIMEOUT" 'BEGIN { print a + b + 1 }')" \
        >"$d/server.out" 2>"$d/server.err" &
    spid=$!
    echo "$spid" >>"$d/pids"

    for ((i = 0; i < 300; i++)); do
        grep -qs '^ready' "$d/server.out" && break
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.1
    done
    if ! grep -qs '^ready' "$d/server.out"; then
        kill -9 "$cpid" "$spid" 2>/dev/null
        wait "$cpid" "$spid" 2>/dev/null
        rm -f "$d/pids"
        local why
        why=$(grep -ho 'no active messages transport.*' "$d/server.err" "$d/client.err" | head -1)
        [ -n "$why" ] || why=$(tail -n1 "$d/server.err")
        [ -n "$why" ] || why="not ready in 30 s"
        echo "fail:$why"
        return
    fi
    sleep "$settle"
    local kill_ns
    kill_ns=$("$prog" kill "$cpid" | sed -n 's/^kill_ns=//p')
    wait "$cpid" 2>/dev/null
    # The server exits on its callback, or on its own timeout.
    for ((i = 0; i < (TIMEOUT + 5) * 20; i++)); do
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.05
    done
    kill -9 "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    rm -f "$d/pids"
    local line err_ns
    line=$(grep '^error_ns=' "$d/server.out")
    if [ -z "$line" ] || [ -z "$kill_ns" ]; then
        echo "none"
        return
    fi
    err_ns=$(sed 's/^error_ns=\([0-9]*\).*/\1/' <<<"$line")
    sed 's/^error_ns=[0-9]* status=\(.*\) rounds=.*/\1/' <<<"$line" >"$d/status"
    cat "$d/status" >>"$work/status.$impl"
    local ms
    ms=$(awk -v a="$err_ns" -v b="$kill_ns" 'BEGIN { printf "%.1f", (a - b) / 1e6 }')
    if awk -v m="$ms" -v t="$TIMEOUT" 'BEGIN { exit !(m > t * 1000) }'; then
        echo "none"
    else
        echo "$ms"
    fi
}

# "median [min-max]" of numbers, with how many runs had no callback.
summary() { # values...
    local nums=() none=0 fail="" v
    for v in "$@"; do
        case $v in
        none) none=$((none + 1)) ;;
        fail:*) fail=${v#fail:} ;;
        *) nums+=("$v") ;;
        esac
    done
    if [ -n "$fail" ] && [ ${#nums[@]} -eq 0 ]; then
        echo "FAILS: $fail"
        return
    fi
    if [ ${#nums[@]} -eq 0 ]; then
        echo "NO CALLBACK in ${TIMEOUT} s ($none/$# runs)"
        return
    fi
    local s
    s=$(printf '%s\n' "${nums[@]}" | sort -g | awk '
        { v[NR] = $1 }
        END {
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%.1f [%.1f-%.1f]", m, v[1], v[NR]
        }')
    if [ "$none" -gt 0 ]; then
        s="$s, NO CALLBACK in $none/$# runs"
    fi
    echo "$s"
}

median_of() { # summary
    sed -n 's/^\([0-9.]*\) \[.*/\1/p' <<<"$1"
}

rows=()
for case in $CASES; do
    for mode in $TRAFFIC; do
        for interval in $INTERVALS; do
            declare -A res=()
            for impl in ucx rucx; do
                if [ -n "$ONLY" ] && [ "$ONLY" != "$impl" ]; then
                    res[$impl]="not run"
                    continue
                fi
                tls=$(tls_of "$impl" "$case")
                if [ -z "$tls" ]; then
                    res[$impl]="n/a (no such transport)"
                    continue
                fi
                vals=()
                for ((r = 0; r < N; r++)); do
                    v=$(run_one "$impl" "$tls" "$mode" "$interval")
                    echo "$impl $case($tls) $mode interval=$interval run $r: $v" >&2
                    vals+=("$v")
                    # One failure to connect is the answer for every run.
                    [[ $v == fail:* ]] && break
                done
                res[$impl]=$(summary "${vals[@]}")
            done
            mu=$(median_of "${res[ucx]}")
            mr=$(median_of "${res[rucx]}")
            ratio="-"
            if [ -n "$mu" ] && [ -n "$mr" ]; then
                ratio=$(awk -v a="$mr" -v b="$mu" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
            fi
            rows+=("$case|$mode|interval=$interval num_eps=$NUM_EPS|${res[ucx]}|${res[rucx]}|$ratio")
            unset res
        done
    done
done

echo
echo "kill -9 -> error callback, ms: median [min-max] of $N runs (timeout $TIMEOUT s)"
{
    echo "transport|traffic|settings|UCX 1.13|rucx|rucx/UCX"
    printf '%s\n' "${rows[@]}"
} | column -t -s '|'
for impl in ucx rucx; do
    if [ -s "$work/status.$impl" ]; then
        echo
        echo "$impl callback statuses (runs):"
        sort "$work/status.$impl" | uniq -c
    fi
done
