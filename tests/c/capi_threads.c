/* rucx's libucp.so in UCS_THREAD_MODE_MULTI: four threads send tag
 * messages on one endpoint of one worker at once, mostly 8 bytes (which
 * may take the endpoint's own send path, past the worker's lock), every
 * 50th 9000 bytes and every 50th (offset 25) 200 KB, by rendezvous; the
 * receiving worker checks each thread's messages arrive in order with
 * their bytes. Prints how many sends took the endpoint's path (from
 * ucp_worker_print_info), then "capi_threads: ok". */
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
#define MESSAGES 20000
#define BIG (200 * 1000)

static ucp_worker_h wa, wb;
static ucp_ep_h ep;

static size_t size_of(uint64_t i)
{
    if (i % 50 == 0) {
        return 9000;
    }
    if (i % 50 == 25) {
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

static void *sender(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    uint8_t *buf = malloc(BIG);
    ucp_request_param_t p = {0};
    CHECK(buf != NULL);
    for (uint64_t i = 0; i < MESSAGES; i++) {
        uint64_t tag = t << 32 | i;
        size_t n = size_of(i);
        fill(buf, n, tag);
        wait_on(wa, ucp_tag_send_nbx(ep, buf, n, tag, &p));
    }
    free(buf);
    return NULL;
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

int main(void)
{
    ucp_context_h ctx;
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_ep_params_t ep_params = {0};
    ucp_request_param_t cp = {0};
    ucp_address_t *addr_b;
    size_t len_b;
    pthread_t threads[THREADS];
    uint64_t next[THREADS] = {0};
    uint8_t *buf = malloc(BIG);
    ucp_tag_recv_info_t info;
    ucp_request_param_t rp = {0};

    CHECK(buf != NULL);
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features   = UCP_FEATURE_TAG;
    params.mt_workers_shared = 1;
    CHECK(ucp_init(&params, NULL, &ctx) == UCS_OK);
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_MULTI;
    CHECK(ucp_worker_create(ctx, &wp, &wa) == UCS_OK);
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_OK);
    CHECK(ucp_worker_get_address(wb, &addr_b, &len_b) == UCS_OK);
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address    = addr_b;
    CHECK(ucp_ep_create(wa, &ep_params, &ep) == UCS_OK);

    for (int t = 0; t < THREADS; t++) {
        CHECK(pthread_create(&threads[t], NULL, sender, (void *)(uintptr_t)t) == 0);
    }
    /* Received in arrival order, each thread's in its own order. */
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
    rp.recv_info.tag_info = &info;
    for (long k = 0; k < (long)THREADS * MESSAGES; k++) {
        void *r = ucp_tag_recv_nbx(wb, buf, BIG, 0, 0, &rp);
        uint64_t t, i;
        if (r != NULL) {
            time_t start = time(NULL);
            CHECK(!UCS_PTR_IS_ERR(r));
            while (ucp_tag_recv_request_test(r, &info) == UCS_INPROGRESS) {
                CHECK(time(NULL) - start < 120);
                ucp_worker_progress(wb);
            }
            ucp_request_free(r);
        }
        t = info.sender_tag >> 32;
        i = info.sender_tag & 0xffffffffu;
        CHECK(t < THREADS);
        if (i != next[t]) {
            fprintf(stderr, "thread %" PRIu64 ": message %" PRIu64 " came, %" PRIu64
                    " expected\n", t, i, next[t]);
            exit(1);
        }
        next[t]++;
        CHECK(info.length == size_of(i));
        CHECK(same(buf, info.length, info.sender_tag));
    }
    for (int t = 0; t < THREADS; t++) {
        CHECK(pthread_join(threads[t], NULL) == 0);
    }
    printf("endpoint path sends: %ld of %d\n", path_sends(), THREADS * MESSAGES);
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
