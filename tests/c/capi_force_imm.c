/* rucx's libucp.so: UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL, in one process with
 * two workers. An operation with the flag completes inside its call
 * (NULL) or returns UCS_ERR_NO_RESOURCE having posted nothing: a receive
 * with no message takes none later; a small send completes, a large or a
 * synchronous one is refused and never arrives; a received message fills
 * recv_info; a put from a stack buffer is done at once (shared memory)
 * or refused and writes nothing (tcp), with the memory checked either
 * way; a stream receive with nothing there, and a large stream send, are
 * refused. Prints "put: done"
 * or "put: refused", and "capi_force_imm: ok" when every check holds. */
#include <ucp/api/ucp.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)

#define BIG (4 << 20)

static ucp_worker_h wa, wb;

static ucs_status_t status_of(void *r)
{
    return UCS_PTR_IS_ERR(r) ? UCS_PTR_STATUS(r) : UCS_OK;
}

/* Waits for what an operation returned (progressing both workers); its
 * final status. */
static ucs_status_t wait_req(void *r)
{
    ucs_status_t st;
    time_t start = time(NULL);
    if (r == NULL || UCS_PTR_IS_ERR(r)) {
        return status_of(r);
    }
    while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS) {
        CHECK(time(NULL) - start < 30);
        ucp_worker_progress(wa);
        ucp_worker_progress(wb);
    }
    ucp_request_free(r);
    return st;
}

/* Progresses both until wb has a message tagged `tag`; 0 if none came
 * within `ms` milliseconds. */
static int probed(ucp_tag_t tag, int ms)
{
    ucp_tag_recv_info_t info;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        ucp_worker_progress(wa);
        ucp_worker_progress(wb);
        if (ucp_tag_probe_nb(wb, tag, ~0ull, 0, &info) != NULL) {
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms) {
            return 0;
        }
    }
}

static ucp_request_param_t force(void)
{
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    return p;
}

