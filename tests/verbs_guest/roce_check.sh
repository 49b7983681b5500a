#!/usr/bin/env bash
# Checks a RoCEv2 capture (UDP port 4791) with tshark's InfiniBand
# dissector: every frame well-formed, the expected opcode families present,
# and every response, ACK and atomic ACK answering a request seen before
# it. See usage().
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: tests/verbs_guest/roce_check.sh [--expect LIST] [--dropped N] CAPTURE

Reads CAPTURE (pcap or pcapng of UDP port 4791, as run.sh --capture saves
it) with tshark and fails (exit 1) unless:
  - it holds RoCEv2 frames, and every frame is one (all UDP 4791 traffic is
    dissected as InfiniBand BTH);
  - no frame is malformed and no frame has an expert item of severity
    error (tshark's _ws.malformed, _ws.expert.severity), with the
    upper-layer protocols that guess at InfiniBand payloads (RPC-over-RDMA,
    iSER, ...) off: rucx's payloads are none of them;
  - each opcode family of LIST appears at least once;
  - responses follow their requests: every RDMA READ response that starts
    a response (First, Only), every atomic ACK and every positive ACK with
    PSN p from B to A comes after a frame from A to B with PSN p of the
    request kind it answers (READ request; fetch-and-add or compare-and-
    swap; any request). NAKs (RNR, sequence error and the others) are
    counted, not required to match, and allowed. With --dropped N (the
    frames the capturing side reported dropped), up to N answers without
    their request are reported but allowed: each may answer a dropped
    frame.
Prints a summary: frames, counts per opcode family, per opcode (tshark's
names) and the NAKs.

Families for --expect (comma-separated; default: none):
  send    SEND First/Middle/Last/Only (with or without immediate)
  write   RDMA WRITE First/Middle/Last/Only (with or without immediate)
  read    RDMA READ request and READ response
  atomic  FETCH ADD or COMPARE SWAP request and atomic ACK
  ack     Acknowledge (positive)

Needs tshark; without it prints "skipped: <why>" and exits 0, or exits 1
if RUCX_REQUIRE_ALL=1.
EOF
}

die() {
    echo "roce_check.sh: error: $*" >&2
    exit 1
}

expect=
dropped=0
while [ $# -gt 0 ]; do
    case $1 in
    -h | --help) usage; exit 0 ;;
    --expect) [ $# -ge 2 ] || die "--expect needs a value"; expect=$2; shift 2 ;;
    --dropped)
        [ $# -ge 2 ] || die "--dropped needs a value"
        [[ $2 =~ ^[0-9]+$ ]] || die "--dropped takes a count of frames, not '$2'"
        dropped=$2
        shift 2
        ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
    esac
done
[ $# -eq 1 ] || die "one capture file expected (see --help)"
pcap=$1
IFS=, read -r -a families <<<"$expect"
for f in "${families[@]}"; do
    case $f in
    send | write | read | atomic | ack) ;;
    *) die "unknown opcode family '$f' (send, write, read, atomic, ack)" ;;
    esac
done
[ -r "$pcap" ] || die "cannot read $pcap"
if ! command -v tshark >/dev/null; then
    if [ "${RUCX_REQUIRE_ALL:-}" = 1 ]; then
        die "tshark not found (RUCX_REQUIRE_ALL=1)"
    fi
    echo "skipped: tshark not found (apt-get install tshark)"
    exit 0
fi

# rucx's SEND payloads are its own active messages, for which Wireshark
# has no dissector; the upper-layer protocols whose heuristics look at
# InfiniBand payloads (RPC-over-RDMA, iSER, NVMe-oF, SMB Direct, ...) would
# guess at them, and RPC-over-RDMA's throws on a 4-byte one ("Malformed
# Packet: RPCoRDMA"). So those protocols are off (not ethertype, which
# Ethernet needs); the InfiniBand headers are what is checked here.
no_ulp=()
while read -r table name enabled; do
    if [ "$table" = infiniband.payload ] && [ "$enabled" = T ] && [ "$name" != ethertype ]; then
        no_ulp+=(--disable-protocol "$name")
    fi
done < <(tshark -G heuristic-decodes 2>/dev/null)

ts() { tshark -n "${no_ulp[@]}" -r "$pcap" "$@" 2>/dev/null; }

frames=$(ts | wc -l)
malformed=$(ts -Y _ws.malformed | wc -l)
errors=$(ts -Y '_ws.expert.severity >= 0x00800000' | wc -l)
not_ib=$(ts -Y 'udp.port == 4791 && !infiniband' | wc -l)
printf 'capture %s: %s frames, %s malformed, %s with expert errors, %s UDP 4791 not dissected as RoCEv2\n' \
    "$pcap" "$frames" "$malformed" "$errors" "$not_ib"
