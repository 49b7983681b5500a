/* rucx's libucp.so in UCS_THREAD_MODE_MULTI: four threads send messages
 * on one endpoint of one worker at once, mostly 8 bytes (which may take
 * the endpoint's own send path, past the worker's lock); the receiving
 * worker checks each thread's messages arrive in order with their bytes.
 * The call is the argument: "nbx" (the default) ucp_tag_send_nbx with
 * every 50th message 9000 bytes and every 50th (offset 25) 200 KB, by
 * rendezvous; "nb" and "nbr" the legacy tag sends with the same sizes;
 * "am" ucp_am_send_nbx without a user header, every 50th message 1000
 * bytes, odd threads asking for a reply endpoint. Prints how many sends
 * took the endpoint's path (from ucp_worker_print_info), then
 * "capi_threads: ok". */
#include <ucp/api/ucp.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)

#define THREADS 4
#define BIG (200 * 1000)
#define AM_ID 7

enum mode { NBX, NB, NBR, AM };

static ucp_worker_h wa, wb;
static ucp_ep_h ep;
static enum mode mode = NBX;
static uint64_t messages = 20000;
static size_t request_size;

static size_t size_of(uint64_t i)
{
    if (i % 50 == 0) {
        return mode == AM ? 1000 : 9000;
    }
    if (i % 50 == 25 && mode != AM) {
        return BIG;
    }
    return 8;
}

/* The bytes of message `tag`: its tag first, then a pattern. */
static void fill(uint8_t *p, size_t n, uint64_t tag)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)(tag * 131 + i * 7 + (i >> 9));
    }
    memcpy(p, &tag, n < 8 ? n : 8);
}

static int same(const uint8_t *p, size_t n, uint64_t tag)
{
    uint8_t want[BIG];
    fill(want, n, tag);
    return memcmp(p, want, n) == 0;
}

/* Waits for request r (NULL: done at once), progressing `w`. */
static void wait_on(ucp_worker_h w, void *r)
{
    time_t start = time(NULL);
    if (r == NULL) {
        return;
    }
    CHECK(!UCS_PTR_IS_ERR(r));
    while (ucp_request_check_status(r) == UCS_INPROGRESS) {
        CHECK(time(NULL) - start < 120);
        ucp_worker_progress(w);
    }
    CHECK(ucp_request_check_status(r) == UCS_OK);
    ucp_request_free(r);
}

static void sent_cb(void *request, ucs_status_t status)
{
    (void)request;
    CHECK(status == UCS_OK);
}

/* One message of thread t by the mode's call, waited for. */
static void send_one(uint64_t t, uint64_t tag, uint8_t *buf, size_t n, void *req)
{
    ucp_request_param_t p = {0};
    switch (mode) {
    case NBX:
        wait_on(wa, ucp_tag_send_nbx(ep, buf, n, tag, &p));
        break;
    case NB:
        wait_on(wa, ucp_tag_send_nb(ep, buf, n, ucp_dt_make_contig(1), tag, sent_cb));
        break;
    case NBR: {
        time_t start = time(NULL);
        ucs_status_t st = ucp_tag_send_nbr(ep, buf, n, ucp_dt_make_contig(1), tag, req);
        CHECK(st == UCS_OK || st == UCS_INPROGRESS);
        while (st == UCS_INPROGRESS &&
               (st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
            CHECK(time(NULL) - start < 120);
            ucp_worker_progress(wa);
        }
        CHECK(st == UCS_OK);
        break;
    }
    case AM:
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_AM_SEND_FLAG_EAGER | (t % 2 ? UCP_AM_SEND_FLAG_REPLY : 0);
        wait_on(wa, ucp_am_send_nbx(ep, AM_ID, NULL, 0, buf, n, &p));
        break;
    }
}

static void *sender(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    uint8_t *buf = malloc(BIG);
    /* Request memory of ucp_tag_send_nbr: rucx's header before it. */
    uint8_t *mem = malloc(request_size + 64);
    void *req = mem + ((request_size + 7) & ~(size_t)7);
    CHECK(buf != NULL && mem != NULL);
    for (uint64_t i = 0; i < messages; i++) {
        uint64_t tag = t << 32 | i;
        size_t n = size_of(i);
        fill(buf, n, tag);
        send_one(t, tag, buf, n, req);
    }
    free(mem);
    free(buf);
    return NULL;
}

static uint64_t next[THREADS];
static uint64_t arrived;

/* Checks message `tag` of `n` bytes at `p` is the next of its thread. */
static void check_next(uint64_t tag, const uint8_t *p, size_t n)
{
    uint64_t t = tag >> 32, i = tag & 0xffffffffu;
    CHECK(t < THREADS);
    if (i != next[t]) {
        fprintf(stderr, "thread %" PRIu64 ": message %" PRIu64 " came, %" PRIu64
                " expected\n", t, i, next[t]);
        exit(1);
    }
    next[t]++;
    arrived++;
    CHECK(n == size_of(i));
    CHECK(same(p, n, tag));
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length,
                          void *data, size_t length, const ucp_am_recv_param_t *param)
{
    uint64_t tag = 0;
    (void)arg;
    (void)header;
    CHECK(header_length == 0);
    CHECK(!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV));
    CHECK(length >= 8);
    memcpy(&tag, data, 8);
    /* Odd threads asked for a reply endpoint. */
    CHECK(!!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == (int)((tag >> 32) % 2));
    check_next(tag, data, length);
    return UCS_OK;
}

