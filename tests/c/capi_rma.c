/* rucx's libucp.so: one-sided operations through UCX 1.13's C API, in one
 * process. A context with RMA and 32/64-bit atomics, two workers connected
 * by address (the target's progressed by a thread of its own, so that the
 * initiator's blocking calls may wait on it); memory mapped by allocation
 * and from the program's own memory; packed and unpacked remote keys;
 * put and get in their nbi, nb, nbx and blocking forms with flushes;
 * atomics (post, fetch, nbx) of both widths; ucp_mem_query, ucp_rkey_ptr,
 * ucp_mem_advise; wrong arguments; the UCM calls Open MPI makes. Prints
 * "capi_rma: ok" and exits 0 when every check holds. */
#include <ucp/api/ucp.h>
#include <ucm/api/ucm.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)

#define LEN (64 * 1024)

static ucp_worker_h wa, wb;
static volatile int stop_b;
static int n_cb;
static void *cb_data;
static uint64_t user_mem[LEN / 8];

static void *progress_b(void *arg)
{
    (void)arg;
    while (!stop_b) {
        ucp_worker_progress(wb);
    }
    return NULL;
}

static void send_cb(void *req, ucs_status_t status, void *user_data)
{
    (void)req;
    CHECK(status == UCS_OK);
    n_cb++;
    cb_data = user_data;
}

static void legacy_cb(void *req, ucs_status_t status)
{
    (void)req;
    CHECK(status == UCS_OK);
    n_cb++;
}

/* Waits for what an operation returned; its final status. */
static ucs_status_t wait_req(void *r)
{
    ucs_status_t st;
    time_t start = time(NULL);
    if (r == NULL) {
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        return UCS_PTR_STATUS(r);
    }
    while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS) {
        CHECK(time(NULL) - start < 30);
        ucp_worker_progress(wa);
    }
    ucp_request_free(r);
    return st;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)(i * 7 + seed);
    }
}

/* A word of the target's memory (read after the operation completed). */
static uint64_t load64(void *base, size_t off)
{
    uint64_t v;
    memcpy(&v, (char *)base + off, 8);
    return v;
}

static uint32_t load32(void *base, size_t off)
{
    uint32_t v;
    memcpy(&v, (char *)base + off, 4);
    return v;
}

static void store64(void *base, size_t off, uint64_t v)
{
    memcpy((char *)base + off, &v, 8);
}

