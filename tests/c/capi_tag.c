/* rucx's libucp.so through UCX 1.13's C API, in one process: a context
 * and two workers connected by address; tag messages of 0 B to 4 MiB with
 * callbacks; requests in the application's request_size area; a callback
 * that posts the next send from inside progress; probe and matched
 * receive; cancel; wrong arguments; sleeping on the event fd. Prints
 * "capi_tag: ok" and exits 0 when every check holds. */
#include <ucp/api/ucp.h>

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)
#define MAGIC 0x5eedf00dcafe1234ull

/* The application's part of each request. */
struct app_req {
    uint64_t     magic;    /* set by request_init */
    void        *self;     /* where request_init ran */
    int          completed;
    ucs_status_t status;
    ucp_tag_recv_info_t info;
};

static int n_init, n_cleanup;
static void *blocks[256];
static int n_blocks;

static void req_init(void *r)
{
    struct app_req *q = r;
    q->magic = MAGIC;
    q->self = r;
    q->completed = 0;
    n_init++;
}

static void req_cleanup(void *r)
{
    CHECK(((struct app_req *)r)->magic == MAGIC);
    n_cleanup++;
}

/* Records a request handle seen, once. */
static void seen(void *r)
{
    for (int i = 0; i < n_blocks; i++) {
        if (blocks[i] == r) {
            return;
        }
    }
    CHECK(n_blocks < 256);
    blocks[n_blocks++] = r;
}

static int n_callbacks;

static void check_req(void *r)
{
    struct app_req *q = r;
    n_callbacks++;
    CHECK(q->magic == MAGIC);
    CHECK(q->self == r); /* the handle points at the area init ran on */
    seen(r);
}

static void send_cb(void *r, ucs_status_t st, void *ud)
{
    struct app_req *q = r;
    check_req(r);
    CHECK(ud == (void *)0x51);
    q->completed = 1;
    q->status = st;
}

static void recv_cb(void *r, ucs_status_t st, const ucp_tag_recv_info_t *info,
                    void *ud)
{
    struct app_req *q = r;
    check_req(r);
    CHECK(ud == (void *)0x52);
    q->completed = 1;
    q->status = st;
    q->info = *info;
}

static ucp_worker_h wa, wb;

static void progress_both(void)
{
    ucp_worker_progress(wa);
    ucp_worker_progress(wb);
}

/* Waits for request r (or NULL: done at once); returns its status. */
static ucs_status_t wait_req(void *r)
{
    time_t start = time(NULL);
    if (r == NULL) {
        return UCS_OK;
    }
    CHECK(!UCS_PTR_IS_ERR(r));
    while (!((struct app_req *)r)->completed) {
        CHECK(time(NULL) - start < 60);
        progress_both();
    }
    ucs_status_t st = ucp_request_check_status(r);
    CHECK(st == ((struct app_req *)r)->status);
    ((struct app_req *)r)->completed = 0;
    ucp_request_free(r);
    return st;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
    }
}

static void one_message(ucp_ep_h ep, size_t len, ucp_tag_t tag, int recv_first)
{
    uint8_t *out = malloc(len + 1), *in = malloc(len + 1);
    ucp_request_param_t sp = {0}, rp = {0};
    void *s = NULL, *r = NULL;

    fill(out, len, (unsigned)tag);
    memset(in, 0, len + 1);
    sp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    sp.cb.send      = send_cb;
    sp.user_data    = (void *)0x51;
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    rp.cb.recv      = recv_cb;
    rp.user_data    = (void *)0x52;
    if (recv_first) {
        r = ucp_tag_recv_nbx(wb, in, len, tag, UINT64_MAX, &rp);
    }
    s = ucp_tag_send_nbx(ep, out, len, tag, &sp);
    CHECK(!UCS_PTR_IS_ERR(s));
    if (!recv_first) {
        r = ucp_tag_recv_nbx(wb, in, len, tag, UINT64_MAX, &rp);
    }
    CHECK(UCS_PTR_IS_PTR(r)); /* NO_IMM_CMPL: always a request */
    CHECK(wait_req(r) == UCS_OK);
    CHECK(((struct app_req *)r)->info.length == len);
    CHECK(((struct app_req *)r)->info.sender_tag == tag);
    CHECK(wait_req(s) == UCS_OK);
    CHECK(memcmp(in, out, len) == 0);
    free(out);
    free(in);
}

