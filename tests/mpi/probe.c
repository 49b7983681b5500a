/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Probed receives with MPI_ANY_SOURCE and MPI_ANY_TAG. Every rank sends
 * NMSG messages to every rank (itself included) with MPI_Isend; message j
 * has a tag and a size derived from j (0 B, small, and beyond the eager
 * limit) and data derived from (source, destination, j). Each rank then
 * receives them all in three phases, separated by barriers:
 *
 *   1. MPI_Probe(ANY_SOURCE, ANY_TAG), MPI_Get_count, then MPI_Recv from
 *      the probed source and tag into a buffer of exactly that size;
 *   2. MPI_Mprobe(ANY_SOURCE, ANY_TAG) + MPI_Mrecv;
 *   3. polling with MPI_Iprobe (even messages) and MPI_Improbe (odd ones),
 *      then MPI_Recv / MPI_Mrecv.
 *
 * Messages from one source must arrive in the order sent (MPI's
 * non-overtaking rule), so each probe's status must name the next
 * message of that source: tag, size and then data are checked against it.
 *
 * Usage: probe [NMSG]   (default 8)
 */
#include "mpitest.h"

#define MAXLEN (96 * 1024)

static int msg_tag(int j)
{
    return 7 + j % 5;
}

static size_t msg_len(int j)
{
    static const size_t lens[] = {0, 16, 4000, 70000, 1, 96 * 1024};

    return lens[j % 6];
}

static const char *phase_name(int phase)
{
    switch (phase) {
    case 1:
        return "MPI_Probe+MPI_Recv";
    case 2:
        return "MPI_Mprobe+MPI_Mrecv";
    default:
        return "MPI_Iprobe/MPI_Improbe";
    }
}

/* Checks a probed status against the next expected message of its source,
 * and returns that message's index. */
static int expect(const MPI_Status *st, int *next, int nmsg, int phase)
{
    int src = st->MPI_SOURCE;
    int count = -1;
    int j;

    if (src < 0 || src >= mt_size) {
        mt_fail("%s: probe returned source %d", phase_name(phase), src);
    }
    j = next[src];
    if (j >= nmsg) {
        mt_fail("%s: probe returned a message from %d beyond the %d sent",
                phase_name(phase), src, nmsg);
    }
    MT_CHECK(MPI_Get_count(st, MPI_BYTE, &count));
    if (st->MPI_TAG != msg_tag(j) || count != (int)msg_len(j)) {
        mt_fail("%s: message %d from %d: probed tag=%d count=%d, expected "
                "tag=%d count=%zu (out of order or lost)",
                phase_name(phase), j, src, st->MPI_TAG, count, msg_tag(j),
                msg_len(j));
    }
    next[src]++;
    return j;
}

static void check_data(const unsigned char *buf, const MPI_Status *st,
                       int src, int j, int phase)
{
    size_t len = msg_len(j);
    size_t bad;
    int count = -1;

    MT_CHECK(MPI_Get_count(st, MPI_BYTE, &count));
    if (st->MPI_SOURCE != src || st->MPI_TAG != msg_tag(j) ||
        count != (int)len) {
        mt_fail("%s: receive of message %d from %d: status source=%d tag=%d "
                "count=%d",
                phase_name(phase), j, src, st->MPI_SOURCE, st->MPI_TAG, count);
    }
    bad = mt_mismatch(buf, len, (unsigned)src, (unsigned)mt_rank,
                      (unsigned)(j + 100 * phase));
    if (bad != len) {
        mt_fail("%s: data of message %d from %d (%zu bytes) differs at byte "
                "%zu",
                phase_name(phase), j, src, len, bad);
    }
}

