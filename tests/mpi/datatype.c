/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Derived datatypes over the wire, around a ring (rank r sends to r+1 and
 * receives from r-1, with MPI_Sendrecv; a single rank talks to itself):
 *
 *   - a vector of doubles (blocks of 3, stride 5), received once with the
 *     same vector type (the gaps of the receive buffer must stay
 *     untouched) and once as contiguous doubles;
 *   - a struct {int; double[3]; char; short} described with
 *     MPI_Type_create_struct and resized to its C size, received into an
 *     array larger than needed (MPI_Get_count and MPI_Get_elements are
 *     checked), and once as the packed bytes of MPI_Pack.
 *
 * Each is sent at a small count (eager) and a large one (rendezvous).
 *
 * Usage: datatype
 */
#include "mpitest.h"

#include <stddef.h>

#define BLOCK 3
#define STRIDE 5
#define SENTINEL (-12345.0)

struct rec {
    int id;
    double v[3];
    char c;
    short s;
};

static double vec_value(int src, int i)
{
    return src * 1000003.0 + i * 0.5 + 1.0;
}

static void fill_rec(struct rec *r, int src, int i)
{
    memset(r, 0, sizeof(*r));
    r->id = src * 1000000 + i;
    r->v[0] = src + i * 0.25;
    r->v[1] = -(double)i;
    r->v[2] = i * 3.0 + 0.125;
    r->c = (char)('a' + (src + i) % 26);
    r->s = (short)(i % 30000 - 15000);
}

static int rec_ok(const struct rec *r, int src, int i)
{
    struct rec e;

    fill_rec(&e, src, i);
    return r->id == e.id && r->v[0] == e.v[0] && r->v[1] == e.v[1] &&
           r->v[2] == e.v[2] && r->c == e.c && r->s == e.s;
}

static void test_vector(int count, int dst, int src)
{
    MPI_Datatype vec;
    MPI_Status st;
    size_t span = (size_t)count * STRIDE;
    double *sbuf, *rbuf;
    int i, n;

    MT_CHECK(MPI_Type_vector(count, BLOCK, STRIDE, MPI_DOUBLE, &vec));
    MT_CHECK(MPI_Type_commit(&vec));

    sbuf = malloc(span * sizeof(double));
    rbuf = malloc(span * sizeof(double));
    if (sbuf == NULL || rbuf == NULL) {
        mt_fail("malloc for a vector of %d blocks", count);
    }
    for (i = 0; i < (int)span; i++) {
        /* The gaps carry values that must never arrive. */
        sbuf[i] = (i % STRIDE < BLOCK) ? vec_value(mt_rank, i) : -1.0;
    }

    /* Vector to vector: same layout at the receiver, gaps untouched. */
    for (i = 0; i < (int)span; i++) {
        rbuf[i] = SENTINEL;
    }
    MT_CHECK(MPI_Sendrecv(sbuf, 1, vec, dst, 21, rbuf, 1, vec, src, 21,
                          MPI_COMM_WORLD, &st));
    MT_CHECK(MPI_Get_count(&st, vec, &n));
    if (n != 1) {
        mt_fail("vector(%d) to vector: MPI_Get_count says %d, expected 1",
                count, n);
    }
    for (i = 0; i < (int)span; i++) {
        double want = (i % STRIDE < BLOCK) ? vec_value(src, i) : SENTINEL;

        if (rbuf[i] != want) {
            mt_fail("vector(%d) to vector: element %d is %g, expected %g%s",
                    count, i, rbuf[i], want,
                    want == SENTINEL ? " (a gap was written)" : "");
        }
    }

    /* Vector to contiguous doubles. */
    for (i = 0; i < (int)span; i++) {
        rbuf[i] = SENTINEL;
    }
    MT_CHECK(MPI_Sendrecv(sbuf, 1, vec, dst, 22, rbuf, count * BLOCK,
                          MPI_DOUBLE, src, 22, MPI_COMM_WORLD, &st));
    MT_CHECK(MPI_Get_count(&st, MPI_DOUBLE, &n));
    if (n != count * BLOCK) {
        mt_fail("vector(%d) to contiguous: MPI_Get_count says %d, expected "
                "%d",
                count, n, count * BLOCK);
    }
    for (i = 0; i < count * BLOCK; i++) {
        int at = (i / BLOCK) * STRIDE + i % BLOCK;
        double want = vec_value(src, at);

        if (rbuf[i] != want) {
            mt_fail("vector(%d) to contiguous: double %d is %g, expected %g",
                    count, i, rbuf[i], want);
        }
    }
    if (rbuf[count * BLOCK] != SENTINEL) {
        mt_fail("vector(%d) to contiguous: wrote past the %d doubles", count,
                count * BLOCK);
    }

    free(sbuf);
    free(rbuf);
    MT_CHECK(MPI_Type_free(&vec));
}

