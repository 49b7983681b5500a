/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * All-to-all exchange with MPI_Isend/MPI_Irecv and one MPI_Waitall per
 * round: every rank sends a distinct message to every rank, itself
 * included, and checks each received message's status (source, tag,
 * count) and data. Rounds alternate a small (eager) and a large
 * (rendezvous) size, and a second message per pair with another tag is
 * received in the same Waitall, so matching by tag is exercised too.
 *
 * Usage: nonblocking [ROUNDS]   (default 4)
 */
#include "mpitest.h"

#define SMALL 100
#define LARGE (200 * 1024)

int main(int argc, char **argv)
{
    unsigned char **sbufs, **rbufs;
    MPI_Request *reqs;
    MPI_Status *stats;
    int rounds = 4;
    int round, k, n, nreq;

    mt_init(&argc, &argv, "nonblocking");
    if (argc > 1) {
        rounds = atoi(argv[1]);
        if (rounds < 1) {
            mt_fail("bad round count '%s'", argv[1]);
        }
    }
    n = mt_size;

    /* Two messages per peer each way: tag A of the round size, tag B of 1/3. */
    sbufs = calloc(2 * (size_t)n, sizeof(*sbufs));
    rbufs = calloc(2 * (size_t)n, sizeof(*rbufs));
    reqs = calloc(4 * (size_t)n, sizeof(*reqs));
    stats = calloc(4 * (size_t)n, sizeof(*stats));
    if (sbufs == NULL || rbufs == NULL || reqs == NULL || stats == NULL) {
        mt_fail("calloc for %d ranks", n);
    }
    for (k = 0; k < 2 * n; k++) {
        sbufs[k] = malloc(LARGE);
        rbufs[k] = malloc(LARGE);
        if (sbufs[k] == NULL || rbufs[k] == NULL) {
            mt_fail("malloc of %d bytes", LARGE);
        }
    }

    for (round = 0; round < rounds; round++) {
        size_t len = (round % 2 == 0) ? SMALL : LARGE;
        size_t lens[2];
        int tags[2];
        int m;

        lens[0] = len;
        lens[1] = len / 3 + 1;
        tags[0] = 1000 + 2 * round;
        tags[1] = 1000 + 2 * round + 1;

        nreq = 0;
        /* Receives first, peers in rank order, tag B before tag A. */
        for (k = 0; k < n; k++) {
            for (m = 1; m >= 0; m--) {
                memset(rbufs[2 * k + m], 0, lens[m]);
                MT_CHECK(MPI_Irecv(rbufs[2 * k + m], (int)lens[m], MPI_BYTE,
                                   k, tags[m], MPI_COMM_WORLD, &reqs[nreq++]));
            }
        }
        /* Sends start at the next rank, so that not everyone hits rank 0. */
        for (k = 1; k <= n; k++) {
            int dst = (mt_rank + k) % n;

            for (m = 0; m < 2; m++) {
                unsigned char *b = sbufs[2 * dst + m];

                mt_fill(b, lens[m], (unsigned)mt_rank, (unsigned)dst,
                        (unsigned)tags[m]);
                MT_CHECK(MPI_Isend(b, (int)lens[m], MPI_BYTE, dst, tags[m],
                                   MPI_COMM_WORLD, &reqs[nreq++]));
            }
        }
        MT_CHECK(MPI_Waitall(nreq, reqs, stats));

        /* The first 2n requests are the receives, in posting order. */
        for (k = 0; k < n; k++) {
            for (m = 1; m >= 0; m--) {
                const MPI_Status *st = &stats[2 * k + (1 - m)];
                size_t bad;
                int count = -1;

                MT_CHECK(MPI_Get_count(st, MPI_BYTE, &count));
                if (st->MPI_SOURCE != k || st->MPI_TAG != tags[m] ||
                    count != (int)lens[m]) {
                    mt_fail("round %d: receive from %d tag %d: status "
                            "source=%d tag=%d count=%d, expected count %zu",
                            round, k, tags[m], st->MPI_SOURCE, st->MPI_TAG,
                            count, lens[m]);
                }
                bad = mt_mismatch(rbufs[2 * k + m], lens[m], (unsigned)k,
                                  (unsigned)mt_rank, (unsigned)tags[m]);
                if (bad != lens[m]) {
                    mt_fail("round %d: data of %zu bytes from rank %d tag %d "
                            "differs at byte %zu",
                            round, lens[m], k, tags[m], bad);
                }
            }
        }
    }

    for (k = 0; k < 2 * n; k++) {
        free(sbufs[k]);
        free(rbufs[k]);
    }
    free(sbufs);
    free(rbufs);
    free(reqs);
    free(stats);
    return mt_finish();
}
