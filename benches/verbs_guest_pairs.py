#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Runs inside the soft-RoCE guest (see benches/verbs-guest-vs-ucx.sh):
rucx-perftest over rc_verbs against UCX's ucx_perftest over rc_verbs on
the same device, alternating UCX, rucx, UCX, rucx, ..., and ib_write_bw as
the device's ceiling; writes one JSON object per run to --out, and with
--summarize prints the medians and ratios of such a file.

UCX's UCP level cannot run on rxe here (UCX 1.13's ud_verbs wireup endpoint
times out, and UCP finds no other auxiliary transport for rc_verbs), so
UCX is measured at its UCT level, one layer below its UCP: what UCX's
rc_verbs transport costs before any protocol, matching, rendezvous or
request handling. A rucx/UCX ratio below 1 for latency (above 1 for
bandwidth) therefore means rucx's whole stack beats UCX's transport alone.
"""
import argparse, json, os, re, socket, statistics, subprocess, sys, time

# (name, rucx-perftest test and size, ucx_perftest UCT test and options, kind)
SPECS = [
    ("tag_lat:8", ["-t", "tag_lat", "-s", "8"], ["-t", "am_lat", "-s", "8"], "lat", 2000),
    ("tag_bw:65536", ["-t", "tag_bw", "-s", "65536"], ["-t", "get", "-s", "65536", "-D", "zcopy", "-O", "32"], "bw", 400),
    ("tag_bw:1048576", ["-t", "tag_bw", "-s", "1048576"], ["-t", "get", "-s", "1048576", "-D", "zcopy", "-O", "32"], "bw", 60),
    ("ucp_put_bw:1048576", ["-t", "ucp_put_bw", "-s", "1048576"], ["-t", "put_bw", "-s", "1048576", "-D", "zcopy"], "bw", 60),
    ("ucp_get:1048576", ["-t", "ucp_get", "-s", "1048576"], ["-t", "get", "-s", "1048576", "-D", "zcopy"], "bw", 60),
    ("ucp_fadd:8", ["-t", "ucp_fadd", "-s", "8"], ["-t", "fadd", "-s", "8"], "lat", 2000),
]
FIELDS = ["iters", "lat_p50", "lat_avg", "lat_overall", "bw_avg", "bw_overall", "mr_avg", "mr_overall"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def final_numbers(text):
    for line in reversed(text.splitlines()):
        parts = line.replace(",", "").split()
        if len(parts) == len(FIELDS):
            try:
                return dict(zip(FIELDS, map(float, parts)))
            except ValueError:
                continue
    return None


def pair(server, client, env, timeout):
    """Starts `server`, runs `client`; the client's output, or None."""
    srv = subprocess.Popen(server, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1.0)
        out = subprocess.run(client, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=timeout)
        if out.returncode != 0:
            sys.stderr.write(f"failed ({out.returncode}): {' '.join(client)}\n{out.stdout[-1500:]}\n")
            return None
        return out.stdout
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"timed out: {' '.join(client)}\n")
        return None
    finally:
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def ib_write_bw(dev, size, iters, timeout):
    port = str(free_port())
    base = ["ib_write_bw", "-d", dev, "-x", "1", "-s", str(size), "-n", str(iters), "-p", port, "-F"]
    out = pair(base, base + ["127.0.0.1"], dict(os.environ), timeout)
    if out is None:
        return None
    # The result row: bytes, iterations, BW peak, BW average (MB/s), MsgRate.
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0] == str(size):
            return float(parts[3])
    return None