/* A chain of synchronous sends (they never complete at once), each
 * posted by the previous one's callback from inside progress. */
static ucp_ep_h chain_ep;
static uint64_t chain_buf[16];
static int chain_next, chain_done;

static void chain_cb(void *r, ucs_status_t st, void *ud);

static void chain_post(void)
{
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send      = chain_cb;
    p.user_data    = (void *)0x53;
    chain_buf[chain_next] = 1000 + chain_next;
    void *s = ucp_tag_send_sync_nbx(chain_ep, &chain_buf[chain_next], 8,
                                    0x7000 + chain_next, &p);
    chain_next++;
    CHECK(UCS_PTR_IS_PTR(s));
}

static void chain_cb(void *r, ucs_status_t st, void *ud)
{
    CHECK(st == UCS_OK);
    CHECK(ud == (void *)0x53);
    check_req(r);
    ucp_request_free(r); /* freed inside its own callback */
    chain_done++;
    if (chain_next < 16) {
        chain_post();
    }
}

static void legacy_recv_cb(void *r, ucs_status_t st, ucp_tag_recv_info_t *info)
{
    struct app_req *q = r;
    check_req(r);
    q->completed = 1;
    q->status = st;
    q->info = *info;
}

/* Event fd: a thread sends after a while; the main thread sleeps. */
static ucp_ep_h sleeper_ep;
static uint64_t sleeper_msg = 42;

static void *late_sender(void *arg)
{
    usleep(200 * 1000);
    void *s = ucp_tag_send_nbx(sleeper_ep, &sleeper_msg, 8, (ucp_tag_t)(uintptr_t)arg,
                               &(ucp_request_param_t){0});
    CHECK(!UCS_PTR_IS_ERR(s));
    while (s != NULL && ucp_request_check_status(s) == UCS_INPROGRESS) {
        ucp_worker_progress(wa);
    }
    if (s != NULL) {
        ucp_request_free(s);
    }
    /* Keep the sender progressing for a rendezvous or a slow lane. */
    for (int i = 0; i < 20000; i++) {
        ucp_worker_progress(wa);
    }
    return NULL;
}

static void *signaller(void *arg)
{
    usleep(200 * 1000);
    CHECK(ucp_worker_signal((ucp_worker_h)arg) == UCS_OK);
    return NULL;
}

static void sleep_until_message(ucp_tag_t tag, int use_wait)
{
    pthread_t t;
    ucp_tag_recv_info_t info;
    int efd, slept = 0;
    time_t start = time(NULL);

    CHECK(ucp_worker_get_efd(wb, &efd) == UCS_OK);
    CHECK(pthread_create(&t, NULL, late_sender, (void *)(uintptr_t)tag) == 0);
    for (;;) {
        ucp_tag_message_h m = ucp_tag_probe_nb(wb, tag, UINT64_MAX, 1, &info);
        if (m != NULL) {
            uint64_t got = 0;
            void *r = ucp_tag_msg_recv_nb(wb, &got, 8, ucp_dt_make_contig(1), m,
                                          legacy_recv_cb);
            CHECK(UCS_PTR_IS_PTR(r));
            while (!((struct app_req *)r)->completed) {
                ucp_worker_progress(wb);
            }
            ((struct app_req *)r)->completed = 0;
            ucp_request_free(r);
            CHECK(got == 42);
            break;
        }
        if (ucp_worker_progress(wb)) {
            continue;
        }
        CHECK(time(NULL) - start < 30);
        ucs_status_t st = ucp_worker_arm(wb);
        if (st == UCS_ERR_BUSY) {
            continue;
        }
        CHECK(st == UCS_OK);
        if (use_wait) {
            CHECK(ucp_worker_wait(wb) == UCS_OK);
        } else {
            struct pollfd pfd = {.fd = efd, .events = POLLIN};
            CHECK(poll(&pfd, 1, 20000) >= 0);
        }
        slept++;
    }
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(slept > 0); /* it did sleep before the message came */
}