failed=0
if [ "$frames" -eq 0 ]; then
    echo "FAIL: no frame in the capture"
    failed=1
fi
if [ "$malformed" -ne 0 ] || [ "$errors" -ne 0 ] || [ "$not_ib" -ne 0 ]; then
    echo "FAIL: malformed or undissected frames:"
    ts -Y '_ws.malformed || _ws.expert.severity >= 0x00800000 || (udp.port == 4791 && !infiniband)' |
        head -n 20 | sed 's/^/  /'
    failed=1
fi

# Per opcode, tshark's names ("RC RDMA Read Request QP=0x11" without the QP).
ts -Y infiniband -T fields -e _ws.col.Info | sed -e 's/ QP=.*//' | sort | uniq -c | sort -rn |
    sed 's/^/  /'

# One line per frame: number, source, destination, opcode, PSN, AETH
# syndrome (empty without an AETH). Opcodes are the RC ones of the IBTA
# specification (BTH opcode, transport RC = 0x00..0x1f).
ts -Y infiniband -T fields -E separator=' ' -E occurrence=f \
    -e frame.number -e ip.src -e ip.dst -e infiniband.bth.opcode \
    -e infiniband.bth.psn -e infiniband.aeth.syndrome |
    awk -v expect="$expect" -v dropped="$dropped" '
    function family(op) {
        if (op <= 5 || op == 22 || op == 23) return "send"
        if (op <= 11) return "write"
        if (op == 12) return "read_req"
        if (op <= 16) return "read_resp"
        if (op == 17) return "ack"
        if (op == 18) return "atomic_ack"
        if (op == 19 || op == 20) return "atomic_req"
        return "other"
    }
    NF >= 5 {
        n = $1; src = $2; dst = $3; op = $4 + 0; psn = $5 + 0
        syn = (NF >= 6) ? $6 + 0 : -1
        f = family(op)
        # An AETH syndrome whose top bits are not 00 is a NAK (01: RNR,
        # 11: NAK with a code).
        if (f == "ack" && syn >= 0 && int(syn / 32) != 0) {
            naks++
            nak_kind[int(syn / 32) == 1 ? "RNR NAK" : sprintf("NAK code %d", syn % 32)]++
            next
        }
        count[f]++
        if (f == "send" || f == "write" || f == "read_req" || f == "atomic_req")
            req[src, dst, psn] = 1
        if (f == "read_req") readreq[src, dst, psn] = 1
        if (f == "atomic_req") atomreq[src, dst, psn] = 1
        # op 13 READ Response First, 16 Only: the PSN of the request.
        if ((op == 13 || op == 16) && !((dst, src, psn) in readreq)) {
            bad++; if (bad <= 10) printf "  frame %d: READ response PSN %d with no READ request before it\n", n, psn
        }
        if (f == "atomic_ack" && !((dst, src, psn) in atomreq)) {
            bad++; if (bad <= 10) printf "  frame %d: atomic ACK PSN %d with no atomic request before it\n", n, psn
        }
        if (f == "ack" && !((dst, src, psn) in req)) {
            bad++; if (bad <= 10) printf "  frame %d: ACK PSN %d with no request before it\n", n, psn
        }
    }
    END {
        printf "families: send %d, write %d, read request %d, read response %d, atomic request %d, atomic ack %d, ack %d, other %d; NAKs %d\n",
            count["send"], count["write"], count["read_req"], count["read_resp"],
            count["atomic_req"], count["atomic_ack"], count["ack"], count["other"], naks
        for (k in nak_kind) printf "  %s: %d\n", k, nak_kind[k]
        fail = 0
        if (bad > dropped + 0) {
            printf "FAIL: %d responses or ACKs answer no request seen before them\n", bad
            fail = 1
        } else if (bad > 0) {
            printf "%d responses or ACKs answer no request seen before them: allowed, the capture dropped %d frames\n", bad, dropped
        }
        split(expect, want, ",")
        for (i in want) {
            w = want[i]
            if (w == "read") ok = count["read_req"] > 0 && count["read_resp"] > 0
            else if (w == "atomic") ok = count["atomic_req"] > 0 && count["atomic_ack"] > 0
            else ok = count[w] > 0
            if (!ok) { printf "FAIL: no %s frames\n", w; fail = 1 }
        }
        exit fail
    }' || failed=1

if [ "$failed" -ne 0 ]; then
    echo "result: FAIL"
    exit 1
fi
echo "result: ok${expect:+ (found $expect)}"