def inside(args):
    env = dict(os.environ)
    with open(args.out, "w") as out:
        for run in range(args.runs):
            for name, rucx_t, ucx_t, kind, iters in SPECS:
                if args.only and name not in args.only:
                    continue
                n = max(1, int(iters * args.scale))
                common = ["-n", str(n), "-w", str(max(1, n // 10)), "-f"]
                for who in ("ucx", "rucx"):
                    port = str(free_port())
                    if who == "ucx":
                        uct = ["-d", args.ucx_dev, "-x", "rc_verbs"] + ucx_t
                        text = pair(["ucx_perftest", "-p", port] + uct,
                                    ["ucx_perftest", "127.0.0.1", "-p", port] + uct + common,
                                    env, args.timeout)
                    else:
                        e = dict(env, RUCX_TLS="rc_verbs")
                        text = pair([args.rucx, "-p", port],
                                    [args.rucx, "127.0.0.1", "-p", port] + rucx_t + common,
                                    e, args.timeout)
                    nums = final_numbers(text) if text else None
                    rec = {"run": run, "spec": name, "who": who, "kind": kind, "nums": nums}
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    print(f"run {run} {name} {who}: {nums and (nums['lat_p50'] if kind == 'lat' else nums['bw_overall'])}",
                          flush=True)
            if args.only and "ib_write_bw" not in args.only:
                continue
            bw = ib_write_bw(args.ib_dev, 1048576, max(20, int(200 * args.scale)), args.timeout)
            out.write(json.dumps({"run": run, "spec": "ib_write_bw:1048576", "who": "ib", "kind": "bw",
                                  "nums": bw and {"bw_overall": bw}}) + "\n")
            out.flush()
            print(f"run {run} ib_write_bw: {bw}", flush=True)


def summarize(path):
    recs = [json.loads(l) for l in open(path) if l.strip()]
    by = {}
    for r in recs:
        by.setdefault((r["spec"], r["run"]), {})[r["who"]] = r["nums"]
    specs = [s[0] for s in SPECS]
    print("| test | UCX (UCT rc_verbs) median | rucx (rc_verbs) median | ratio rucx/UCX (median of pairs) | pairs |")
    print("|---|---|---|---|---|")
    for name, _, ucx_t, kind, _ in SPECS:
        key = "lat_p50" if kind == "lat" else "bw_overall"
        us, rs, ratios = [], [], []
        for (spec, run), who in sorted(by.items()):
            if spec != name or not who.get("ucx") or not who.get("rucx"):
                continue
            u, r = who["ucx"][key], who["rucx"][key]
            us.append(u)
            rs.append(r)
            if u > 0:
                ratios.append(r / u)
        unit = "us" if kind == "lat" else "MB/s"
        if not ratios:
            print(f"| {name} | - | - | no complete pair | 0 |")
            continue
        med = lambda v: statistics.median(v)
        print(f"| {name} (UCX: {' '.join(ucx_t[:2])}) | {med(us):.2f} {unit} | {med(rs):.2f} {unit} | "
              f"{med(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) | {len(ratios)} |")
    ib = [r["nums"]["bw_overall"] for r in recs if r["who"] == "ib" and r["nums"]]
    put = [r["nums"]["bw_overall"] for r in recs
           if r["who"] == "rucx" and r["spec"] == "ucp_put_bw:1048576" and r["nums"]]
    if ib and put:
        print(f"\nib_write_bw 1 MiB: median {statistics.median(ib):.2f} MB/s ({len(ib)} runs); "
              f"rucx ucp_put_bw 1 MiB median {statistics.median(put):.2f} MB/s = "
              f"{statistics.median(put) / statistics.median(ib):.3f} of it")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summarize", metavar="FILE", help="print the table of a results file and exit")
    ap.add_argument("--out", help="results file (JSON lines)")
    ap.add_argument("--rucx", help="rucx-perftest built with the verbs feature")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every iteration count")
    ap.add_argument("--ucx-dev", default="rxed:1")
    ap.add_argument("--ib-dev", default="rxed")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--only", nargs="*", help="run only these tests (names as in the table, and ib_write_bw)")
    args = ap.parse_args()
    if args.summarize:
        summarize(args.summarize)
        return
    if not args.out or not args.rucx:
        ap.error("--out and --rucx are needed to run")
    inside(args)


if __name__ == "__main__":
    main()
