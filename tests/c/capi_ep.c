/* rucx's libucp.so through UCX 1.13's C API: endpoints and workers. Two
 * workers in one process (the caller picks the transports); worker query
 * and thread modes; the legacy _nb calls with their callbacks; a receive
 * that completes at once with recv_info; flushes and fence; closing in
 * every mode (close_nbx force and flush, close_nb, disconnect_nb,
 * ep_destroy); an endpoint in peer error mode whose peer worker goes
 * away: its handler runs from progress with the endpoint's user data.
 * Prints "capi_ep: ok" and exits 0 when every check holds. */
#include <ucp/api/ucp.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)

struct app_req {
    int          completed;
    ucs_status_t status;
    ucp_tag_recv_info_t info;
};

static void req_init(void *r)
{
    memset(r, 0, sizeof(struct app_req));
}

static ucp_worker_h wa, wb;

static void progress_both(void)
{
    ucp_worker_progress(wa);
    if (wb != NULL) {
        ucp_worker_progress(wb);
    }
}

/* Waits for a status pointer; frees the request; returns its status. */
static ucs_status_t wait_ptr(void *r)
{
    time_t start = time(NULL);
    if (!UCS_PTR_IS_PTR(r)) {
        return UCS_PTR_STATUS(r);
    }
    while (ucp_request_check_status(r) == UCS_INPROGRESS) {
        CHECK(time(NULL) - start < 30);
        progress_both();
    }
    ucs_status_t st = ucp_request_check_status(r);
    ucp_request_free(r);
    return st;
}

static void legacy_send_cb(void *r, ucs_status_t st)
{
    struct app_req *q = r;
    q->completed = 1;
    q->status = st;
}

static void legacy_recv_cb(void *r, ucs_status_t st, ucp_tag_recv_info_t *info)
{
    struct app_req *q = r;
    q->completed = 1;
    q->status = st;
    q->info = *info;
}

static int failures;
static ucs_status_t failure_status;

/* Each failure's endpoint and argument, in order. */
static ucp_ep_h failed_eps[4];
static void *failure_args[4];

static void on_failure(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    if (failures < 4) {
        failed_eps[failures]   = ep;
        failure_args[failures] = arg;
    }
    failures++;
    failure_status = st;
}

static ucp_ep_h connect_to(ucp_worker_h from, ucp_worker_h to, int peer, void *ud)
{
    ucp_address_t *addr;
    size_t len;
    ucp_ep_params_t p = {0};
    ucp_ep_h ep;

    CHECK(ucp_worker_get_address(to, &addr, &len) == UCS_OK);
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    p.address    = addr;
    if (peer) {
        p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_USER_DATA;
        p.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
        p.err_handler.cb  = on_failure;
        p.err_handler.arg = (void *)0x1; /* user_data overrides it */
        p.user_data       = ud;
    }
    CHECK(ucp_ep_create(from, &p, &ep) == UCS_OK);
    ucp_worker_release_address(to, addr);
    return ep;
}

/* One 8-byte message from ep to wb with the legacy calls. */
static void legacy_message(ucp_ep_h ep, ucp_tag_t tag)
{
    uint64_t v = tag * 3, got = 0;
    void *s = ucp_tag_send_nb(ep, &v, 1, ucp_dt_make_contig(8), tag, legacy_send_cb);
    CHECK(!UCS_PTR_IS_ERR(s));
    void *r = ucp_tag_recv_nb(wb, &got, 1, ucp_dt_make_contig(8), tag, UINT64_MAX,
                              legacy_recv_cb);
    CHECK(UCS_PTR_IS_PTR(r)); /* legacy receives always give a request */
    time_t start = time(NULL);
    while (!((struct app_req *)r)->completed) {
        CHECK(time(NULL) - start < 30);
        progress_both();
    }
    ucp_tag_recv_info_t info;
    ucs_status_t st = ucp_request_test(r, &info);
    if (st != UCS_OK) {
        fprintf(stderr, "legacy receive: %s\n", ucs_status_string(st));
    }
    CHECK(st == UCS_OK);
    CHECK(info.sender_tag == tag && info.length == 8 && got == tag * 3);
    CHECK(ucp_request_is_completed(r));
    ((struct app_req *)r)->completed = 0; /* init runs once per block */
    ucp_request_release(r);
    if (s != NULL) {
        while (!((struct app_req *)s)->completed) {
            progress_both();
        }
        CHECK(((struct app_req *)s)->status == UCS_OK);
        ((struct app_req *)s)->completed = 0;
        ucp_request_free(s);
    }
}

