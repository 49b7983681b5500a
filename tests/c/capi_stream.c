/* rucx's libucp.so through UCX 1.13's stream calls, in one process: two
 * workers with an endpoint each way; sends and receives posted before and
 * after the data, with and without UCP_STREAM_RECV_FLAG_WAITALL, partial
 * receives, iovec and generic datatypes, elements of 4 bytes,
 * ucp_stream_recv_data_nb with ucp_stream_data_release,
 * ucp_stream_worker_poll, the legacy _nb calls, ucp_stream_recv_request_test,
 * a canceled receive and wrong arguments. Every byte of the stream is
 * checked against its offset. Prints "capi_stream: ok" and exits 0 when
 * every check holds. */
#include <ucp/api/ucp.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)

/* The application's part of each request. */
struct app_req {
    int          completed;
    ucs_status_t status;
    size_t       length;
};

static ucp_worker_h wa, wb;
static ucp_ep_h ab, ba; /* wa's endpoint to wb, wb's to wa */
/* Stream offsets of the bytes a sent on ab and b received on ba. */
static size_t tx_off, rx_off;
static int n_send_cb, n_recv_cb;

static void req_init(void *r)
{
    memset(r, 0, sizeof(struct app_req));
}

/* The byte at stream offset o. */
static uint8_t pattern(size_t o)
{
    return (uint8_t)((o ^ (o >> 8) ^ (o >> 16)) * 31 + 7);
}

/* Fills n bytes as the next ones of the stream a sends. */
static void fill_next(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = pattern(tx_off + i);
    }
    tx_off += n;
}

/* Checks n received bytes as the next ones of the stream. */
static void check_next(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != pattern(rx_off + i)) {
            fprintf(stderr, "byte %zu of the stream: %u, not %u\n", rx_off + i,
                    p[i], pattern(rx_off + i));
            exit(1);
        }
    }
    rx_off += n;
}

static void progress_both(void)
{
    ucp_worker_progress(wa);
    ucp_worker_progress(wb);
}

static void send_cb(void *r, ucs_status_t st, void *ud)
{
    struct app_req *q = r;
    CHECK(ud == (void *)0x5e);
    q->completed = 1;
    q->status = st;
    n_send_cb++;
}

static void recv_cb(void *r, ucs_status_t st, size_t length, void *ud)
{
    struct app_req *q = r;
    CHECK(ud == (void *)0x7e);
    q->completed = 1;
    q->status = st;
    q->length = length;
    n_recv_cb++;
}

static void legacy_send_cb(void *r, ucs_status_t st)
{
    send_cb(r, st, (void *)0x5e);
}

static void legacy_recv_cb(void *r, ucs_status_t st, size_t length)
{
    recv_cb(r, st, length, (void *)0x7e);
}

/* Waits for request r (NULL: done at once); its status, its length in
 * *length if not NULL. */
static ucs_status_t wait_req(void *r, size_t *length)
{
    time_t start = time(NULL);
    if (r == NULL) {
        return UCS_OK;
    }
    CHECK(!UCS_PTR_IS_ERR(r));
    struct app_req *q = r;
    while (!q->completed) {
        CHECK(time(NULL) - start < 60);
        progress_both();
    }
    ucs_status_t st = ucp_request_check_status(r);
    CHECK(st == q->status);
    if (length != NULL) {
        *length = q->length;
        if (st == UCS_OK) {
            size_t l = 0;
            CHECK(ucp_stream_recv_request_test(r, &l) == UCS_OK);
            CHECK(l == q->length);
        }
    }
    q->completed = 0;
    ucp_request_free(r);
    return st;
}

static ucp_request_param_t send_param(void)
{
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = send_cb;
    p.user_data = (void *)0x5e;
    return p;
}

static ucp_request_param_t recv_param(int waitall)
{
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.recv_stream = recv_cb;
    p.user_data = (void *)0x7e;
    p.flags = waitall ? UCP_STREAM_RECV_FLAG_WAITALL : 0;
    return p;
}