/* Transfers between a local buffer and the target's memory at `base`. */
static void transfers(ucp_ep_h ep, ucp_rkey_h rkey, uint8_t *base, const char *what)
{
    static uint8_t src[LEN], dst[LEN];
    uint64_t raddr = (uint64_t)(uintptr_t)base;
    ucs_status_t st;
    void *r;

    /* put_nbi + worker flush, get_nbi + ep flush. */
    fill(src, LEN, 1);
    st = ucp_put_nbi(ep, src, LEN, raddr, rkey);
    CHECK(st == UCS_OK || st == UCS_INPROGRESS);
    CHECK(ucp_worker_flush(wa) == UCS_OK);
    CHECK(memcmp(base, src, LEN) == 0);
    memset(dst, 0, LEN);
    st = ucp_get_nbi(ep, dst + 1, LEN - 100, raddr + 100, rkey);
    CHECK(st == UCS_OK || st == UCS_INPROGRESS);
    CHECK(ucp_ep_flush(ep) == UCS_OK);
    CHECK(memcmp(dst + 1, src + 100, LEN - 100) == 0);

    /* nbx with a callback, a request asked for even if done at once. */
    {
        ucp_request_param_t p = {0};
        int before = n_cb;
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        p.cb.send      = send_cb;
        p.user_data    = (void *)0x1234;
        fill(src, LEN, 2);
        r = ucp_put_nbx(ep, src, LEN, raddr, rkey, &p);
        CHECK(r != NULL && !UCS_PTR_IS_ERR(r));
        CHECK(wait_req(r) == UCS_OK);
        CHECK(n_cb == before + 1 && cb_data == (void *)0x1234);
        CHECK(memcmp(base, src, LEN) == 0);
        memset(dst, 0, LEN);
        r = ucp_get_nbx(ep, dst, 4096, raddr + 8, rkey, &p);
        CHECK(wait_req(r) == UCS_OK);
        CHECK(n_cb == before + 2);
        CHECK(memcmp(dst, src + 8, 4096) == 0);
        /* Elements of 8 bytes. */
        p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
        p.datatype     = ucp_dt_make_contig(8);
        memset(dst, 0, LEN);
        CHECK(wait_req(ucp_get_nbx(ep, dst, 16, raddr, rkey, &p)) == UCS_OK);
        CHECK(memcmp(dst, src, 128) == 0 && dst[128] == 0);
        /* Other datatypes are refused with a status. */
        p.datatype = ucp_dt_make_iov();
        r = ucp_put_nbx(ep, src, 1, raddr, rkey, &p);
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_UNSUPPORTED);
    }

    /* Legacy nb with a callback, and the blocking calls. */
    fill(src, LEN, 3);
    r = ucp_put_nb(ep, src, 1000, raddr + 3, rkey, legacy_cb);
    CHECK(wait_req(r) == UCS_OK);
    memset(dst, 0, LEN);
    r = ucp_get_nb(ep, dst, 1000, raddr + 3, rkey, legacy_cb);
    CHECK(wait_req(r) == UCS_OK);
    CHECK(memcmp(dst, src, 1000) == 0);
    fill(src, LEN, 4);
    CHECK(ucp_put(ep, src, LEN, raddr, rkey) == UCS_OK);
    CHECK(memcmp(base, src, LEN) == 0);
    memset(dst, 0, LEN);
    CHECK(ucp_get(ep, dst, LEN, raddr, rkey) == UCS_OK);
    CHECK(memcmp(dst, src, LEN) == 0);
    CHECK(ucp_put(ep, src, 0, raddr, rkey) == UCS_OK);

    /* Outside the mapped range: a status, from the call or the flush. */
    st = ucp_put(ep, src, 16, raddr + LEN - 8, rkey);
    CHECK(st != UCS_OK);
    printf("%s: transfers ok (past the end: %s)\n", what, ucs_status_string(st));
}