int main(void)
{
    ucp_context_h ctx;
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_address_t *addr;
    size_t addr_len;
    ucp_ep_params_t epp = {0};
    ucp_ep_h ab, ba;
    ucp_request_param_t p, plain = {0};
    ucp_tag_recv_info_t info;
    uint64_t word = 0, got = 0;
    char *big = calloc(1, BIG), *bigr = calloc(1, BIG);
    size_t len;
    void *r;

    CHECK(big != NULL && bigr != NULL);
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_STREAM;
    CHECK(ucp_init(&params, NULL, &ctx) == UCS_OK);
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &wa) == UCS_OK);
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_OK);
    epp.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    CHECK(ucp_worker_get_address(wb, &addr, &addr_len) == UCS_OK);
    epp.address = addr;
    CHECK(ucp_ep_create(wa, &epp, &ab) == UCS_OK);
    ucp_worker_release_address(wb, addr);
    CHECK(ucp_worker_get_address(wa, &addr, &addr_len) == UCS_OK);
    epp.address = addr;
    CHECK(ucp_ep_create(wb, &epp, &ba) == UCS_OK);
    ucp_worker_release_address(wa, addr);

    /* Wire both endpoints up with one message each way. */
    CHECK(wait_req(ucp_tag_send_nbx(ab, "hi", 2, 99, &plain)) == UCS_OK);
    CHECK(probed(99, 30000));
    CHECK(wait_req(ucp_tag_recv_nbx(wb, bigr, 2, 99, ~0ull, &plain)) == UCS_OK);
    CHECK(wait_req(ucp_tag_send_nbx(ba, "hi", 2, 98, &plain)) == UCS_OK);

    /* A receive with nothing there: refused, and takes nothing later. */
    p = force();
    r = ucp_tag_recv_nbx(wb, bigr, 8, 1, ~0ull, &p);
    CHECK(status_of(r) == UCS_ERR_NO_RESOURCE);
    /* A small send completes inside its call. */
    p = force();
    CHECK(ucp_tag_send_nbx(ab, "12345678", 8, 1, &p) == NULL);
    CHECK(probed(1, 30000));
    p = force();
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_RECV_INFO;
    p.recv_info.tag_info = &info;
    memset(bigr, 0, 8);
    CHECK(ucp_tag_recv_nbx(wb, bigr, 8, 1, ~0ull, &p) == NULL);
    CHECK(memcmp(bigr, "12345678", 8) == 0);
    CHECK(info.length == 8 && info.sender_tag == 1);
    /* Large and synchronous sends are refused and never arrive. */
    p = force();
    r = ucp_tag_send_nbx(ab, big, BIG, 2, &p);
    CHECK(status_of(r) == UCS_ERR_NO_RESOURCE);
    p = force();
    r = ucp_tag_send_sync_nbx(ab, "x", 1, 3, &p);
    CHECK(status_of(r) == UCS_ERR_NO_RESOURCE);
    CHECK(!probed(2, 50) && !probed(3, 50));

    /* A put from a stack buffer. */
    {
        ucp_mem_map_params_t mp = {0};
        ucp_mem_h mh;
        ucp_mem_attr_t ma = {0};
        ucp_rkey_h rkey;
        void *packed;
        size_t packed_len;
        uint64_t value = 0x0123456789abcdefull;

        mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
        mp.length     = 4096;
        mp.flags      = UCP_MEM_MAP_ALLOCATE;
        CHECK(ucp_mem_map(ctx, &mp, &mh) == UCS_OK);
        ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
        CHECK(ucp_mem_query(mh, &ma) == UCS_OK);
        memset(ma.address, 0, 4096);
        CHECK(ucp_rkey_pack(ctx, mh, &packed, &packed_len) == UCS_OK);
        CHECK(ucp_ep_rkey_unpack(ab, packed, &rkey) == UCS_OK);
        ucp_rkey_buffer_release(packed);
        p = force();
        r = ucp_put_nbx(ab, &value, sizeof(value), (uint64_t)(uintptr_t)ma.address, rkey, &p);
        value = 0; /* the stack buffer is reused at once */
        CHECK(r == NULL || status_of(r) == UCS_ERR_NO_RESOURCE);
        CHECK(wait_req(ucp_worker_flush_nbx(wa, &plain)) == UCS_OK);
        memcpy(&word, ma.address, sizeof(word));
        if (r == NULL) {
            CHECK(word == 0x0123456789abcdefull);
            printf("put: done\n");
        } else {
            CHECK(word == 0);
            printf("put: refused\n");
        }
        ucp_rkey_destroy(rkey);
        CHECK(ucp_mem_unmap(ctx, mh) == UCS_OK);
    }

    /* A stream receive with nothing there, and a stream send too large
     * to leave at once. */
    p = force();
    r = ucp_stream_recv_nbx(ba, &got, sizeof(got), &len, &p);
    CHECK(status_of(r) == UCS_ERR_NO_RESOURCE);
    p = force();
    r = ucp_stream_send_nbx(ab, big, BIG, &p);
    CHECK(status_of(r) == UCS_ERR_NO_RESOURCE);

    /* The receive refused above took nothing: a plain one gets tag 98's
     * message, sent before it. */
    {
        ucp_tag_recv_info_t i2;
        int ok = 0;
        time_t start = time(NULL);
        while (!ok) {
            CHECK(time(NULL) - start < 30);
            ucp_worker_progress(wa);
            ucp_worker_progress(wb);
            ok = ucp_tag_probe_nb(wa, 98, ~0ull, 0, &i2) != NULL;
        }
        CHECK(wait_req(ucp_tag_recv_nbx(wa, bigr, 2, 98, ~0ull, &plain)) == UCS_OK);
        CHECK(memcmp(bigr, "hi", 2) == 0);
    }

    ucp_ep_destroy(ab);
    ucp_ep_destroy(ba);
    ucp_worker_destroy(wa);
    ucp_worker_destroy(wb);
    ucp_cleanup(ctx);
    free(big);
    free(bigr);
    printf("capi_force_imm: ok\n");
    return 0;
}
