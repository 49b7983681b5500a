/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Ping-pong between ranks 0 and 1 with MPI_Send/MPI_Recv at 8 B, 64 KiB
 * and 1 MiB (eager and rendezvous sizes). For each size it first runs a
 * few round trips whose data is checked in both directions (distinct
 * patterns each way), then a timed loop in which rank 1 echoes what it
 * got; rank 0 checks the last echo. Other ranks wait in a barrier.
 *
 * Rank 0 prints one line per size:
 *   pingpong: size=<bytes> iters=<n> latency_us=<one-way> bandwidth_MBps=<MB/s>
 * (latency is half a round trip; bandwidth is size over it, 1 MB = 1e6 B).
 *
 * Usage: pingpong [ITERS]   (ITERS of the 8 B size, default 1000; the
 * larger sizes run ITERS/5 and ITERS/50 times, at least 5)
 */
#include "mpitest.h"

#define TAG_CHECK 11
#define TAG_TIMED 12
#define CHECK_ROUNDS 3

static void check_recv(const MPI_Status *st, int src, int tag, size_t len,
                       const char *what)
{
    int count = -1;

    MT_CHECK(MPI_Get_count(st, MPI_BYTE, &count));
    if (st->MPI_SOURCE != src || st->MPI_TAG != tag || count != (int)len) {
        mt_fail("%s: status source=%d tag=%d count=%d, expected %d/%d/%zu",
                what, st->MPI_SOURCE, st->MPI_TAG, count, src, tag, len);
    }
}

static void run_size(size_t len, int iters, unsigned char *sbuf,
                     unsigned char *rbuf)
{
    MPI_Status st;
    double t0, t1, lat_us, bw;
    size_t bad;
    int peer = 1 - mt_rank;
    int r, i;

    /* Checked round trips: 0 -> 1 with pattern (0, r), 1 -> 0 with (1, r). */
    for (r = 0; r < CHECK_ROUNDS; r++) {
        if (mt_rank == 0) {
            mt_fill(sbuf, len, 0, (unsigned)r, (unsigned)len);
            MT_CHECK(MPI_Send(sbuf, (int)len, MPI_BYTE, peer, TAG_CHECK,
                              MPI_COMM_WORLD));
            memset(rbuf, 0, len);
            MT_CHECK(MPI_Recv(rbuf, (int)len, MPI_BYTE, peer, TAG_CHECK,
                              MPI_COMM_WORLD, &st));
            check_recv(&st, peer, TAG_CHECK, len, "pong");
            bad = mt_mismatch(rbuf, len, 1, (unsigned)r, (unsigned)len);
            if (bad != len) {
                mt_fail("pong data of size %zu round %d differs at byte %zu",
                        len, r, bad);
            }
        } else {
            memset(rbuf, 0, len);
            MT_CHECK(MPI_Recv(rbuf, (int)len, MPI_BYTE, peer, TAG_CHECK,
                              MPI_COMM_WORLD, &st));
            check_recv(&st, peer, TAG_CHECK, len, "ping");
            bad = mt_mismatch(rbuf, len, 0, (unsigned)r, (unsigned)len);
            if (bad != len) {
                mt_fail("ping data of size %zu round %d differs at byte %zu",
                        len, r, bad);
            }
            mt_fill(sbuf, len, 1, (unsigned)r, (unsigned)len);
            MT_CHECK(MPI_Send(sbuf, (int)len, MPI_BYTE, peer, TAG_CHECK,
                              MPI_COMM_WORLD));
        }
    }

    /* Timed loop: rank 1 echoes rank 0's message back unchanged. */
    if (mt_rank == 0) {
        mt_fill(sbuf, len, 2, 0, (unsigned)len);
        memset(rbuf, 0, len);
    }
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    t0 = MPI_Wtime();
    for (i = 0; i < iters; i++) {
        if (mt_rank == 0) {
            MT_CHECK(MPI_Send(sbuf, (int)len, MPI_BYTE, peer, TAG_TIMED,
                              MPI_COMM_WORLD));
            MT_CHECK(MPI_Recv(rbuf, (int)len, MPI_BYTE, peer, TAG_TIMED,
                              MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            MT_CHECK(MPI_Recv(rbuf, (int)len, MPI_BYTE, peer, TAG_TIMED,
                              MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MT_CHECK(MPI_Send(rbuf, (int)len, MPI_BYTE, peer, TAG_TIMED,
                              MPI_COMM_WORLD));
        }
    }
    t1 = MPI_Wtime();

    bad = mt_mismatch(rbuf, len, 2, 0, (unsigned)len);
    if (bad != len) {
        mt_fail("timed loop: %s data of size %zu differs at byte %zu",
                mt_rank == 0 ? "echoed" : "received", len, bad);
    }
    if (mt_rank == 0) {
        lat_us = (t1 - t0) * 1e6 / (2.0 * iters);
        bw = lat_us > 0 ? (double)len / lat_us : 0.0; /* B/us == MB/s */
        printf("pingpong: size=%zu iters=%d latency_us=%.3f "
               "bandwidth_MBps=%.2f\n",
               len, iters, lat_us, bw);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {8, 64 * 1024, 1024 * 1024};
    static const int divisors[] = {1, 5, 50};
    size_t max = sizes[2];
    unsigned char *sbuf, *rbuf;
    int base = 1000;
    int s, iters;

    mt_init(&argc, &argv, "pingpong");
    if (argc > 1) {
        base = atoi(argv[1]);
        if (base < 1) {
            mt_fail("bad iteration count '%s'", argv[1]);
        }
    }
    if (mt_size < 2) {
        mt_fail("needs at least 2 ranks, got %d", mt_size);
    }

    sbuf = malloc(max);
    rbuf = malloc(max);
    if (sbuf == NULL || rbuf == NULL) {
        mt_fail("malloc of %zu bytes", max);
    }

    for (s = 0; s < 3; s++) {
        iters = base / divisors[s];
        if (iters < 5) {
            iters = 5;
        }
        if (mt_rank < 2) {
            run_size(sizes[s], iters, sbuf, rbuf);
        } else {
            /* Matches the barrier before the timed loop of ranks 0 and 1. */
            MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        }
    }

    free(sbuf);
    free(rbuf);
    return mt_finish();
}