/* Atomics on the target's words at `base` (offset 0: 64 bits, 8: 32). */
static void atomics(ucp_ep_h ep, ucp_rkey_h rkey, uint8_t *base, const char *what)
{
    uint64_t raddr = (uint64_t)(uintptr_t)base;
    uint64_t r64;
    uint32_t r32[2];
    void *r;

    store64(base, 0, 100);
    store64(base, 8, 0);
    store64(base, 16, 0);

    /* Posted: ADD, XOR on both widths, applied by the flush. */
    CHECK(ucp_atomic_post(ep, UCP_ATOMIC_POST_OP_ADD, 5, 8, raddr, rkey) == UCS_OK);
    CHECK(ucp_atomic_post(ep, UCP_ATOMIC_POST_OP_ADD, 7, 4, raddr + 8, rkey) == UCS_OK);
    CHECK(ucp_atomic_post(ep, UCP_ATOMIC_POST_OP_XOR, 1, 4, raddr + 8, rkey) == UCS_OK);
    CHECK(ucp_worker_flush(wa) == UCS_OK);
    CHECK(load64(base, 0) == 105);
    CHECK(load32(base, 8) == 6);
    CHECK(load32(base, 12) == 0);

    /* Fetching, legacy: FADD 64, SWAP 32 (4 bytes written, no more),
     * CSWAP 64 (value compared, *result swapped in). */
    r64 = 0;
    r = ucp_atomic_fetch_nb(ep, UCP_ATOMIC_FETCH_OP_FADD, 10, &r64, 8, raddr, rkey,
                            legacy_cb);
    CHECK(wait_req(r) == UCS_OK);
    CHECK(r64 == 105 && load64(base, 0) == 115);
    r32[0] = 0;
    r32[1] = 0xdeadbeef;
    r = ucp_atomic_fetch_nb(ep, UCP_ATOMIC_FETCH_OP_SWAP, 0x77, r32, 4, raddr + 8, rkey,
                            legacy_cb);
    CHECK(wait_req(r) == UCS_OK);
    CHECK(r32[0] == 6 && r32[1] == 0xdeadbeef && load32(base, 8) == 0x77);
    r64 = 0x5555;
    r = ucp_atomic_fetch_nb(ep, UCP_ATOMIC_FETCH_OP_CSWAP, 115, &r64, 8, raddr, rkey,
                            legacy_cb);
    CHECK(wait_req(r) == UCS_OK);
    CHECK(r64 == 115 && load64(base, 0) == 0x5555);
    r64 = 1;
    r = ucp_atomic_fetch_nb(ep, UCP_ATOMIC_FETCH_OP_CSWAP, 999, &r64, 8, raddr, rkey,
                            legacy_cb);
    CHECK(wait_req(r) == UCS_OK);
    CHECK(r64 == 0x5555 && load64(base, 0) == 0x5555);

    /* nbx: posted ADD 32; FADD 64, SWAP 32 and CSWAP 32 into the reply
     * buffer. */
    {
        ucp_request_param_t p = {0};
        uint64_t v64;
        uint32_t v32;
        p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
        p.datatype     = ucp_dt_make_contig(4);
        v32 = 3;
        r = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &v32, 1, raddr + 8, rkey, &p);
        CHECK(wait_req(r) == UCS_OK);
        CHECK(load32(base, 8) == 0x7a);

        p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER |
                         UCP_OP_ATTR_FIELD_CALLBACK;
        p.cb.send      = send_cb;
        p.datatype     = ucp_dt_make_contig(8);
        p.reply_buffer = &r64;
        v64 = 0x100;
        r = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &v64, 1, raddr, rkey, &p);
        CHECK(wait_req(r) == UCS_OK);
        CHECK(r64 == 0x5555 && load64(base, 0) == 0x5655);

        p.datatype     = ucp_dt_make_contig(4);
        p.reply_buffer = r32;
        r32[1] = 0xdeadbeef;
        v32 = 9;
        r = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_SWAP, &v32, 1, raddr + 8, rkey, &p);
        CHECK(wait_req(r) == UCS_OK);
        CHECK(r32[0] == 0x7a && r32[1] == 0xdeadbeef && load32(base, 8) == 9);

        v32 = 9;         /* compared */
        r32[0] = 0xabc;  /* swapped in */
        r = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_CSWAP, &v32, 1, raddr + 8, rkey, &p);
        CHECK(wait_req(r) == UCS_OK);
        CHECK(r32[0] == 9 && load32(base, 8) == 0xabc);
        v32 = 1;
        r32[0] = 0x111;
        r = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_CSWAP, &v32, 1, raddr + 8, rkey, &p);
        CHECK(wait_req(r) == UCS_OK);
        CHECK(r32[0] == 0xabc && load32(base, 8) == 0xabc);
        CHECK(load32(base, 12) == 0 && load64(base, 16) == 0);

        /* Wrong arguments: statuses. */
        p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
        r = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_CSWAP, &v32, 1, raddr + 8, rkey, &p);
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
        p.op_attr_mask = 0;
        r = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &v32, 1, raddr + 8, rkey, &p);
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
        r = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &v32, 1, raddr + 8, rkey, NULL);
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    }
    CHECK(ucp_atomic_post(ep, UCP_ATOMIC_POST_OP_ADD, 1, 3, raddr, rkey) ==
          UCS_ERR_INVALID_PARAM);
    CHECK(ucp_atomic_post(ep, UCP_ATOMIC_POST_OP_LAST, 1, 8, raddr, rkey) ==
          UCS_ERR_INVALID_PARAM);
    r = ucp_atomic_fetch_nb(ep, UCP_ATOMIC_FETCH_OP_FADD, 1, NULL, 8, raddr, rkey, NULL);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    printf("%s: atomics ok\n", what);
}

/* Maps target memory with `params`, unpacks its key on `ep`, runs
 * everything on it, and unmaps it. */
