#!/usr/bin/env bash
# Runs one rucx-perftest test between two processes on chosen devices: a
# server on some devices and a client on others. See usage().
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: tests/verbs_guest/pair.sh PERFTEST SERVER_DEVICES CLIENT_DEVICES ADDRESS PORT [PERFTEST OPTIONS]

Starts PERFTEST (rucx-perftest) as a server with RUCX_NET_DEVICES set to
SERVER_DEVICES, listening on PORT for its bootstrap connection, then runs
it as the client of ADDRESS:PORT with RUCX_NET_DEVICES set to
CLIENT_DEVICES and the given options (-t TEST ...). Exits with the
client's status, or the server's if the client succeeded (a client that
fails ends the server). Other RUCX_* variables (RUCX_TLS, ...) go to both.

Example, in the guest of run.sh --net veth (rxeb serves, rxea connects
across the veth pair):
  RUCX_TLS=rc_verbs tests/verbs_guest/pair.sh target/release/rucx-perftest \
      rxeb:1 rxea:1 "$ADDR_B" 13400 -t tag_lat -s 8 -n 100 -V
EOF
}

case ${1:-} in -h | --help) usage; exit 0 ;; esac
if [ $# -lt 5 ]; then
    usage >&2
    exit 2
fi
perf=$1 sdev=$2 cdev=$3 addr=$4 port=$5
shift 5
[ -x "$perf" ] || { echo "pair.sh: error: $perf is not executable" >&2; exit 2; }

RUCX_NET_DEVICES=$sdev "$perf" -p "$port" &
server=$!
crc=0
RUCX_NET_DEVICES=$cdev "$perf" "$addr" -p "$port" "$@" || crc=$?
if [ "$crc" -ne 0 ]; then
    # A client that failed before connecting leaves the server waiting.
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    exit "$crc"
fi
src=0
wait "$server" || src=$?
exit "$src"