int main(void)
{
    ucp_config_t *config;
    ucp_context_h ctx;
    ucp_context_attr_t cattr = {0};
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_address_t *addr_b;
    size_t addr_b_len;
    ucp_ep_params_t ep_params = {0};
    ucp_ep_h ep;

    /* Wrong arguments give UCX's statuses. */
    CHECK(ucp_config_read(NULL, NULL, NULL) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_config_read(NULL, NULL, &config) == UCS_OK);
    CHECK(ucp_config_modify(config, "NO_SUCH_VARIABLE", "1") == UCS_ERR_NO_ELEM);
    CHECK(ucp_config_modify(config, "RNDV_THRESH", "lots") == UCS_ERR_INVALID_PARAM);
    ucp_config_print(config, stdout, "capi_tag", UCS_CONFIG_PRINT_CONFIG |
                     UCS_CONFIG_PRINT_HEADER);

    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                        UCP_PARAM_FIELD_REQUEST_INIT | UCP_PARAM_FIELD_REQUEST_CLEANUP;
    params.features        = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.request_size    = sizeof(struct app_req);
    params.request_init    = req_init;
    params.request_cleanup = req_cleanup;
    CHECK(ucp_init(&params, config, &ctx) == UCS_OK);
    ucp_config_release(config);
    ucp_context_print_info(ctx, stdout);

    cattr.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE | UCP_ATTR_FIELD_THREAD_MODE;
    CHECK(ucp_context_query(ctx, &cattr) == UCS_OK);
    CHECK(cattr.request_size > 0 && cattr.request_size % 16 == 0);
    CHECK(cattr.thread_mode == UCS_THREAD_MODE_SINGLE);
    CHECK(ucp_context_query(NULL, &cattr) == UCS_ERR_INVALID_PARAM);

    CHECK(ucp_worker_create(ctx, NULL, &wa) == UCS_ERR_INVALID_PARAM);
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &wa) == UCS_OK);
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_OK);
    CHECK(ucp_worker_get_address(wb, &addr_b, &addr_b_len) == UCS_OK);
    CHECK(ucp_worker_get_efd(wb, NULL) == UCS_ERR_INVALID_PARAM);

    ep_params.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    CHECK(ucp_ep_create(wa, &ep_params, &ep) == UCS_ERR_INVALID_PARAM);
    {
        char junk[64] = "not an address";
        ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        ep_params.address    = (ucp_address_t *)junk;
        CHECK(ucp_ep_create(wa, &ep_params, &ep) == UCS_ERR_INVALID_ADDR);
    }
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address    = addr_b;
    CHECK(ucp_ep_create(wa, &ep_params, &ep) == UCS_OK);
    ucp_ep_print_info(ep, stdout);

    {
        void *p = ucp_tag_send_nbx(NULL, "x", 1, 1, &(ucp_request_param_t){0});
        CHECK(UCS_PTR_IS_ERR(p) && UCS_PTR_STATUS(p) == UCS_ERR_INVALID_PARAM);
        /* A generic datatype (class 7) with no ops behind it. */
        ucp_request_param_t gen = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
                                   .datatype = UCP_DATATYPE_GENERIC};
        p = ucp_tag_send_nbx(ep, "x", 1, 1, &gen);
        CHECK(UCS_PTR_IS_ERR(p) && UCS_PTR_STATUS(p) == UCS_ERR_INVALID_PARAM);
        /* Strided datatypes are not implemented. */
        ucp_request_param_t strided = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
                                       .datatype = UCP_DATATYPE_STRIDED};
        p = ucp_tag_send_nbx(ep, "x", 1, 1, &strided);
        CHECK(UCS_PTR_IS_ERR(p) && UCS_PTR_STATUS(p) == UCS_ERR_UNSUPPORTED);
        ucp_request_param_t iov = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
                                   .datatype = ucp_dt_make_iov()};
        ucp_dt_iov_t bad = {.buffer = NULL, .length = 5};
        p = ucp_tag_send_nbx(ep, &bad, 1, 1, &iov);
        CHECK(UCS_PTR_IS_ERR(p) && UCS_PTR_STATUS(p) == UCS_ERR_INVALID_PARAM);
        CHECK(strcmp(ucs_status_string(UCS_ERR_CANCELED), "Request canceled") == 0);
    }

    /* 0 B, 8 B, 64 KiB and 4 MiB; receive posted before and after. */
    size_t sizes[] = {0, 8, 65536, 4 << 20};
    for (int i = 0; i < 4; i++) {
        one_message(ep, sizes[i], 0x100 + i, 1);
        one_message(ep, sizes[i], 0x200 + i, 0);
    }
    printf("sizes: ok\n");

    /* Iovecs: a list of three pieces (one empty) into a list of two, and
     * into contiguous memory; eager and rendezvous sizes. */
    for (int big = 0; big < 2; big++) {
        size_t n1 = big ? 300000 : 100, n2 = big ? 200000 : 50;
        uint8_t *a = malloc(n1), *b = malloc(n2), *flat = malloc(n1 + n2);
        uint8_t *r1 = calloc(1, n2), *r2 = calloc(1, n1 + 100), *rflat = calloc(1, n1 + n2);
        fill(a, n1, 3);
        fill(b, n2, 4);
        memcpy(flat, a, n1);
        memcpy(flat + n1, b, n2);
        ucp_dt_iov_t out[3] = {{a, n1}, {NULL, 0}, {b, n2}};
        ucp_dt_iov_t in[2] = {{r1, n2}, {r2, n1 + 100}};
        ucp_request_param_t sp = {0}, rp = {0};
        sp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                          UCP_OP_ATTR_FIELD_DATATYPE;
        sp.cb.send      = send_cb;
        sp.user_data    = (void *)0x51;
        sp.datatype     = ucp_dt_make_iov();
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                          UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        rp.cb.recv      = recv_cb;
        rp.user_data    = (void *)0x52;
        rp.datatype     = ucp_dt_make_iov();
        void *r = ucp_tag_recv_nbx(wb, in, 2, 0x3300 + big, UINT64_MAX, &rp);
        void *s = ucp_tag_send_nbx(ep, out, 3, 0x3300 + big, &sp);
        CHECK(wait_req(r) == UCS_OK);
        CHECK(wait_req(s) == UCS_OK);
        CHECK(memcmp(r1, flat, n2) == 0 && memcmp(r2, flat + n2, n1) == 0);
        /* The same list into contiguous memory. */
        rp.datatype = ucp_dt_make_contig(1);
        r = ucp_tag_recv_nbx(wb, rflat, n1 + n2, 0x3400 + big, UINT64_MAX, &rp);
        s = ucp_tag_send_nbx(ep, out, 3, 0x3400 + big, &sp);
        CHECK(wait_req(r) == UCS_OK);
        CHECK(((struct app_req *)r)->info.length == n1 + n2);
        CHECK(wait_req(s) == UCS_OK);
        CHECK(memcmp(rflat, flat, n1 + n2) == 0);
        free(a), free(b), free(flat), free(r1), free(r2), free(rflat);
    }
    printf("iov: ok\n");

    /* A callback posts the next send from inside progress. */
    {
        uint64_t got[16];
        void *r[16];
        ucp_request_param_t rp = {0};
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                          UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        rp.cb.recv   = recv_cb;
        rp.user_data = (void *)0x52;
        for (int i = 0; i < 16; i++) {
            r[i] = ucp_tag_recv_nbx(wb, &got[i], 8, 0x7000 + i, UINT64_MAX, &rp);
        }
        chain_ep = ep;
        chain_post();
        for (int i = 0; i < 16; i++) {
            CHECK(wait_req(r[i]) == UCS_OK);
            CHECK(got[i] == 1000u + i);
        }
        time_t start = time(NULL);
        while (chain_done < 16) {
            CHECK(time(NULL) - start < 30);
            progress_both();
        }
    }
    printf("chain: ok\n");

    /* Probe with remove, then a matched receive. */
    {
        ucp_tag_recv_info_t info;
        ucp_tag_message_h m;
        char msg[100] = "probed message", got[100] = {0};
        void *s = ucp_tag_send_nbx(ep, msg, sizeof(msg), 0x9999, &(ucp_request_param_t){0});
        time_t start = time(NULL);
        while ((m = ucp_tag_probe_nb(wb, 0x9990, 0xfff0, 0, &info)) == NULL) {
            CHECK(time(NULL) - start < 30);
            progress_both();
        }
        CHECK(info.sender_tag == 0x9999 && info.length == sizeof(msg));
        m = ucp_tag_probe_nb(wb, 0x9999, UINT64_MAX, 1, &info);
        CHECK(m != NULL);
        CHECK(ucp_tag_probe_nb(wb, 0x9999, UINT64_MAX, 0, &info) == NULL);
        ucp_request_param_t rp = {0};
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        rp.cb.recv   = recv_cb;
        rp.user_data = (void *)0x52;
        void *r = ucp_tag_msg_recv_nbx(wb, got, info.length, m, &rp);
        CHECK(!UCS_PTR_IS_ERR(r));
        CHECK(wait_req(r) == UCS_OK);
        CHECK(strcmp(got, "probed message") == 0);
        if (s != NULL) {
            while (ucp_request_check_status(s) == UCS_INPROGRESS) {
                progress_both();
            }
            ucp_request_free(s);
        }
    }
    printf("probe: ok\n");

    /* Cancel of a receive that matches nothing. */
    {
        uint64_t never;
        ucp_request_param_t rp = {0};
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        rp.cb.recv   = recv_cb;
        rp.user_data = (void *)0x52;
        void *r = ucp_tag_recv_nbx(wb, &never, 8, 0xdead, UINT64_MAX, &rp);
        CHECK(UCS_PTR_IS_PTR(r));
        CHECK(ucp_request_check_status(r) == UCS_INPROGRESS);
        ucp_request_cancel(wb, r);
        CHECK(((struct app_req *)r)->completed); /* callback ran */
        CHECK(((struct app_req *)r)->status == UCS_ERR_CANCELED);
        CHECK(ucp_request_check_status(r) == UCS_ERR_CANCELED);
        ((struct app_req *)r)->completed = 0;
        ucp_request_free(r);
        /* Freed in flight: its callback still runs when it completes, as
         * UCX's does (MPICH relies on it), then the block is reused. */
        r = ucp_tag_recv_nbx(wb, &never, 8, 0xbeef, UINT64_MAX, &rp);
        CHECK(UCS_PTR_IS_PTR(r));
        ((struct app_req *)r)->completed = 0;
        ucp_request_free(r);
        uint64_t v = 5;
        void *s = ucp_tag_send_nbx(ep, &v, 8, 0xbeef, &(ucp_request_param_t){0});
        for (int i = 0; i < 1000 && !((struct app_req *)r)->completed; i++) {
            progress_both();
        }
        CHECK(((struct app_req *)r)->completed); /* the callback ran */
        CHECK(((struct app_req *)r)->info.length == 8);
        CHECK(never == 5);
        if (s != NULL) {
            while (ucp_request_check_status(s) == UCS_INPROGRESS) {
                progress_both();
            }
            ucp_request_free(s);
        }
    }
    printf("cancel: ok\n");

    /* Requests in the application's memory (_nbr). */
    {
        char *mem = aligned_alloc(16, cattr.request_size * 2 + 64);
        void *sreq = mem + cattr.request_size;
        char *mem2 = aligned_alloc(16, cattr.request_size + 64);
        void *rreq = mem2 + cattr.request_size;
        uint64_t v = 77, got = 0;
        ucs_status_t rs = ucp_tag_recv_nbr(wb, &got, 8, ucp_dt_make_contig(1), 0x4242,
                                           UINT64_MAX, rreq);
        CHECK(rs == UCS_INPROGRESS);
        ucs_status_t ss = ucp_tag_send_nbr(ep, &v, 8, ucp_dt_make_contig(1), 0x4242, sreq);
        CHECK(ss == UCS_OK || ss == UCS_INPROGRESS);
        time_t start = time(NULL);
        while (ucp_request_check_status(rreq) == UCS_INPROGRESS ||
               (ss == UCS_INPROGRESS && ucp_request_check_status(sreq) == UCS_INPROGRESS)) {
            CHECK(time(NULL) - start < 30);
            progress_both();
        }
        ucp_tag_recv_info_t info;
        CHECK(ucp_tag_recv_request_test(rreq, &info) == UCS_OK);
        CHECK(info.length == 8 && info.sender_tag == 0x4242 && got == 77);
        free(mem);
        free(mem2);
    }
    /* One request memory for many sends, 8 bytes and 9000 in turn (some
     * complete inside their own posting call yet go in flight), each
     * waited for by polling it, its receive posted before it. */
    {
        enum { N = 200 };
        char *mem = aligned_alloc(16, cattr.request_size + 64);
        void *sreq = mem + cattr.request_size;
        static uint8_t big[9000], in[9000];
        for (int i = 0; i < N; i++) {
            size_t n = i % 3 == 2 ? sizeof(big) : 8;
            ucp_tag_recv_info_t info = {0};
            ucp_request_param_t rp = {0};
            time_t start = time(NULL);
            void *r;
            ucs_status_t ss;
            rp.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
            rp.recv_info.tag_info = &info;
            r = ucp_tag_recv_nbx(wb, in, sizeof(in), 0x4300 + i, UINT64_MAX, &rp);
            CHECK(!UCS_PTR_IS_ERR(r));
            big[0] = (uint8_t)i;
            ss = ucp_tag_send_nbr(ep, big, n, ucp_dt_make_contig(1), 0x4300 + i, sreq);
            CHECK(ss == UCS_OK || ss == UCS_INPROGRESS);
            while (ss == UCS_INPROGRESS &&
                   (ss = ucp_request_check_status(sreq)) == UCS_INPROGRESS) {
                CHECK(time(NULL) - start < 30);
                progress_both();
            }
            CHECK(ss == UCS_OK);
            if (r != NULL) {
                while (ucp_tag_recv_request_test(r, &info) == UCS_INPROGRESS) {
                    CHECK(time(NULL) - start < 30);
                    progress_both();
                }
                ucp_request_free(r);
            }
            CHECK(info.length == n && in[0] == (uint8_t)i);
        }
        free(mem);
    }
    printf("nbr: ok\n");

    /* Requests in the application's memory through the nbx calls, as Open
     * MPI's blocking send and receive use them: a send done at once
     * returns NULL; a receive done at once returns NULL too and its
     * memory reports the message to ucp_request_test; a receive posted
     * first returns that memory; misaligned memory is refused. */
    {
        char *mem = aligned_alloc(16, cattr.request_size * 2 + 64);
        void *sreq = mem + cattr.request_size;
        char *mem2 = aligned_alloc(16, cattr.request_size + 64);
        void *rreq = mem2 + cattr.request_size;
        uint64_t v = 91, got = 0;
        ucp_request_param_t sp, rp;
        sp.op_attr_mask = UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FIELD_DATATYPE |
                          UCP_OP_ATTR_FLAG_FAST_CMPL;
        sp.datatype = ucp_dt_make_contig(1);
        sp.request  = sreq;
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FIELD_DATATYPE;
        rp.datatype = ucp_dt_make_contig(8);
        rp.request  = rreq;

        void *s = ucp_tag_send_nbx(ep, &v, 8, 0x4343, &sp);
        CHECK(!UCS_PTR_IS_ERR(s));
        time_t start = time(NULL);
        while (s != NULL && ucp_request_check_status(s) == UCS_INPROGRESS) {
            CHECK(time(NULL) - start < 30);
            progress_both();
        }
        ucp_tag_message_h m;
        ucp_tag_recv_info_t info;
        while ((m = ucp_tag_probe_nb(wb, 0x4343, UINT64_MAX, 0, &info)) == NULL) {
            CHECK(time(NULL) - start < 30);
            progress_both();
        }
        void *r = ucp_tag_recv_nbx(wb, &got, 1, 0x4343, UINT64_MAX, &rp);
        CHECK(r == NULL);
        memset(&info, 0, sizeof(info));
        CHECK(ucp_request_test(rreq, &info) == UCS_OK);
        CHECK(info.length == 8 && info.sender_tag == 0x4343 && got == 91);

        got = 0;
        r = ucp_tag_recv_nbx(wb, &got, 1, 0x4344, UINT64_MAX, &rp);
        CHECK(r == rreq);
        CHECK(ucp_request_test(rreq, &info) == UCS_INPROGRESS);
        v = 92;
        s = ucp_tag_send_nbx(ep, &v, 8, 0x4344, &sp);
        CHECK(!UCS_PTR_IS_ERR(s));
        while (ucp_request_test(rreq, &info) == UCS_INPROGRESS ||
               (s != NULL && ucp_request_check_status(s) == UCS_INPROGRESS)) {
            CHECK(time(NULL) - start < 30);
            progress_both();
        }
        CHECK(ucp_request_test(rreq, &info) == UCS_OK);
        CHECK(info.length == 8 && info.sender_tag == 0x4344 && got == 92);

        rp.request = mem2 + cattr.request_size + 1;
        r = ucp_tag_recv_nbx(wb, &got, 1, 0x4345, UINT64_MAX, &rp);
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
        free(mem);
        free(mem2);
    }
    printf("nbx in application memory: ok\n");

    /* Sleep on the event fd, and in ucp_worker_wait, until a message. */
    sleeper_ep = ep;
    sleep_until_message(0x5100, 0);
    sleep_until_message(0x5101, 1);
    {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, signaller, wb) == 0);
        while (ucp_worker_progress(wb)) {
        }
        if (ucp_worker_arm(wb) == UCS_OK) {
            CHECK(ucp_worker_wait(wb) == UCS_OK);
        }
        CHECK(pthread_join(t, NULL) == 0);
    }
    printf("wakeup: ok\n");

    /* Flush and close. */
    {
        ucp_request_param_t p = {0};
        void *f = ucp_ep_flush_nbx(ep, &p);
        CHECK(!UCS_PTR_IS_ERR(f));
        if (f != NULL) {
            while (ucp_request_check_status(f) == UCS_INPROGRESS) {
                progress_both();
            }
            CHECK(ucp_request_check_status(f) == UCS_OK);
            ucp_request_free(f);
        }
        void *c = ucp_ep_close_nbx(ep, &p);
        CHECK(!UCS_PTR_IS_ERR(c));
        if (c != NULL) {
            time_t start = time(NULL);
            while (ucp_request_check_status(c) == UCS_INPROGRESS) {
                CHECK(time(NULL) - start < 30);
                progress_both();
            }
            ucp_request_free(c);
        }
    }

    ucp_worker_release_address(wb, addr_b);
    ucp_worker_destroy(wa);
    ucp_worker_destroy(wb);
    ucp_cleanup(ctx);
    /* request_init ran once per pooled block; cleanup once per block. */
    printf("blocks: %d seen, %d init, %d cleanup, %d callbacks\n", n_blocks, n_init,
           n_cleanup, n_callbacks);
    CHECK(n_init > 0 && n_init == n_cleanup);
    CHECK(n_blocks <= n_init);
    CHECK(n_init < n_callbacks); /* blocks were reused without a new init */
    printf("capi_tag: ok\n");
    return 0;
}