static void region(ucp_context_h ctx, ucp_ep_h ep, ucp_mem_map_params_t *params,
                   const char *what)
{
    ucp_mem_h mh;
    ucp_mem_attr_t attr = {0};
    void *packed;
    size_t packed_len;
    ucp_rkey_h rkey;
    void *ptr;
    ucs_status_t st;

    CHECK(ucp_mem_map(ctx, params, &mh) == UCS_OK);
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH |
                      UCP_MEM_ATTR_FIELD_MEM_TYPE;
    attr.mem_type = UCS_MEMORY_TYPE_CUDA;
    CHECK(ucp_mem_query(mh, &attr) == UCS_OK);
    CHECK(attr.address != NULL && attr.length == LEN);
    CHECK(attr.mem_type == UCS_MEMORY_TYPE_HOST);
    if (params->field_mask & UCP_MEM_MAP_PARAM_FIELD_ADDRESS && params->address) {
        CHECK(attr.address == params->address);
    }
    {
        ucp_mem_advise_params_t adv = {0};
        adv.field_mask = UCP_MEM_ADVISE_PARAM_FIELD_ADDRESS |
                         UCP_MEM_ADVISE_PARAM_FIELD_LENGTH |
                         UCP_MEM_ADVISE_PARAM_FIELD_ADVICE;
        adv.address = attr.address;
        adv.length  = LEN;
        adv.advice  = UCP_MADV_WILLNEED;
        CHECK(ucp_mem_advise(ctx, mh, &adv) == UCS_OK);
        CHECK(ucp_mem_advise(ctx, mh, NULL) == UCS_ERR_INVALID_PARAM);
    }

    CHECK(ucp_rkey_pack(ctx, mh, &packed, &packed_len) == UCS_OK);
    CHECK(packed != NULL && packed_len > 8);
    CHECK(ucp_ep_rkey_unpack(ep, packed, &rkey) == UCS_OK);
    {
        /* A key whose body is damaged is refused with a status. */
        uint8_t *bad = malloc(packed_len);
        ucp_rkey_h k;
        memcpy(bad, packed, packed_len);
        for (size_t i = 8; i < packed_len; i++) {
            bad[i] ^= 0xa5;
        }
        CHECK(ucp_ep_rkey_unpack(ep, bad, &k) != UCS_OK);
        free(bad);
    }

    transfers(ep, rkey, attr.address, what);
    atomics(ep, rkey, attr.address, what);

    /* Direct access: a pointer to the same bytes, or UNREACHABLE. */
    ptr = NULL;
    st = ucp_rkey_ptr(rkey, (uint64_t)(uintptr_t)attr.address + 16, &ptr);
    CHECK(st == UCS_OK || st == UCS_ERR_UNREACHABLE);
    if (st == UCS_OK) {
        CHECK(ptr != NULL && memcmp(ptr, (char *)attr.address + 16, 64) == 0);
    }
    printf("%s: ucp_rkey_ptr: %s\n", what, ucs_status_string(st));

    /* The program reports the memory is going: nothing breaks. */
    ucm_vm_munmap(attr.address, LEN);
    CHECK(ucp_put(ep, "x", 1, (uint64_t)(uintptr_t)attr.address, rkey) == UCS_OK);

    ucp_rkey_destroy(rkey);
    ucp_rkey_buffer_release(packed);
    CHECK(ucp_mem_unmap(ctx, mh) == UCS_OK);
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
    ucp_mem_map_params_t mp = {0};
    ucp_mem_h mh;
    ucp_rkey_h rkey;
    pthread_t thread;
    void *p;

    CHECK(sizeof(ucs_status_t) == 1);

    /* What Open MPI's common UCX component calls first. */
    ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
    CHECK(ucm_test_events(UCM_EVENT_VM_UNMAPPED) == UCS_OK);
    CHECK(ucm_test_external_events(UCM_EVENT_VM_UNMAPPED) == UCS_OK);
    ucm_vm_munmap(user_mem, sizeof(user_mem));

    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64;
    CHECK(ucp_init(&params, NULL, &ctx) == UCS_OK);
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &wa) == UCS_OK);
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_OK);
    CHECK(ucp_worker_get_address(wb, &addr_b, &addr_b_len) == UCS_OK);
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address    = addr_b;
    CHECK(ucp_ep_create(wa, &ep_params, &ep) == UCS_OK);
    /* From here on, only the thread touches wb. */
    CHECK(pthread_create(&thread, NULL, progress_b, NULL) == 0);

    /* Wrong arguments: statuses, not crashes. */
    CHECK(ucp_mem_map(ctx, NULL, &mh) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_mem_map(NULL, &mp, &mh) == UCS_ERR_INVALID_PARAM);
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.length     = LEN;
    CHECK(ucp_mem_map(ctx, &mp, &mh) == UCS_ERR_INVALID_PARAM); /* no address */
    CHECK(ucp_mem_query(NULL, &(ucp_mem_attr_t){0}) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_rkey_pack(ctx, NULL, &p, &addr_b_len) == UCS_ERR_INVALID_PARAM);
    {
        char junk[64] = "certainly not a remote key";
        CHECK(ucp_ep_rkey_unpack(ep, junk, &rkey) == UCS_ERR_INVALID_PARAM);
        CHECK(ucp_ep_rkey_unpack(ep, NULL, &rkey) == UCS_ERR_INVALID_PARAM);
    }
    CHECK(ucp_put_nbi(ep, "x", 1, 0, NULL) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_put(NULL, "x", 1, 0, NULL) == UCS_ERR_INVALID_PARAM);
    p = ucp_get_nbx(ep, user_mem, 1, 0, NULL, &(ucp_request_param_t){0});
    CHECK(UCS_PTR_IS_ERR(p) && UCS_PTR_STATUS(p) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_rkey_ptr(NULL, 0, &p) == UCS_ERR_INVALID_PARAM);
    ucp_rkey_destroy(NULL);
    ucp_rkey_buffer_release(NULL);

    /* A map of 0 bytes: its key carries only operations of 0 bytes. */
    {
        void *packed;
        size_t len;
        mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        mp.address    = user_mem;
        mp.length     = 0;
        CHECK(ucp_mem_map(ctx, &mp, &mh) == UCS_OK);
        CHECK(ucp_rkey_pack(ctx, mh, &packed, &len) == UCS_OK);
        CHECK(ucp_ep_rkey_unpack(ep, packed, &rkey) == UCS_OK);
        CHECK(ucp_put_nbi(ep, "x", 0, (uint64_t)(uintptr_t)user_mem, rkey) == UCS_OK);
        CHECK(ucp_put(ep, "x", 1, (uint64_t)(uintptr_t)user_mem, rkey) ==
              UCS_ERR_INVALID_PARAM);
        CHECK(ucp_rkey_ptr(rkey, (uint64_t)(uintptr_t)user_mem, &p) ==
              UCS_ERR_UNREACHABLE);
        ucp_rkey_destroy(rkey);
        ucp_rkey_buffer_release(packed);
        CHECK(ucp_mem_unmap(ctx, mh) == UCS_OK);
    }

    /* Memory the library allocates, then the program's own. */
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                    UCP_MEM_MAP_PARAM_FIELD_PROT | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    mp.address     = NULL;
    mp.length      = LEN;
    mp.flags       = UCP_MEM_MAP_ALLOCATE;
    mp.prot        = UCP_MEM_MAP_PROT_REMOTE_READ | UCP_MEM_MAP_PROT_REMOTE_WRITE |
                     UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE;
    mp.memory_type = UCS_MEMORY_TYPE_HOST;
    region(ctx, ep, &mp, "allocated");
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address    = user_mem;
    region(ctx, ep, &mp, "user");

    /* Read-only memory refuses a put (a status, from the call). */
    {
        void *packed;
        size_t len;
        mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                        UCP_MEM_MAP_PARAM_FIELD_PROT;
        mp.prot       = UCP_MEM_MAP_PROT_REMOTE_READ;
        CHECK(ucp_mem_map(ctx, &mp, &mh) == UCS_OK);
        CHECK(ucp_rkey_pack(ctx, mh, &packed, &len) == UCS_OK);
        CHECK(ucp_ep_rkey_unpack(ep, packed, &rkey) == UCS_OK);
        CHECK(ucp_put(ep, "x", 1, (uint64_t)(uintptr_t)user_mem, rkey) != UCS_OK);
        CHECK(ucp_get(ep, &len, 1, (uint64_t)(uintptr_t)user_mem, rkey) == UCS_OK);
        ucp_rkey_destroy(rkey);
        ucp_rkey_buffer_release(packed);
        CHECK(ucp_mem_unmap(ctx, mh) == UCS_OK);
    }

    CHECK(ucp_worker_flush(wa) == UCS_OK);
    {
        ucp_request_param_t cp = {0};
        CHECK(wait_req(ucp_ep_close_nbx(ep, &cp)) == UCS_OK);
    }
    stop_b = 1;
    CHECK(pthread_join(thread, NULL) == 0);
    ucp_worker_release_address(wb, addr_b);
    ucp_worker_destroy(wa);
    ucp_worker_destroy(wb);
    ucp_cleanup(ctx);
    printf("capi_rma: ok (%d callbacks)\n", n_cb);
    return 0;
}
