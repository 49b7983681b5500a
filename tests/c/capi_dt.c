/* Generic datatypes (ucp_dt_create_generic) in rucx's libucp.so, in one
 * process: a "strided vector" datatype (every other 8-byte element of an
 * array) sent and received against contiguous, iovec and itself, at 0 B,
 * 24 B, 64 KiB and 4 MiB, receive posted before and after the send; a
 * probed message received into it; a canceled receive. finish runs exactly
 * once per operation. Prints "capi_dt: ok" and exits 0 when every check
 * holds. */
#include <ucp/api/ucp.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)
#define GAP 0xaaaaaaaaaaaaaaaaull /* the skipped elements, never touched */
#define DT_CONTEXT ((void *)0x77)

/* ---- the strided datatype ---- */

struct state {
    uint64_t *base;  /* element i is base[2 * i] */
    size_t    count;
    int       finished;
};

static int n_start, n_finish;

static void *start(void *context, const void *buffer, size_t count)
{
    struct state *s = malloc(sizeof(*s));
    CHECK(context == DT_CONTEXT);
    s->base     = (uint64_t *)buffer;
    s->count    = count;
    s->finished = 0;
    n_start++;
    return s;
}

static void *start_pack(void *context, const void *buffer, size_t count)
{
    return start(context, buffer, count);
}

static void *start_unpack(void *context, void *buffer, size_t count)
{
    return start(context, buffer, count);
}

static size_t packed_size(void *state)
{
    return ((struct state *)state)->count * 8;
}

/* Byte `off` of the packed stream lives in element off / 8. */
static uint8_t *byte_at(struct state *s, size_t off)
{
    return (uint8_t *)&s->base[2 * (off / 8)] + off % 8;
}

static size_t pack(void *state, size_t offset, void *dest, size_t max_length)
{
    struct state *s = state;
    size_t total = s->count * 8, n = 0;
    CHECK(!s->finished && offset <= total);
    while (n < max_length && offset + n < total) {
        ((uint8_t *)dest)[n] = *byte_at(s, offset + n);
        n++;
    }
    return n;
}

static ucs_status_t unpack(void *state, size_t offset, const void *src,
                           size_t length)
{
    struct state *s = state;
    CHECK(!s->finished && offset + length <= s->count * 8);
    for (size_t i = 0; i < length; i++) {
        *byte_at(s, offset + i) = ((const uint8_t *)src)[i];
    }
    return UCS_OK;
}

static void finish(void *state)
{
    struct state *s = state;
    CHECK(!s->finished);
    s->finished = 1;
    n_finish++;
    free(s);
}

/* ---- requests ---- */

struct done {
    int          completed;
    ucs_status_t status;
    size_t       length;
};

static void send_cb(void *r, ucs_status_t st, void *ud)
{
    struct done *d = ud;
    (void)r;
    d->completed = 1;
    d->status    = st;
}

static void recv_cb(void *r, ucs_status_t st, const ucp_tag_recv_info_t *info,
                    void *ud)
{
    struct done *d = ud;
    (void)r;
    d->completed = 1;
    d->status    = st;
    d->length    = info->length;
}

static ucp_worker_h wa, wb;

static void wait_done(void *r, struct done *d)
{
    time_t t0 = time(NULL);
    CHECK(UCS_PTR_IS_PTR(r) && r != NULL); /* NO_IMM_CMPL: always a request */
    while (!d->completed) {
        CHECK(time(NULL) - t0 < 60);
        ucp_worker_progress(wa);
        ucp_worker_progress(wb);
    }
    ucp_request_free(r);
}

/* ---- one message ---- */

enum kind { CONTIG, IOV, GENERIC };
static const char *kind_name[] = {"contig", "iov", "generic"};
static ucp_datatype_t strided;

static uint64_t value(size_t i, unsigned seed)
{
    return (i + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 40);
}

/* The memory of one side holding n elements: the buffer, count and
 * datatype to pass, and where element i is. */
struct side {
    enum kind      kind;
    uint64_t      *mem;
    ucp_dt_iov_t   iov[3];
    void          *buffer;
    size_t         count;
    ucp_datatype_t dt;
};