/* The number after "endpoint path sends:" in wa's print_info. */
static long path_sends(void)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    const char *at;
    long n = -1;
    CHECK(f != NULL);
    ucp_worker_print_info(wa, f);
    fclose(f);
    at = strstr(out, "endpoint path sends:");
    if (at != NULL) {
        n = strtol(at + strlen("endpoint path sends:"), NULL, 10);
    }
    free(out);
    return n;
}

int main(int argc, char **argv)
{
    ucp_context_h ctx;
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_ep_params_t ep_params = {0};
    ucp_request_param_t cp = {0};
    ucp_address_t *addr_b;
    size_t len_b;
    ucp_context_attr_t attr = {0};
    pthread_t threads[THREADS];
    uint8_t *buf = malloc(BIG);
    ucp_tag_recv_info_t info;
    ucp_request_param_t rp = {0};

    CHECK(buf != NULL);
    if (argc > 1) {
        const char *m = argv[1];
        mode = !strcmp(m, "nb") ? NB : !strcmp(m, "nbr") ? NBR : !strcmp(m, "am") ? AM : NBX;
        CHECK(mode != NBX || !strcmp(m, "nbx"));
        messages = mode == NBX ? messages : 5000;
    }
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features   = UCP_FEATURE_TAG | UCP_FEATURE_AM;
    params.mt_workers_shared = 1;
    CHECK(ucp_init(&params, NULL, &ctx) == UCS_OK);
    attr.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE;
    CHECK(ucp_context_query(ctx, &attr) == UCS_OK);
    request_size = attr.request_size;
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_MULTI;
    CHECK(ucp_worker_create(ctx, &wp, &wa) == UCS_OK);
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_OK);
    CHECK(ucp_worker_get_address(wb, &addr_b, &len_b) == UCS_OK);
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address    = addr_b;
    CHECK(ucp_ep_create(wa, &ep_params, &ep) == UCS_OK);
    if (mode == AM) {
        ucp_am_handler_param_t hp = {0};
        hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
        hp.id = AM_ID;
        hp.cb = am_cb;
        CHECK(ucp_worker_set_am_recv_handler(wb, &hp) == UCS_OK);
    }

    for (int t = 0; t < THREADS; t++) {
        CHECK(pthread_create(&threads[t], NULL, sender, (void *)(uintptr_t)t) == 0);
    }
    if (mode == AM) {
        time_t start = time(NULL);
        while (arrived < THREADS * messages) {
            CHECK(time(NULL) - start < 120);
            ucp_worker_progress(wb);
        }
    }
    /* Received in arrival order, each thread's in its own order. */
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
    rp.recv_info.tag_info = &info;
    for (uint64_t k = 0; mode != AM && k < THREADS * messages; k++) {
        void *r = ucp_tag_recv_nbx(wb, buf, BIG, 0, 0, &rp);
        if (r != NULL) {
            time_t start = time(NULL);
            CHECK(!UCS_PTR_IS_ERR(r));
            while (ucp_tag_recv_request_test(r, &info) == UCS_INPROGRESS) {
                CHECK(time(NULL) - start < 120);
                ucp_worker_progress(wb);
            }
            ucp_request_free(r);
        }
        check_next(info.sender_tag, buf, info.length);
    }
    for (int t = 0; t < THREADS; t++) {
        CHECK(pthread_join(threads[t], NULL) == 0);
    }
    printf("endpoint path sends: %ld of %" PRIu64 "\n", path_sends(), THREADS * messages);
    {
        void *r = ucp_ep_close_nbx(ep, &cp);
        time_t start = time(NULL);
        if (r != NULL) {
            CHECK(!UCS_PTR_IS_ERR(r));
            while (ucp_request_check_status(r) == UCS_INPROGRESS) {
                CHECK(time(NULL) - start < 60);
                ucp_worker_progress(wa);
                ucp_worker_progress(wb);
            }
            ucp_request_free(r);
        }
    }
    ucp_worker_release_address(wb, addr_b);
    ucp_worker_destroy(wa);
    ucp_worker_destroy(wb);
    ucp_cleanup(ctx);
    free(buf);
    printf("capi_threads: ok\n");
    return 0;
}
