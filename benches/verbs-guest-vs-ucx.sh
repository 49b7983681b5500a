#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# rucx over rc_verbs against UCX over rc_verbs, inside one soft-RoCE guest
# (tests/verbs_guest/run.sh --net lo,dummy: both on rxed), alternating UCX,
# rucx, UCX, rucx, ..., with ib_write_bw as the device's ceiling; prints
# the medians and the ratios rucx/UCX (median of the per-pair ratios).
# UCX runs at its UCT level (see benches/verbs_guest_pairs.py for why).
#
# Usage: benches/verbs-guest-vs-ucx.sh [--runs N] [--scale F] [--out DIR]
#                                      [--only "TEST..."]
#
#   --runs   pairs of runs per test (default 3)
#   --scale  multiplies the iteration counts (default 1; the guest
#            emulates its CPUs, so counts are small)
#   --out    keep the guest's logs and results.json in DIR
#   --only   run only these tests, e.g. "tag_lat:8 ib_write_bw"
#
# Builds rucx-perftest with the verbs feature first (in $CARGO_TARGET_DIR
# or target/). Needs what tests/verbs_guest/run.sh needs, plus perftest's
# ib_write_bw and ucx-utils' ucx_perftest.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
runs=3
scale=1
out=
only=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        --runs) [ "$#" -ge 2 ] || { echo "error: --runs needs a value" >&2; exit 2; }; runs=$2; shift 2 ;;
        --scale) [ "$#" -ge 2 ] || { echo "error: --scale needs a value" >&2; exit 2; }; scale=$2; shift 2 ;;
        --out) [ "$#" -ge 2 ] || { echo "error: --out needs a value" >&2; exit 2; }; out=$2; shift 2 ;;
        --only) [ "$#" -ge 2 ] || { echo "error: --only needs a value" >&2; exit 2; }; read -ra only <<<"$2"; shift 2 ;;
        -h|--help) sed -n '4,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for t in ucx_perftest ib_write_bw python3; do
    command -v "$t" >/dev/null || { echo "error: $t not found" >&2; exit 1; }
done
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
(cd "$root" && cargo build -q --release --features verbs --bin rucx-perftest)
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"
"$root/tests/verbs_guest/run.sh" --net lo,dummy --out "$out" --timeout 3000 --cmd-timeout 2900 -- \
    "python3 $here/verbs_guest_pairs.py --out \$OUT/results.json --rucx $target/release/rucx-perftest --runs $runs --scale $scale${only[*]:+ --only ${only[*]}}"
python3 "$here/verbs_guest_pairs.py" --summarize "$out/results.json"
