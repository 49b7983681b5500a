#!/usr/bin/env bash
# One guest boot that exercises the harness with tools that exist today:
# libibverbs' ibv_devinfo, perftest's ib_write_bw (over rxe0 on lo, and
# between rxea and rxeb across the veth pair with a RoCEv2 capture on va),
# UCX's ucx_info, and ucx_perftest on UCT's rc_verbs. Extra options (--out DIR,
# --timeout SECS, --quiet, ...) go to run.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

missing=()
for t in ibv_devinfo ib_write_bw ucx_info ucx_perftest; do
    command -v "$t" >/dev/null || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
    why="${missing[*]} not found (apt-get install ibverbs-utils perftest ucx-utils rdma-core ibverbs-providers)"
    if [ "${RUCX_REQUIRE_ALL:-}" = 1 ]; then
        echo "smoke.sh: error: $why (RUCX_REQUIRE_ALL=1)" >&2
        exit 1
    fi
    echo "skipped: $why"
    exit 0
fi

# Small iteration counts: the guest runs without KVM, at tens of MB/s.
uct='-n 10000 -w 100'
# The single-quoted commands expand their variables in the guest.
# shellcheck disable=SC2016
exec "$here/run.sh" --net lo,veth --capture va "$@" -- \
    'ibv_devinfo -d rxe0' \
    'bg:ib_write_bw -d rxe0 -n 1000 -p 18515' \
    'sleep 3; ib_write_bw -d rxe0 -n 1000 -p 18515 127.0.0.1' \
    'bg:ib_write_bw -d rxeb -x 1 -n 200 -p 18516' \
    'sleep 3; ib_write_bw -d rxea -x 1 -n 200 -p 18516 "$ADDR_B"' \
    'ucx_info -d | awk "/# *Transport:/ { t = \$3 } /# *Device:/ { print t, \$3 }" | sort -u >/tmp/tls; cat /tmp/tls; grep -qx "rc_verbs rxe0:1" /tmp/tls' \
    "bg:ucx_perftest -d rxe0:1 -x rc_verbs -t am_lat $uct -p 13340" \
    "sleep 3; ucx_perftest -d rxe0:1 -x rc_verbs -t am_lat $uct -p 13340 127.0.0.1"
# Not here: UCP over rc_verbs (UCX_TLS=rc_verbs,ud_verbs,self ucx_perftest -t
# tag_lat) aborts after 30 s with "UD endpoint ... unhandled timeout error"
# on rxe0 over lo and between rxea and rxeb alike (UCX 1.13.1, Linux 6.1),
# and without ud_verbs UCP finds no auxiliary transport for wireup.
