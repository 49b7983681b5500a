/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Shared helpers of the MPI test programs in tests/mpi: every MPI call is
 * checked (errors return instead of aborting inside the library), and any
 * failure prints "rank R: FAILED: <what>" on stderr and aborts the job with
 * exit code 1, so that the runner sees a non-zero exit and the message
 * names the check that failed.
 */
#ifndef RUCX_MPITEST_H
#define RUCX_MPITEST_H

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mt_rank = -1;
static int mt_size = 0;
static const char *mt_prog = "mpitest";

static inline void mt_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: rank %d: FAILED: ", mt_prog, mt_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Runs an MPI call and fails with its name and MPI's error string. */
#define MT_CHECK(call)                                                       \
    do {                                                                     \
        int mt_rc_ = (call);                                                 \
        if (mt_rc_ != MPI_SUCCESS) {                                         \
            char mt_msg_[MPI_MAX_ERROR_STRING];                              \
            int mt_len_ = 0;                                                 \
            MPI_Error_string(mt_rc_, mt_msg_, &mt_len_);                     \
            mt_fail("%s (line %d) returned %d: %s", #call, __LINE__, mt_rc_, \
                    mt_msg_);                                                \
        }                                                                    \
    } while (0)

static inline void mt_init(int *argc, char ***argv, const char *prog)
{
    mt_prog = prog;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "%s: FAILED: MPI_Init\n", prog);
        exit(1);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MT_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank));
    MT_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &mt_size));
}

static inline int mt_finish(void)
{
    MT_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (mt_rank == 0) {
        printf("%s: ok (%d ranks)\n", mt_prog, mt_size);
        fflush(stdout);
    }
    MT_CHECK(MPI_Finalize());
    return 0;
}

/* The byte expected at offset i of a message identified by (a, b, c). */
static inline unsigned char mt_byte(size_t i, unsigned a, unsigned b,
                                    unsigned c)
{
    uint32_t x = (uint32_t)i * 2654435761u;
    x ^= a * 40503u + b * 9973u + c * 131u;
    return (unsigned char)(x ^ (x >> 13) ^ (x >> 24));
}

static inline void mt_fill(unsigned char *buf, size_t len, unsigned a, unsigned b,
                    unsigned c)
{
    size_t i;

    for (i = 0; i < len; i++) {
        buf[i] = mt_byte(i, a, b, c);
    }
}

/* Returns the first offset that differs from the pattern, or len. */
static inline size_t mt_mismatch(const unsigned char *buf, size_t len, unsigned a,
                          unsigned b, unsigned c)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if (buf[i] != mt_byte(i, a, b, c)) {
            return i;
        }
    }
    return len;
}

#endif