/* Sends the next n bytes of the stream on ab, contiguous; waits. */
static void send_next(size_t n)
{
    uint8_t *buf = malloc(n + 1);
    fill_next(buf, n);
    ucp_request_param_t p = send_param();
    CHECK(wait_req(ucp_stream_send_nbx(ab, buf, n, &p), NULL) == UCS_OK);
    free(buf);
}

/* Progresses until wb's poll reports ba; checks the entry. */
static void poll_until_ready(void)
{
    ucp_stream_poll_ep_t eps[4];
    time_t start = time(NULL);
    ssize_t n;
    memset(eps, 0xff, sizeof(eps));
    while ((n = ucp_stream_worker_poll(wb, eps, 4, 0)) == 0) {
        CHECK(time(NULL) - start < 60);
        progress_both();
    }
    if (n != 1) {
        fprintf(stderr, "poll: %zd: %p %p %p\n", n, (void *)eps[0].ep,
                (void *)eps[1].ep, (void *)ba);
    }
    CHECK(n == 1);
    CHECK(eps[0].ep == ba);
    CHECK(eps[0].user_data == (void *)0xb1);
}

/* Receives exactly n bytes on ba in pieces of at most piece bytes, without
 * WAITALL (each receive completes with what has arrived); checks them. */
static void recv_pieces(size_t n, size_t piece)
{
    uint8_t *buf = malloc(piece);
    size_t got = 0;
    while (got < n) {
        size_t want = n - got < piece ? n - got : piece, len = 0;
        ucp_request_param_t p = recv_param(0);
        void *r = ucp_stream_recv_nbx(ba, buf, want, &len, &p);
        if (r != NULL) {
            CHECK(wait_req(r, &len) == UCS_OK);
        }
        CHECK(len > 0 && len <= want);
        check_next(buf, len);
        got += len;
    }
    free(buf);
}

/* A generic datatype of plain bytes: pack and unpack copy. */
struct gen_state {
    uint8_t *buf;
    size_t   len;
};

static void *gen_start_pack(void *ctx, const void *buf, size_t count)
{
    struct gen_state *s = malloc(sizeof(*s));
    CHECK(ctx == (void *)0x6e);
    s->buf = (uint8_t *)buf;
    s->len = count;
    return s;
}

static void *gen_start_unpack(void *ctx, void *buf, size_t count)
{
    return gen_start_pack(ctx, buf, count);
}

static size_t gen_packed_size(void *state)
{
    return ((struct gen_state *)state)->len;
}

static size_t gen_pack(void *state, size_t offset, void *dest, size_t max)
{
    struct gen_state *s = state;
    size_t n = s->len - offset < max ? s->len - offset : max;
    memcpy(dest, s->buf + offset, n);
    return n;
}

static ucs_status_t gen_unpack(void *state, size_t offset, const void *src,
                               size_t length)
{
    struct gen_state *s = state;
    CHECK(offset + length <= s->len);
    memcpy(s->buf + offset, src, length);
    return UCS_OK;
}

static int n_finish;

static void gen_finish(void *state)
{
    n_finish++;
    free(state);
}

static void bad_arguments(void)
{
    uint8_t buf[8];
    size_t len;
    ucp_request_param_t p = {0};
    void *r;
    ucp_stream_poll_ep_t eps[1];

    r = ucp_stream_send_nbx(NULL, buf, 1, &p);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    r = ucp_stream_recv_nbx(NULL, buf, 1, &len, &p);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    r = ucp_stream_recv_nbx(ba, buf, 1, NULL, &p);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    r = ucp_stream_send_nb(NULL, buf, 1, ucp_dt_make_contig(1), NULL, 0);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    r = ucp_stream_recv_nb(NULL, buf, 1, ucp_dt_make_contig(1), NULL, &len, 0);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    r = ucp_stream_recv_data_nb(NULL, &len);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    r = ucp_stream_recv_data_nb(ba, NULL);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_stream_worker_poll(NULL, eps, 1, 0) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_stream_worker_poll(wb, NULL, 1, 0) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_stream_recv_request_test(NULL, &len) == UCS_ERR_INVALID_PARAM);
    /* A buffer of NULL with bytes to send, an iovec entry of NULL. */
    r = ucp_stream_send_nbx(ab, NULL, 4, &p);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    {
        ucp_dt_iov_t iov[2] = {{buf, 4}, {NULL, 4}};
        ucp_request_param_t pi = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
                                  .datatype = ucp_dt_make_iov()};
        r = ucp_stream_send_nbx(ab, iov, 2, &pi);
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    }
    /* Nothing has arrived: no data, no endpoint ready, a receive of zero
     * bytes is done at once. */
    CHECK(ucp_stream_recv_data_nb(ba, &len) == NULL);
    CHECK(ucp_stream_worker_poll(wb, eps, 1, 0) == 0);
    len = 99;
    CHECK(ucp_stream_recv_nbx(ba, buf, 0, &len, &p) == NULL);
    CHECK(len == 0);
    printf("bad arguments: ok\n");
}