static void side_init(struct side *s, enum kind k, size_t n)
{
    size_t len = n * 8;
    s->kind = k;
    s->mem  = malloc((k == GENERIC ? 2 * n : n) * 8 + 8);
    switch (k) {
    case CONTIG:
        s->buffer = s->mem;
        s->count  = len;
        s->dt     = ucp_dt_make_contig(1);
        break;
    case IOV: /* three pieces of unequal length, split inside elements */
        s->iov[0] = (ucp_dt_iov_t){s->mem, len / 3};
        s->iov[1] = (ucp_dt_iov_t){(uint8_t *)s->mem + len / 3, len / 2 - len / 3};
        s->iov[2] = (ucp_dt_iov_t){(uint8_t *)s->mem + len / 2, len - len / 2};
        s->buffer = s->iov;
        s->count  = 3;
        s->dt     = ucp_dt_make_iov();
        break;
    case GENERIC:
        for (size_t i = 0; i < 2 * n; i++) {
            s->mem[i] = GAP;
        }
        s->buffer = s->mem;
        s->count  = n;
        s->dt     = strided;
        break;
    }
}

static uint64_t *elem(struct side *s, size_t i)
{
    return s->kind == GENERIC ? &s->mem[2 * i] : &s->mem[i];
}

static void one_message(ucp_ep_h ep, enum kind sk, enum kind rk, size_t n,
                        ucp_tag_t tag, int recv_first)
{
    struct side snd, rcv;
    struct done sd = {0}, rd = {0};
    ucp_request_param_t sp = {0}, rp = {0};
    void *s = NULL, *r = NULL;
    int generic_ops = (sk == GENERIC) + (rk == GENERIC);
    int started = n_start, finished = n_finish;

    side_init(&snd, sk, n);
    side_init(&rcv, rk, n);
    for (size_t i = 0; i < n; i++) {
        *elem(&snd, i) = value(i, (unsigned)tag);
        if (rk != GENERIC) {
            *elem(&rcv, i) = 0;
        }
    }
    sp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    sp.cb.send      = send_cb;
    sp.user_data    = &sd;
    sp.datatype     = snd.dt;
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    rp.cb.recv      = recv_cb;
    rp.user_data    = &rd;
    rp.datatype     = rcv.dt;
    if (recv_first) {
        r = ucp_tag_recv_nbx(wb, rcv.buffer, rcv.count, tag, UINT64_MAX, &rp);
    }
    s = ucp_tag_send_nbx(ep, snd.buffer, snd.count, tag, &sp);
    if (!recv_first) {
        r = ucp_tag_recv_nbx(wb, rcv.buffer, rcv.count, tag, UINT64_MAX, &rp);
    }
    wait_done(s, &sd);
    wait_done(r, &rd);
    if (sd.status != UCS_OK || rd.status != UCS_OK || rd.length != n * 8) {
        fprintf(stderr, "%s -> %s, %zu B: send %d, recv %d, length %zu\n",
                kind_name[sk], kind_name[rk], n * 8, sd.status, rd.status,
                rd.length);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        CHECK(*elem(&rcv, i) == value(i, (unsigned)tag));
        if (rk == GENERIC) {
            CHECK(rcv.mem[2 * i + 1] == GAP);
        }
    }
    /* One start and one finish per generic side. */
    CHECK(n_start - started == generic_ops);
    CHECK(n_finish - finished == generic_ops);
    free(snd.mem);
    free(rcv.mem);
}

