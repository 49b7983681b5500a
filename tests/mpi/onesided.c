/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * One-sided communication on a window made with MPI_Win_create over
 * malloc'ed memory. Rank r's right neighbour is r+1, its left r-1.
 *
 * Active target (MPI_Win_fence epochs):
 *   - MPI_Put of a small and a large block into the right neighbour;
 *   - MPI_Get of a block the right neighbour initialised;
 *   - MPI_Fetch_and_op(MPI_SUM) of rank+1 on a counter at rank 0: the
 *     total and the fetched values (which must order the additions one
 *     after another) are checked;
 *   - MPI_Compare_and_swap on a cell at rank 0: exactly one rank wins.
 * Passive target:
 *   - MPI_Win_lock(EXCLUSIVE) on the right neighbour, MPI_Put,
 *     MPI_Win_flush, MPI_Get of the same cells, MPI_Win_flush, check,
 *     MPI_Win_unlock;
 *   - MPI_Win_lock_all, MPI_Fetch_and_op(MPI_SUM, 1) on every rank,
 *     MPI_Win_flush_all, MPI_Win_unlock_all; each counter must reach the
 *     number of ranks.
 *
 * Usage: onesided
 */
#include "mpitest.h"

#define SMALL 256
#define LARGE (32 * 1024) /* 256 KiB of longs */

#define OFF_PUT 0
#define OFF_BIG (OFF_PUT + SMALL)
#define OFF_GETSRC (OFF_BIG + LARGE)
#define OFF_LOCK (OFF_GETSRC + SMALL)
#define OFF_CNT (OFF_LOCK + SMALL)
#define OFF_CAS (OFF_CNT + 1)
#define OFF_CNT2 (OFF_CNT + 2)
#define WIN_LONGS (OFF_CNT + 8)

static long value(int owner, int i, int what)
{
    return (long)owner * 100000000L + (long)what * 1000000L + i;
}

struct fetched {
    long before;
    long added;
};

static int by_before(const void *a, const void *b)
{
    const struct fetched *x = a, *y = b;

    return (x->before > y->before) - (x->before < y->before);
}