static void test_struct(int count, int dst, int src)
{
    int blens[4] = {1, 3, 1, 1};
    MPI_Aint disps[4] = {offsetof(struct rec, id), offsetof(struct rec, v),
                         offsetof(struct rec, c), offsetof(struct rec, s)};
    MPI_Datatype types[4] = {MPI_INT, MPI_DOUBLE, MPI_CHAR, MPI_SHORT};
    MPI_Datatype tmp, rec_t;
    MPI_Status st;
    struct rec *sbuf, *rbuf;
    char *packed, *rpacked;
    int extra = 7;
    int i, n, psize = 0, pos = 0;

    MT_CHECK(MPI_Type_create_struct(4, blens, disps, types, &tmp));
    MT_CHECK(MPI_Type_create_resized(tmp, 0, sizeof(struct rec), &rec_t));
    MT_CHECK(MPI_Type_commit(&rec_t));
    MT_CHECK(MPI_Type_free(&tmp));

    sbuf = malloc((size_t)count * sizeof(*sbuf));
    rbuf = malloc((size_t)(count + extra) * sizeof(*rbuf));
    if (sbuf == NULL || rbuf == NULL) {
        mt_fail("malloc for %d structs", count);
    }
    for (i = 0; i < count; i++) {
        fill_rec(&sbuf[i], mt_rank, i);
    }

    /* Struct to struct, into room for more than was sent. */
    memset(rbuf, 0x5a, (size_t)(count + extra) * sizeof(*rbuf));
    MT_CHECK(MPI_Sendrecv(sbuf, count, rec_t, dst, 23, rbuf, count + extra,
                          rec_t, src, 23, MPI_COMM_WORLD, &st));
    MT_CHECK(MPI_Get_count(&st, rec_t, &n));
    if (n != count) {
        mt_fail("struct(%d): MPI_Get_count says %d", count, n);
    }
    MT_CHECK(MPI_Get_elements(&st, rec_t, &n));
    if (n != count * 6) {
        mt_fail("struct(%d): MPI_Get_elements says %d, expected %d", count, n,
                count * 6);
    }
    for (i = 0; i < count; i++) {
        if (!rec_ok(&rbuf[i], src, i)) {
            mt_fail("struct(%d): record %d differs (id %d, c %d, s %d)",
                    count, i, rbuf[i].id, rbuf[i].c, rbuf[i].s);
        }
    }
    {
        const unsigned char *tail = (const unsigned char *)&rbuf[count];

        for (i = 0; i < (int)(extra * sizeof(*rbuf)); i++) {
            if (tail[i] != 0x5a) {
                mt_fail("struct(%d): wrote past the %d records", count, count);
            }
        }
    }

    /* Struct to packed bytes: must equal what MPI_Pack makes of them. */
    MT_CHECK(MPI_Pack_size(count, rec_t, MPI_COMM_WORLD, &psize));
    packed = malloc((size_t)psize);
    rpacked = malloc((size_t)psize);
    if (packed == NULL || rpacked == NULL) {
        mt_fail("malloc of %d packed bytes", psize);
    }
    memset(rpacked, 0, (size_t)psize);
    MT_CHECK(MPI_Sendrecv(sbuf, count, rec_t, dst, 24, rpacked, psize,
                          MPI_PACKED, src, 24, MPI_COMM_WORLD, &st));
    MT_CHECK(MPI_Get_count(&st, MPI_PACKED, &n));
    /* Build the expected bytes from the sender's records. */
    for (i = 0; i < count; i++) {
        fill_rec(&rbuf[i], src, i);
    }
    MT_CHECK(MPI_Pack(rbuf, count, rec_t, packed, psize, &pos,
                      MPI_COMM_WORLD));
    if (n != pos) {
        mt_fail("struct(%d) to MPI_PACKED: received %d bytes, MPI_Pack "
                "makes %d",
                count, n, pos);
    }
    if (memcmp(packed, rpacked, (size_t)pos) != 0) {
        mt_fail("struct(%d) to MPI_PACKED: bytes differ from MPI_Pack's",
                count);
    }
    /* And unpacking them gives the records back. */
    memset(rbuf, 0, (size_t)count * sizeof(*rbuf));
    pos = 0;
    MT_CHECK(MPI_Unpack(rpacked, n, &pos, rbuf, count, rec_t,
                        MPI_COMM_WORLD));
    for (i = 0; i < count; i++) {
        if (!rec_ok(&rbuf[i], src, i)) {
            mt_fail("struct(%d) to MPI_PACKED: unpacked record %d differs",
                    count, i);
        }
    }

    free(packed);
    free(rpacked);
    free(sbuf);
    free(rbuf);
    MT_CHECK(MPI_Type_free(&rec_t));
}

int main(int argc, char **argv)
{
    int dst, src;

    mt_init(&argc, &argv, "datatype");
    dst = (mt_rank + 1) % mt_size;
    src = (mt_rank + mt_size - 1) % mt_size;

    test_vector(10, dst, src);
    test_vector(20000, dst, src); /* 480 KB of doubles */
    test_struct(5, dst, src);
    test_struct(20000, dst, src); /* about 800 KB of records */

    return mt_finish();
}