int main(void)
{
    ucp_context_h ctx;
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_address_t *addr_b;
    size_t addr_b_len;
    ucp_ep_params_t ep_params = {0};
    ucp_ep_h ep;
    ucp_generic_dt_ops_t ops = {start_pack, start_unpack, packed_size, pack,
                                unpack, finish};

    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG;
    CHECK(ucp_init(&params, NULL, &ctx) == UCS_OK);
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &wa) == UCS_OK);
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_OK);
    CHECK(ucp_worker_get_address(wb, &addr_b, &addr_b_len) == UCS_OK);
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address    = addr_b;
    CHECK(ucp_ep_create(wa, &ep_params, &ep) == UCS_OK);

    /* Creation: the class bits are UCX's, wrong arguments refused. */
    CHECK(ucp_dt_create_generic(NULL, DT_CONTEXT, &strided) == UCS_ERR_INVALID_PARAM);
    {
        ucp_generic_dt_ops_t partial = ops;
        partial.finish = NULL;
        CHECK(ucp_dt_create_generic(&partial, DT_CONTEXT, &strided) ==
              UCS_ERR_INVALID_PARAM);
    }
    CHECK(ucp_dt_create_generic(&ops, DT_CONTEXT, &strided) == UCS_OK);
    CHECK((strided & UCP_DATATYPE_CLASS_MASK) == UCP_DATATYPE_GENERIC);
    CHECK(strided != UCP_DATATYPE_GENERIC);
    {
        /* Strided datatypes are not implemented. */
        ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
                                 .datatype = UCP_DATATYPE_STRIDED};
        void *x = ucp_tag_send_nbx(ep, "x", 1, 1, &p);
        CHECK(UCS_PTR_IS_ERR(x) && UCS_PTR_STATUS(x) == UCS_ERR_UNSUPPORTED);
    }

    /* Every pairing with a generic side, four sizes (eager and
     * rendezvous), receive posted before and after the send. */
    size_t elems[] = {0, 3, 65536 / 8, (4 << 20) / 8};
    enum kind pairs[][2] = {{GENERIC, CONTIG}, {GENERIC, IOV}, {CONTIG, GENERIC},
                            {IOV, GENERIC}, {GENERIC, GENERIC}};
    ucp_tag_t tag = 0x1000;
    for (int p = 0; p < 5; p++) {
        for (int i = 0; i < 4; i++) {
            for (int first = 0; first < 2; first++) {
                one_message(ep, pairs[p][0], pairs[p][1], elems[i], tag++, first);
            }
        }
        printf("%s -> %s: ok\n", kind_name[pairs[p][0]], kind_name[pairs[p][1]]);
    }

    /* A probed message received into the generic datatype. */
    {
        size_t n = 100;
        uint64_t out[100], in[200];
        struct done sd = {0}, rd = {0};
        ucp_tag_recv_info_t info;
        ucp_tag_message_h msg = NULL;
        ucp_request_param_t sp = {0}, rp = {0};
        time_t t0 = time(NULL);
        for (size_t i = 0; i < n; i++) {
            out[i] = value(i, 9);
        }
        for (size_t i = 0; i < 2 * n; i++) {
            in[i] = GAP;
        }
        sp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                          UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        sp.cb.send   = send_cb;
        sp.user_data = &sd;
        void *s = ucp_tag_send_nbx(ep, out, sizeof(out), 0x99, &sp);
        while (msg == NULL) {
            CHECK(time(NULL) - t0 < 60);
            ucp_worker_progress(wa);
            ucp_worker_progress(wb);
            msg = ucp_tag_probe_nb(wb, 0x99, UINT64_MAX, 1, &info);
        }
        CHECK(info.length == sizeof(out));
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                          UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        rp.cb.recv   = recv_cb;
        rp.user_data = &rd;
        rp.datatype  = strided;
        int finished = n_finish;
        void *r = ucp_tag_msg_recv_nbx(wb, in, n, msg, &rp);
        wait_done(r, &rd);
        wait_done(s, &sd);
        CHECK(rd.status == UCS_OK && rd.length == sizeof(out));
        for (size_t i = 0; i < n; i++) {
            CHECK(in[2 * i] == out[i] && in[2 * i + 1] == GAP);
        }
        CHECK(n_finish - finished == 1);
        printf("probe: ok\n");
    }

    /* A receive canceled before it matched: finish still runs, once. */
    {
        uint64_t never[8];
        struct done rd = {0};
        ucp_request_param_t rp = {0};
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                          UCP_OP_ATTR_FIELD_DATATYPE;
        rp.cb.recv   = recv_cb;
        rp.user_data = &rd;
        rp.datatype  = strided;
        int started = n_start, finished = n_finish;
        void *r = ucp_tag_recv_nbx(wb, never, 4, 0xdead, UINT64_MAX, &rp);
        CHECK(UCS_PTR_IS_PTR(r) && r != NULL);
        CHECK(n_start - started == 1 && n_finish == finished);
        ucp_request_cancel(wb, r);
        for (int i = 0; i < 100 && !rd.completed; i++) {
            ucp_worker_progress(wb);
        }
        CHECK(rd.completed && rd.status == UCS_ERR_CANCELED);
        ucp_request_free(r);
        for (int i = 0; i < 100; i++) {
            ucp_worker_progress(wb);
        }
        CHECK(n_finish - finished == 1);
        printf("cancel: ok\n");
    }

    CHECK(n_start == n_finish);
    ucp_dt_destroy(strided);
    ucp_dt_destroy(ucp_dt_make_contig(8)); /* nothing to release */
    {
        void *c = ucp_ep_close_nb(ep, UCP_EP_CLOSE_MODE_FORCE);
        time_t t0 = time(NULL);
        while (UCS_PTR_IS_PTR(c) && c != NULL &&
               ucp_request_check_status(c) == UCS_INPROGRESS) {
            CHECK(time(NULL) - t0 < 60);
            ucp_worker_progress(wa);
            ucp_worker_progress(wb);
        }
        if (UCS_PTR_IS_PTR(c) && c != NULL) {
            ucp_request_free(c);
        }
    }
    ucp_worker_release_address(wb, addr_b);
    ucp_worker_destroy(wa);
    ucp_worker_destroy(wb);
    ucp_cleanup(ctx);
    printf("capi_dt: ok\n");
    return 0;
}