int main(void)
{
    ucp_context_h ctx;
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_worker_attr_t wattr = {0};
    unsigned major, minor, release;

    ucp_get_version(&major, &minor, &release);
    CHECK(major == 1 && minor == 13);
    CHECK(strncmp(ucp_get_version_string(), "1.13", 4) == 0);

    params.field_mask   = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                          UCP_PARAM_FIELD_REQUEST_INIT;
    params.features     = UCP_FEATURE_TAG;
    params.request_size = sizeof(struct app_req);
    params.request_init = req_init;
    CHECK(ucp_init(&params, NULL, &ctx) == UCS_OK);

    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_MULTI;
    CHECK(ucp_worker_create(ctx, &wp, &wa) == UCS_OK);
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_OK);
    wp.thread_mode = 7;
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_ERR_INVALID_PARAM);
    wattr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE | UCP_WORKER_ATTR_FIELD_ADDRESS |
                       UCP_WORKER_ATTR_FIELD_NAME;
    CHECK(ucp_worker_query(wa, &wattr) == UCS_OK);
    CHECK(wattr.thread_mode == UCS_THREAD_MODE_MULTI);
    CHECK(wattr.address != NULL && wattr.address_length > 8);
    CHECK(strlen(wattr.name) > 0);
    ucp_worker_release_address(wa, wattr.address);
    ucp_worker_print_info(wa, stdout);

    /* Legacy calls, a receive done at once, flush, fence. */
    {
        ucp_ep_h ep = connect_to(wa, wb, 0, NULL);
        legacy_message(ep, 11);
        uint64_t v = 99, got = 0;
        void *s = ucp_tag_send_nbx(ep, &v, 8, 12, &(ucp_request_param_t){0});
        ucp_tag_recv_info_t info = {0};
        time_t start = time(NULL);
        while (ucp_tag_probe_nb(wb, 12, UINT64_MAX, 0, &info) == NULL) {
            CHECK(time(NULL) - start < 30);
            progress_both();
        }
        ucp_request_param_t rp = {0};
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
        rp.recv_info.tag_info = &info;
        memset(&info, 0, sizeof(info));
        void *r = ucp_tag_recv_nbx(wb, &got, 8, 12, UINT64_MAX, &rp);
        CHECK(r == NULL); /* the message was there: done at once */
        CHECK(info.sender_tag == 12 && info.length == 8 && got == 99);
        CHECK(wait_ptr(s) == UCS_OK);
        CHECK(wait_ptr(ucp_worker_flush_nbx(wa, &(ucp_request_param_t){0})) == UCS_OK);
        CHECK(ucp_worker_flush(wa) == UCS_OK);
        CHECK(ucp_ep_flush(ep) == UCS_OK);
        CHECK(ucp_worker_fence(wa) == UCS_OK);
        /* A second endpoint to the same worker, closed by force: the
         * first one still works. */
        ucp_ep_h ep2 = connect_to(wa, wb, 0, NULL);
        ucp_request_param_t force = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                     .flags = UCP_EP_CLOSE_FLAG_FORCE};
        CHECK(wait_ptr(ucp_ep_close_nbx(ep2, &force)) == UCS_OK);
        legacy_message(ep, 13);
        CHECK(wait_ptr(ucp_ep_close_nb(ep, UCP_EP_CLOSE_MODE_FLUSH)) == UCS_OK);
        CHECK(UCS_PTR_STATUS(ucp_ep_close_nb(NULL, UCP_EP_CLOSE_MODE_FLUSH)) ==
              UCS_ERR_INVALID_PARAM);
        ep = connect_to(wa, wb, 0, NULL);
        legacy_message(ep, 14);
        CHECK(wait_ptr(ucp_disconnect_nb(ep)) == UCS_OK);
        ep = connect_to(wa, wb, 0, NULL);
        legacy_message(ep, 15);
        ucp_ep_destroy(ep);
    }
    printf("close: ok\n");

    /* Peer error mode: the peer worker goes away. Two endpoints to it,
     * each with its handler's argument: rucx shares one endpoint per
     * peer worker, and each C endpoint's handler runs once. */
    {
        static int token, token2;
        ucp_ep_h ep = connect_to(wa, wb, 1, &token);
        ucp_ep_h ep2 = connect_to(wa, wb, 1, &token2);
        CHECK(ep2 != ep);
        legacy_message(ep, 21);
        ucp_worker_destroy(wb);
        wb = NULL;
        uint64_t v = 1;
        time_t start = time(NULL);
        while (failures == 0) {
            CHECK(time(NULL) - start < 60);
            void *s = ucp_tag_send_nbx(ep, &v, 8, 22, &(ucp_request_param_t){0});
            if (UCS_PTR_IS_PTR(s)) {
                ucp_request_free(s);
            }
            for (int i = 0; i < 1000 && failures == 0; i++) {
                ucp_worker_progress(wa);
            }
        }
        for (int i = 0; i < 10000; i++) {
            ucp_worker_progress(wa);
        }
        CHECK(failures == 2);
        CHECK((failed_eps[0] == ep && failure_args[0] == &token &&
               failed_eps[1] == ep2 && failure_args[1] == &token2) ||
              (failed_eps[0] == ep2 && failure_args[0] == &token2 &&
               failed_eps[1] == ep && failure_args[1] == &token));
        printf("failure: %d (%s)\n", failure_status, ucs_status_string(failure_status));
        CHECK(failure_status == UCS_ERR_CONNECTION_RESET ||
              failure_status == UCS_ERR_ENDPOINT_TIMEOUT ||
              failure_status == UCS_ERR_UNREACHABLE);
        ucp_request_param_t force = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                     .flags = UCP_EP_CLOSE_FLAG_FORCE};
        ucs_status_t st = wait_ptr(ucp_ep_close_nbx(ep, &force));
        CHECK(st == UCS_OK || UCS_STATUS_IS_ERR(st));
        st = wait_ptr(ucp_ep_close_nbx(ep2, &force));
        CHECK(st == UCS_OK || UCS_STATUS_IS_ERR(st));
    }
    printf("peer failure: ok\n");

    ucp_worker_destroy(wa);
    ucp_cleanup(ctx);
    printf("capi_ep: ok\n");
    return 0;
}