int main(void)
{
    ucp_context_h ctx;
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_address_t *addr_a, *addr_b;
    size_t addr_len;
    ucp_ep_params_t ep_params = {0};

    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                        UCP_PARAM_FIELD_REQUEST_INIT;
    params.features     = UCP_FEATURE_STREAM;
    params.request_size = sizeof(struct app_req);
    params.request_init = req_init;
    CHECK(ucp_init(&params, NULL, &ctx) == UCS_OK);
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &wa) == UCS_OK);
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_OK);
    CHECK(ucp_worker_get_address(wa, &addr_a, &addr_len) == UCS_OK);
    CHECK(ucp_worker_get_address(wb, &addr_b, &addr_len) == UCS_OK);
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_USER_DATA;
    ep_params.address   = addr_b;
    ep_params.user_data = (void *)0xa1;
    CHECK(ucp_ep_create(wa, &ep_params, &ab) == UCS_OK);
    ep_params.address   = addr_a;
    ep_params.user_data = (void *)0xb1;
    CHECK(ucp_ep_create(wb, &ep_params, &ba) == UCS_OK);

    bad_arguments();

    /* Data first, then a larger receive: done at once with what came. */
    {
        uint8_t buf[64];
        size_t len = 0;
        send_next(5);
        poll_until_ready();
        ucp_request_param_t p = recv_param(0);
        CHECK(ucp_stream_recv_nbx(ba, buf, sizeof(buf), &len, &p) == NULL);
        CHECK(len == 5);
        check_next(buf, len);
        CHECK(n_recv_cb == 0); /* no callback for what completes at once */
        ucp_stream_poll_ep_t eps[2];
        CHECK(ucp_stream_worker_poll(wb, eps, 2, 0) == 0);
        printf("data first: ok\n");
    }

    /* A receive posted first, without and with WAITALL. */
    {
        uint8_t buf[1000];
        size_t len = 12345;
        ucp_request_param_t p = recv_param(0);
        void *r = ucp_stream_recv_nbx(ba, buf, 100, &len, &p);
        CHECK(r != NULL && !UCS_PTR_IS_ERR(r));
        CHECK(len == 12345); /* not set for a request */
        CHECK(ucp_stream_recv_request_test(r, &len) == UCS_INPROGRESS);
        send_next(40);
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(len == 40);
        check_next(buf, 40);

        p = recv_param(1);
        r = ucp_stream_recv_nbx(ba, buf, 1000, &len, &p);
        CHECK(r != NULL && !UCS_PTR_IS_ERR(r));
        send_next(300);
        for (int i = 0; i < 1000; i++) {
            progress_both();
        }
        CHECK(ucp_stream_recv_request_test(r, &len) == UCS_INPROGRESS);
        send_next(699);
        for (int i = 0; i < 100; i++) {
            progress_both();
        }
        CHECK(ucp_stream_recv_request_test(r, &len) == UCS_INPROGRESS);
        send_next(1);
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(len == 1000);
        check_next(buf, 1000);

        /* WAITALL with bytes there already: done at once if all 700 are
         * (NULL, *length set), else a request. */
        send_next(700);
        poll_until_ready();
        p = recv_param(1);
        len = 0;
        r = ucp_stream_recv_nbx(ba, buf, 700, &len, &p);
        if (r == NULL) {
            CHECK(len == 700);
        }
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(len == 700);
        check_next(buf, 700);
        printf("posted first, waitall: ok\n");
    }

    /* Large sends received in pieces, and in one WAITALL receive. */
    {
        size_t big = 4 << 20;
        uint8_t *out = malloc(big), *in = malloc(big);
        size_t len = 0;
        fill_next(out, big);
        ucp_request_param_t ps = send_param();
        void *s = ucp_stream_send_nbx(ab, out, big, &ps);
        recv_pieces(big, 100000);
        CHECK(wait_req(s, NULL) == UCS_OK);

        send_next(10000);
        recv_pieces(10000, 777);

        fill_next(out, big);
        s = ucp_stream_send_nbx(ab, out, big, &ps);
        ucp_request_param_t pr = recv_param(1);
        void *r = ucp_stream_recv_nbx(ba, in, big, &len, &pr);
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(wait_req(s, NULL) == UCS_OK);
        CHECK(len == big);
        check_next(in, big);
        free(out);
        free(in);
        printf("large and partial: ok\n");
    }

    /* Iovec on both sides, split differently. */
    {
        uint8_t a1[5], a3[1000], a4[3000], b1[2000], b2[2005];
        ucp_dt_iov_t siov[4] = {{a1, 5}, {NULL, 0}, {a3, 1000}, {a4, 3000}};
        ucp_dt_iov_t riov[2] = {{b1, 2000}, {b2, 2005}};
        size_t len = 0;
        fill_next(a1, 5);
        fill_next(a3, 1000);
        fill_next(a4, 3000);
        ucp_request_param_t ps = send_param();
        ps.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        ps.datatype = ucp_dt_make_iov();
        void *s = ucp_stream_send_nbx(ab, siov, 4, &ps);
        ucp_request_param_t pr = recv_param(1);
        pr.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        pr.datatype = ucp_dt_make_iov();
        void *r = ucp_stream_recv_nbx(ba, riov, 2, &len, &pr);
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(wait_req(s, NULL) == UCS_OK);
        CHECK(len == 4005);
        check_next(b1, 2000);
        check_next(b2, 2005);

        /* Without WAITALL into an iovec: what has arrived. */
        send_next(3);
        uint8_t c1[2], c2[10];
        ucp_dt_iov_t riov2[2] = {{c1, 2}, {c2, 10}};
        pr = recv_param(0);
        pr.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        pr.datatype = ucp_dt_make_iov();
        r = ucp_stream_recv_nbx(ba, riov2, 2, &len, &pr);
        if (r != NULL) {
            CHECK(wait_req(r, &len) == UCS_OK);
        }
        CHECK(len == 3);
        check_next(c1, 2);
        check_next(c2, 1);
        printf("iov: ok\n");
    }

    /* A generic datatype both ways, and contiguous elements of 4 bytes. */
    {
        ucp_generic_dt_ops_t ops = {gen_start_pack, gen_start_unpack,
                                    gen_packed_size, gen_pack, gen_unpack,
                                    gen_finish};
        ucp_datatype_t gen;
        uint8_t out[70000], in[70000];
        size_t len = 0;
        CHECK(ucp_dt_create_generic(&ops, (void *)0x6e, &gen) == UCS_OK);
        fill_next(out, sizeof(out));
        ucp_request_param_t ps = send_param();
        ps.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        ps.datatype = gen;
        void *s = ucp_stream_send_nbx(ab, out, sizeof(out), &ps);
        ucp_request_param_t pr = recv_param(1);
        pr.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        pr.datatype = gen;
        void *r = ucp_stream_recv_nbx(ba, in, sizeof(in), &len, &pr);
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(wait_req(s, NULL) == UCS_OK);
        CHECK(len == sizeof(in));
        check_next(in, sizeof(in));
        CHECK(n_finish == 2);
        ucp_dt_destroy(gen);

        uint32_t w_out[8], w_in[8];
        fill_next((uint8_t *)w_out, sizeof(w_out));
        ps = send_param();
        ps.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        ps.datatype = ucp_dt_make_contig(4);
        s = ucp_stream_send_nbx(ab, w_out, 8, &ps);
        pr = recv_param(1);
        pr.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        pr.datatype = ucp_dt_make_contig(4);
        r = ucp_stream_recv_nbx(ba, w_in, 8, &len, &pr);
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(wait_req(s, NULL) == UCS_OK);
        CHECK(len == sizeof(w_in)); /* bytes, not elements */
        check_next((uint8_t *)w_in, sizeof(w_in));

        /* Without WAITALL a contiguous receive of 4-byte elements ends
         * with whole elements only: not after 6 bytes, at 8. */
        pr = recv_param(0);
        pr.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        pr.datatype = ucp_dt_make_contig(4);
        r = ucp_stream_recv_nbx(ba, w_in, 8, &len, &pr);
        CHECK(r != NULL && !UCS_PTR_IS_ERR(r));
        send_next(6);
        for (int i = 0; i < 1000; i++) {
            progress_both();
        }
        CHECK(ucp_stream_recv_request_test(r, &len) == UCS_INPROGRESS);
        send_next(2);
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(len == 8);
        check_next((uint8_t *)w_in, 8);
        printf("generic, contig(4): ok\n");
    }

    /* Data handed over without a copy, several held at once. */
    {
        size_t sizes[3] = {100, 5000, 65536}, total = 0, got = 0, held_n = 0;
        void *held[64];
        size_t held_off[64], held_len[64];
        for (int i = 0; i < 3; i++) {
            send_next(sizes[i]);
            total += sizes[i];
        }
        poll_until_ready();
        time_t start = time(NULL);
        while (got < total) {
            size_t len = 0;
            void *d = ucp_stream_recv_data_nb(ba, &len);
            CHECK(!UCS_PTR_IS_ERR(d));
            if (d == NULL) {
                CHECK(time(NULL) - start < 60);
                progress_both();
                continue;
            }
            CHECK(len > 0 && got + len <= total);
            CHECK(held_n < 64);
            held[held_n] = d;
            held_off[held_n] = rx_off;
            held_len[held_n++] = len;
            check_next(d, len);
            got += len;
        }
        /* Every piece is intact while all are held. */
        size_t end = rx_off;
        for (size_t i = 0; i < held_n; i++) {
            rx_off = held_off[i];
            check_next(held[i], held_len[i]);
            ucp_stream_data_release(ba, held[i]);
        }
        rx_off = end;
        size_t len;
        CHECK(ucp_stream_recv_data_nb(ba, &len) == NULL);
        printf("recv_data_nb: %zu pieces: ok\n", held_n);
    }

    /* The legacy calls: a posted receive's callback gets the length; one
     * done at once returns NULL with *length set and no callback. */
    {
        uint8_t out[300], in[300];
        size_t len = 0;
        int before = n_recv_cb;
        void *r = ucp_stream_recv_nb(ba, in, 300, ucp_dt_make_contig(1),
                                     legacy_recv_cb, &len,
                                     UCP_STREAM_RECV_FLAG_WAITALL);
        CHECK(r != NULL && !UCS_PTR_IS_ERR(r));
        fill_next(out, 300);
        void *s = ucp_stream_send_nb(ab, out, 300, ucp_dt_make_contig(1),
                                     legacy_send_cb, 0);
        CHECK(!UCS_PTR_IS_ERR(s));
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(n_recv_cb == before + 1);
        CHECK(len == 300);
        check_next(in, 300);
        CHECK(wait_req(s, NULL) == UCS_OK);

        fill_next(out, 50);
        s = ucp_stream_send_nb(ab, out, 50, ucp_dt_make_contig(1), legacy_send_cb, 0);
        CHECK(wait_req(s, NULL) == UCS_OK);
        poll_until_ready();
        before = n_recv_cb;
        len = 0;
        r = ucp_stream_recv_nb(ba, in, 300, ucp_dt_make_contig(1), legacy_recv_cb,
                               &len, 0);
        if (r != NULL) {
            CHECK(wait_req(r, &len) == UCS_OK);
        } else {
            CHECK(n_recv_cb == before);
        }
        CHECK(len == 50);
        check_next(in, 50);
        printf("legacy: ok\n");
    }

    /* UCP_OP_ATTR_FLAG_NO_IMM_CMPL: a request even with the bytes there,
     * its callback run before the call returns; and a request in the
     * application's memory (rucx's header in request_size bytes before). */
    {
        uint8_t in[20];
        size_t len = 0;
        send_next(20);
        poll_until_ready();
        ucp_request_param_t p = recv_param(1);
        p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        int before = n_recv_cb;
        void *r = ucp_stream_recv_nbx(ba, in, 10, &len, &p);
        CHECK(r != NULL && !UCS_PTR_IS_ERR(r));
        CHECK(n_recv_cb == before + 1);
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(len == 10);
        check_next(in, 10);

        ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE};
        CHECK(ucp_context_query(ctx, &attr) == UCS_OK);
        uint8_t *mem = aligned_alloc(16, attr.request_size + 64);
        void *req = mem + attr.request_size;
        memset(req, 0, sizeof(struct app_req));
        p = recv_param(1);
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_REQUEST;
        p.request = req;
        r = ucp_stream_recv_nbx(ba, in, 10, &len, &p);
        CHECK(!UCS_PTR_IS_ERR(r));
        if (r != NULL) {
            struct app_req *q = r;
            time_t start = time(NULL);
            CHECK(r == req);
            while (!q->completed) {
                CHECK(time(NULL) - start < 60);
                progress_both();
            }
            CHECK(q->status == UCS_OK);
            len = q->length;
        }
        CHECK(len == 10);
        check_next(in, 10);
        free(mem);
        printf("request memory, no immediate completion: ok\n");
    }

    /* A receive canceled before any byte came. */
    {
        uint8_t in[16];
        size_t len = 0;
        ucp_request_param_t p = recv_param(1);
        void *r = ucp_stream_recv_nbx(ba, in, 16, &len, &p);
        CHECK(r != NULL && !UCS_PTR_IS_ERR(r));
        ucp_request_cancel(wb, r);
        CHECK(wait_req(r, &len) == UCS_ERR_CANCELED);
        /* The stream goes on where it was. */
        send_next(16);
        p = recv_param(1);
        r = ucp_stream_recv_nbx(ba, in, 16, &len, &p);
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(len == 16);
        check_next(in, 16);
        printf("cancel: ok\n");
    }

    /* The other direction works too. */
    {
        uint8_t out[10] = "0123456789", in[10];
        size_t len = 0;
        ucp_request_param_t ps = send_param();
        void *s = ucp_stream_send_nbx(ba, out, 10, &ps);
        ucp_request_param_t pr = recv_param(1);
        void *r = ucp_stream_recv_nbx(ab, in, 10, &len, &pr);
        CHECK(wait_req(r, &len) == UCS_OK);
        CHECK(wait_req(s, NULL) == UCS_OK);
        CHECK(len == 10 && memcmp(in, out, 10) == 0);
    }

    CHECK(tx_off == rx_off);
    printf("stream bytes: %zu checked, %d send callbacks, %d receive callbacks\n",
           rx_off, n_send_cb, n_recv_cb);

    {
        ucp_request_param_t p = {0};
        void *c = ucp_ep_close_nbx(ab, &p);
        void *d = ucp_ep_close_nbx(ba, &p);
        time_t start = time(NULL);
        CHECK(!UCS_PTR_IS_ERR(c) && !UCS_PTR_IS_ERR(d));
        while ((c != NULL && ucp_request_check_status(c) == UCS_INPROGRESS) ||
               (d != NULL && ucp_request_check_status(d) == UCS_INPROGRESS)) {
            CHECK(time(NULL) - start < 30);
            progress_both();
        }
        if (c != NULL) {
            ucp_request_free(c);
        }
        if (d != NULL) {
            ucp_request_free(d);
        }
    }
    ucp_worker_release_address(wa, addr_a);
    ucp_worker_release_address(wb, addr_b);
    ucp_worker_destroy(wa);
    ucp_worker_destroy(wb);
    ucp_cleanup(ctx);
    printf("capi_stream: ok\n");
    return 0;
}