int main(int argc, char **argv)
{
    MPI_Win win;
    long *base, *src, *getbuf;
    long add, before = -1, cas_result = -2, swap, compare = -1;
    long total;
    int right, left, n, i;

    mt_init(&argc, &argv, "onesided");
    n = mt_size;
    right = (mt_rank + 1) % n;
    left = (mt_rank + n - 1) % n;

    base = malloc(WIN_LONGS * sizeof(long));
    src = malloc(LARGE * sizeof(long));
    getbuf = malloc(SMALL * sizeof(long));
    if (base == NULL || src == NULL || getbuf == NULL) {
        mt_fail("malloc of the window");
    }
    for (i = 0; i < WIN_LONGS; i++) {
        base[i] = 0;
    }
    for (i = 0; i < SMALL; i++) {
        base[OFF_GETSRC + i] = value(mt_rank, i, 3);
    }
    base[OFF_CAS] = -1;

    MT_CHECK(MPI_Win_create(base, WIN_LONGS * sizeof(long), sizeof(long),
                            MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MT_CHECK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));

    /* ---- active target ---- */
    MT_CHECK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    for (i = 0; i < LARGE; i++) {
        src[i] = value(mt_rank, i, 1);
    }
    MT_CHECK(MPI_Put(src, SMALL, MPI_LONG, right, OFF_PUT, SMALL, MPI_LONG,
                     win));
    MT_CHECK(MPI_Put(src, LARGE, MPI_LONG, right, OFF_BIG, LARGE, MPI_LONG,
                     win));
    for (i = 0; i < SMALL; i++) {
        getbuf[i] = -7;
    }
    MT_CHECK(MPI_Get(getbuf, SMALL, MPI_LONG, right, OFF_GETSRC, SMALL,
                     MPI_LONG, win));
    add = mt_rank + 1;
    MT_CHECK(MPI_Fetch_and_op(&add, &before, MPI_LONG, 0, OFF_CNT, MPI_SUM,
                              win));
    MT_CHECK(MPI_Win_fence(0, win));

    for (i = 0; i < SMALL; i++) {
        if (base[OFF_PUT + i] != value(left, i, 1)) {
            mt_fail("fence: MPI_Put (small) from rank %d: long %d is %ld, "
                    "expected %ld",
                    left, i, base[OFF_PUT + i], value(left, i, 1));
        }
    }
    for (i = 0; i < LARGE; i++) {
        if (base[OFF_BIG + i] != value(left, i, 1)) {
            mt_fail("fence: MPI_Put (%d longs) from rank %d: long %d is %ld, "
                    "expected %ld",
                    LARGE, left, i, base[OFF_BIG + i], value(left, i, 1));
        }
    }
    for (i = 0; i < SMALL; i++) {
        if (getbuf[i] != value(right, i, 3)) {
            mt_fail("fence: MPI_Get from rank %d: long %d is %ld, expected "
                    "%ld",
                    right, i, getbuf[i], value(right, i, 3));
        }
    }
    total = (long)n * (n + 1) / 2;
    if (mt_rank == 0 && base[OFF_CNT] != total) {
        mt_fail("fence: MPI_Fetch_and_op(MPI_SUM) counter is %ld, expected "
                "%ld",
                base[OFF_CNT], total);
    }
    {
        /* The fetched values must be the running sums of one order. */
        struct fetched mine = {before, add};
        struct fetched *all = NULL;
        long run = 0;

        if (mt_rank == 0) {
            all = malloc((size_t)n * sizeof(*all));
            if (all == NULL) {
                mt_fail("malloc");
            }
        }
        MT_CHECK(MPI_Gather(&mine, 2, MPI_LONG, all, 2, MPI_LONG, 0,
                            MPI_COMM_WORLD));
        if (mt_rank == 0) {
            qsort(all, (size_t)n, sizeof(*all), by_before);
            for (i = 0; i < n; i++) {
                if (all[i].before != run) {
                    mt_fail("fence: MPI_Fetch_and_op fetched %ld where the "
                            "running sum was %ld",
                            all[i].before, run);
                }
                run += all[i].added;
            }
            free(all);
        }
    }

    swap = mt_rank;
    MT_CHECK(MPI_Compare_and_swap(&swap, &compare, &cas_result, MPI_LONG, 0,
                                  OFF_CAS, win));
    MT_CHECK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    {
        long winner = -1;
        long *res = NULL;

        if (mt_rank == 0) {
            winner = base[OFF_CAS];
            if (winner < 0 || winner >= n) {
                mt_fail("fence: MPI_Compare_and_swap left %ld, no rank won",
                        winner);
            }
            res = malloc((size_t)n * sizeof(*res));
            if (res == NULL) {
                mt_fail("malloc");
            }
        }
        MT_CHECK(MPI_Gather(&cas_result, 1, MPI_LONG, res, 1, MPI_LONG, 0,
                            MPI_COMM_WORLD));
        if (mt_rank == 0) {
            for (i = 0; i < n; i++) {
                long want = (i == winner) ? -1 : winner;

                if (res[i] != want) {
                    mt_fail("fence: MPI_Compare_and_swap of rank %d fetched "
                            "%ld, expected %ld (winner %ld)",
                            i, res[i], want, winner);
                }
            }
            free(res);
        }
    }

    /* ---- passive target ---- */
    MT_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    for (i = 0; i < SMALL; i++) {
        src[i] = value(mt_rank, i, 2);
        getbuf[i] = -7;
    }
    MT_CHECK(MPI_Put(src, SMALL, MPI_LONG, right, OFF_LOCK, SMALL, MPI_LONG,
                     win));
    MT_CHECK(MPI_Win_flush(right, win));
    MT_CHECK(MPI_Get(getbuf, SMALL, MPI_LONG, right, OFF_LOCK, SMALL,
                     MPI_LONG, win));
    MT_CHECK(MPI_Win_flush(right, win));
    for (i = 0; i < SMALL; i++) {
        if (getbuf[i] != value(mt_rank, i, 2)) {
            mt_fail("lock: MPI_Get after MPI_Put and MPI_Win_flush on rank "
                    "%d: long %d is %ld, expected %ld",
                    right, i, getbuf[i], value(mt_rank, i, 2));
        }
    }
    MT_CHECK(MPI_Win_unlock(right, win));

    MT_CHECK(MPI_Win_lock_all(0, win));
    for (i = 0; i < n; i++) {
        long one = 1, got = -1;

        MT_CHECK(MPI_Fetch_and_op(&one, &got, MPI_LONG, i, OFF_CNT2, MPI_SUM,
                                  win));
        MT_CHECK(MPI_Win_flush(i, win));
        if (got < 0 || got >= n) {
            mt_fail("lock_all: MPI_Fetch_and_op on rank %d fetched %ld, "
                    "expected 0..%d",
                    i, got, n - 1);
        }
    }
    MT_CHECK(MPI_Win_flush_all(win));
    MT_CHECK(MPI_Win_unlock_all(win));
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));

    /* Read the own counter through the window, under a lock. */
    {
        long got = -1, zero = 0;

        MT_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, mt_rank, 0, win));
        MT_CHECK(MPI_Fetch_and_op(&zero, &got, MPI_LONG, mt_rank, OFF_CNT2,
                                  MPI_NO_OP, win));
        MT_CHECK(MPI_Win_unlock(mt_rank, win));
        if (got != n) {
            mt_fail("lock_all: counter on rank %d is %ld after %d "
                    "MPI_Fetch_and_op(MPI_SUM, 1)",
                    mt_rank, got, n);
        }
    }
    /* The left neighbour's passive MPI_Put must be in local memory too. */
    MT_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, mt_rank, 0, win));
    for (i = 0; i < SMALL; i++) {
        if (base[OFF_LOCK + i] != value(left, i, 2)) {
            mt_fail("lock: passive MPI_Put from rank %d: long %d is %ld, "
                    "expected %ld",
                    left, i, base[OFF_LOCK + i], value(left, i, 2));
        }
    }
    MT_CHECK(MPI_Win_unlock(mt_rank, win));

    MT_CHECK(MPI_Win_free(&win));
    free(base);
    free(src);
    free(getbuf);
    return mt_finish();
}