static void run_phase(int phase, int nmsg, unsigned char **sbufs,
                      unsigned char *rbuf, MPI_Request *reqs,
                      MPI_Status *stats, int *next)
{
    int total = nmsg * mt_size;
    int got, dst, j, nreq = 0;

    memset(next, 0, sizeof(*next) * (size_t)mt_size);
    for (j = 0; j < nmsg; j++) {
        for (dst = 0; dst < mt_size; dst++) {
            unsigned char *b = sbufs[j * mt_size + dst];

            mt_fill(b, msg_len(j), (unsigned)mt_rank, (unsigned)dst,
                    (unsigned)(j + 100 * phase));
            MT_CHECK(MPI_Isend(b, (int)msg_len(j), MPI_BYTE, dst, msg_tag(j),
                               MPI_COMM_WORLD, &reqs[nreq++]));
        }
    }

    for (got = 0; got < total; got++) {
        MPI_Status st, rst;
        MPI_Message msg = MPI_MESSAGE_NULL;
        int flag = 0, polls = 0;
        int use_mrecv;

        memset(rbuf, 0xee, MAXLEN + 1);
        if (phase == 1) {
            MT_CHECK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                               &st));
            use_mrecv = 0;
        } else if (phase == 2) {
            MT_CHECK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                                &msg, &st));
            use_mrecv = 1;
        } else {
            use_mrecv = got % 2;
            while (!flag) {
                if (use_mrecv) {
                    MT_CHECK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG,
                                         MPI_COMM_WORLD, &flag, &msg, &st));
                } else {
                    MT_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG,
                                        MPI_COMM_WORLD, &flag, &st));
                }
                polls++;
            }
        }

        j = expect(&st, next, nmsg, phase);
        if (use_mrecv) {
            if (msg == MPI_MESSAGE_NULL) {
                mt_fail("%s: matched probe returned MPI_MESSAGE_NULL",
                        phase_name(phase));
            }
            MT_CHECK(MPI_Mrecv(rbuf, (int)msg_len(j), MPI_BYTE, &msg, &rst));
            if (msg != MPI_MESSAGE_NULL) {
                mt_fail("%s: MPI_Mrecv did not reset the message handle",
                        phase_name(phase));
            }
        } else {
            MT_CHECK(MPI_Recv(rbuf, (int)msg_len(j), MPI_BYTE, st.MPI_SOURCE,
                              st.MPI_TAG, MPI_COMM_WORLD, &rst));
        }
        check_data(rbuf, &rst, st.MPI_SOURCE, j, phase);
        /* Bytes past the message must be untouched. */
        if (rbuf[msg_len(j)] != 0xee) {
            mt_fail("%s: message %d from %d wrote past its %zu bytes",
                    phase_name(phase), j, st.MPI_SOURCE, msg_len(j));
        }
    }

    MT_CHECK(MPI_Waitall(nreq, reqs, stats));
    /* Nothing else may be pending before the next phase sends. */
    {
        int flag = 1;

        MT_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
                            MPI_STATUS_IGNORE));
        if (flag) {
            mt_fail("%s: a message is left after receiving all %d",
                    phase_name(phase), total);
        }
    }
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    unsigned char **sbufs, *rbuf;
    MPI_Request *reqs;
    MPI_Status *stats;
    int *next;
    int nmsg = 8;
    int k, phase;

    mt_init(&argc, &argv, "probe");
    if (argc > 1) {
        nmsg = atoi(argv[1]);
        if (nmsg < 1) {
            mt_fail("bad message count '%s'", argv[1]);
        }
    }

    sbufs = calloc((size_t)nmsg * (size_t)mt_size, sizeof(*sbufs));
    reqs = calloc((size_t)nmsg * (size_t)mt_size, sizeof(*reqs));
    stats = calloc((size_t)nmsg * (size_t)mt_size, sizeof(*stats));
    next = calloc((size_t)mt_size, sizeof(*next));
    rbuf = malloc(MAXLEN + 1);
    if (sbufs == NULL || reqs == NULL || stats == NULL || next == NULL ||
        rbuf == NULL) {
        mt_fail("allocation for %d messages to %d ranks", nmsg, mt_size);
    }
    for (k = 0; k < nmsg * mt_size; k++) {
        sbufs[k] = malloc(MAXLEN);
        if (sbufs[k] == NULL) {
            mt_fail("malloc of %d bytes", MAXLEN);
        }
    }

    for (phase = 1; phase <= 3; phase++) {
        run_phase(phase, nmsg, sbufs, rbuf, reqs, stats, next);
    }

    for (k = 0; k < nmsg * mt_size; k++) {
        free(sbufs[k]);
    }
    free(sbufs);
    free(reqs);
    free(stats);
    free(next);
    free(rbuf);
    return mt_finish();
}
