/* rucx's libucp.so: the queries and small entry points of UCX 1.13's API,
 * in one process. ucp_lib_query, libucs's name tables, the blocking atomics
 * of ucp_compat.h (32 and 64 bits, every result checked) against a second
 * worker progressed by a thread of its own, ucp_worker_address_query,
 * ucp_ep_query (name; socket addresses of a client and a server endpoint,
 * UCS_ERR_NOT_CONNECTED for one made from an address), ucp_ep_evaluate_perf,
 * ucp_ep_modify_nb (its statuses, and a replaced error handler that runs),
 * ucp_request_alloc, ucp_request_query (its debug string within the
 * worker's max_debug_string, 200 as UCX 1.13's), ucp_mem_print_info and
 * ucp_worker_wait_mem; wrong arguments. Prints "capi_misc: ok" and exits 0
 * when every check holds. */
#include <ucp/api/ucp.h>
#include <ucs/memory/memory_type.h>
#include <ucs/type/thread_mode.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)

static ucp_worker_h wa, wb;
static volatile int stop_b;
static ucp_ep_h volatile server_ep;
static int n_err;
static void *err_arg;
static ucs_status_t err_status;

static void *progress_b(void *arg)
{
    (void)arg;
    while (!stop_b) {
        ucp_worker_progress(wb);
    }
    return NULL;
}

/* Waits for what an operation returned, progressing wa; its status. */
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

/* The blocking atomics on the target's memory at base. */
static void atomics(ucp_ep_h ep, ucp_rkey_h rkey, char *base)
{
    uint64_t raddr = (uint64_t)(uintptr_t)base;
    uint64_t r64;
    uint32_t r32;

    store64(base, 0, 10);
    store64(base, 8, 0xa5a5a5a5a5a5a5a5ull);
    store64(base, 16, 7);  /* low half is the 32-bit word, high half stays */
    CHECK(ucp_atomic_add64(ep, 5, raddr, rkey) == UCS_OK);
    CHECK(ucp_atomic_add32(ep, 3, raddr + 16, rkey) == UCS_OK);
    CHECK(ucp_worker_flush(wa) == UCS_OK);
    CHECK(load64(base, 0) == 15);
    CHECK(load32(base, 16) == 10);
    CHECK(load32(base, 20) == 0);
    CHECK(load64(base, 8) == 0xa5a5a5a5a5a5a5a5ull);

    CHECK(ucp_atomic_fadd64(ep, 1ull << 40, raddr, rkey, &r64) == UCS_OK);
    CHECK(r64 == 15);
    CHECK(load64(base, 0) == 15 + (1ull << 40));
    CHECK(ucp_atomic_fadd32(ep, 0xfffffffe, raddr + 16, rkey, &r32) == UCS_OK);
    CHECK(r32 == 10);
    CHECK(load32(base, 16) == 8);   /* wrapped at 32 bits */
    CHECK(load32(base, 20) == 0);

    CHECK(ucp_atomic_swap64(ep, 0x1122334455667788ull, raddr, rkey, &r64) == UCS_OK);
    CHECK(r64 == 15 + (1ull << 40));
    CHECK(load64(base, 0) == 0x1122334455667788ull);
    CHECK(ucp_atomic_swap32(ep, 0xdeadbeef, raddr + 16, rkey, &r32) == UCS_OK);
    CHECK(r32 == 8);
    CHECK(load32(base, 16) == 0xdeadbeef);
    CHECK(load32(base, 20) == 0);

    /* Compare-and-swap: applied when equal, the old value either way. */
    CHECK(ucp_atomic_cswap64(ep, 0x1122334455667788ull, 42, raddr, rkey, &r64) == UCS_OK);
    CHECK(r64 == 0x1122334455667788ull);
    CHECK(load64(base, 0) == 42);
    CHECK(ucp_atomic_cswap64(ep, 41, 99, raddr, rkey, &r64) == UCS_OK);
    CHECK(r64 == 42);
    CHECK(load64(base, 0) == 42);
    CHECK(ucp_atomic_cswap32(ep, 0xdeadbeef, 77, raddr + 16, rkey, &r32) == UCS_OK);
    CHECK(r32 == 0xdeadbeef);
    CHECK(load32(base, 16) == 77);
    CHECK(ucp_atomic_cswap32(ep, 76, 1, raddr + 16, rkey, &r32) == UCS_OK);
    CHECK(r32 == 77);
    CHECK(load32(base, 16) == 77);
    CHECK(load32(base, 20) == 0);
    CHECK(load64(base, 8) == 0xa5a5a5a5a5a5a5a5ull);

    /* Wrong arguments: a status, and the result untouched. */
    r64 = 5;
    r32 = 6;
    CHECK(ucp_atomic_fadd64(ep, 1, raddr, rkey, NULL) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_atomic_swap32(NULL, 1, raddr, rkey, &r32) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_atomic_cswap64(ep, 1, 2, raddr, NULL, &r64) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_atomic_add32(ep, 1, raddr, NULL) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_atomic_add64(NULL, 1, raddr, rkey) == UCS_ERR_INVALID_PARAM);
    CHECK(r64 == 5 && r32 == 6);
    CHECK(load64(base, 0) == 42);
    printf("atomics ok\n");
}

static void on_conn(ucp_conn_request_h req, void *arg)
{
    ucp_ep_params_t p = {0};
    ucp_ep_h ep;
    (void)arg;
    p.field_mask   = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    p.conn_request = req;
    CHECK(ucp_ep_create(wb, &p, &ep) == UCS_OK);
    server_ep = ep;
}

static void on_err(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    n_err++;
    err_arg    = arg;
    err_status = status;
}

static void on_err_old(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg;
    (void)ep;
    (void)status;
    CHECK(!"the replaced error handler ran");
}

static int port_of(const struct sockaddr_storage *s)
{
    CHECK(s->ss_family == AF_INET);
    return ntohs(((const struct sockaddr_in *)s)->sin_port);
}

static int is_loopback(const struct sockaddr_storage *s)
{
    return ((const struct sockaddr_in *)s)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
}

/* ucp_ep_query's socket addresses on a client and a server endpoint. */
static void sockaddrs(void)
{
    struct sockaddr_in sin = {0};
    ucp_listener_params_t lp = {0};
    ucp_listener_attr_t la = {0};
    ucp_listener_h listener;
    ucp_ep_params_t p = {0};
    ucp_ep_attr_t c = {0}, s = {0};
    ucp_request_param_t cp = {0};
    ucp_ep_h ep;
    time_t start = time(NULL);
    int port;

    sin.sin_family      = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lp.field_mask       = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                          UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr    = (struct sockaddr *)&sin;
    lp.sockaddr.addrlen = sizeof(sin);
    lp.conn_handler.cb  = on_conn;
    CHECK(ucp_listener_create(wb, &lp, &listener) == UCS_OK);
    la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    CHECK(ucp_listener_query(listener, &la) == UCS_OK);
    port = port_of(&la.sockaddr);

    sin.sin_port        = htons(port);
    p.field_mask        = UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_FLAGS;
    p.flags             = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr     = (struct sockaddr *)&sin;
    p.sockaddr.addrlen  = sizeof(sin);
    CHECK(ucp_ep_create(wa, &p, &ep) == UCS_OK);
    /* Waits for the connection (the thread progresses the server). */
    c.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR | UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR;
    CHECK(ucp_ep_query(ep, &c) == UCS_OK);
    CHECK(port_of(&c.remote_sockaddr) == port);
    CHECK(is_loopback(&c.remote_sockaddr) && is_loopback(&c.local_sockaddr));
    CHECK(port_of(&c.local_sockaddr) != port);
    while (server_ep == NULL) {
        CHECK(time(NULL) - start < 30);
        ucp_worker_progress(wa);
    }
    s.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR | UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR;
    CHECK(ucp_ep_query(server_ep, &s) == UCS_OK);
    CHECK(port_of(&s.local_sockaddr) == port);
    CHECK(port_of(&s.remote_sockaddr) == port_of(&c.local_sockaddr));
    /* Only the field asked for is written. */
    memset(&s, 0x5a, sizeof(s));
    s.field_mask = UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR;
    CHECK(ucp_ep_query(ep, &s) == UCS_OK);
    CHECK(port_of(&s.remote_sockaddr) == port);
    CHECK(((unsigned char *)&s.local_sockaddr)[0] == 0x5a);

    CHECK(wait_req(ucp_ep_close_nbx(ep, &cp)) == UCS_OK);
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    cp.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    CHECK(wait_req(ucp_ep_close_nbx(server_ep, &cp)) == UCS_OK);
    ucp_listener_destroy(listener);
    printf("sockaddrs ok\n");
}

/* ucp_ep_modify_nb: a new error handler and user data, used when the
 * endpoint fails (a client's connect to a port nobody listens on). */
static void modify(ucp_ep_h ep)
{
    struct sockaddr_in sin = {0};
    ucp_ep_params_t p = {0};
    ucp_request_param_t cp = {0};
    ucp_ep_h bad;
    time_t start = time(NULL);
    void *r;

    p.field_mask = UCP_EP_PARAM_FIELD_USER_DATA;
    p.user_data  = (void *)0x77;
    CHECK(ucp_ep_modify_nb(ep, &p) == NULL);
    p.field_mask = UCP_EP_PARAM_FIELD_NAME | UCP_EP_PARAM_FIELD_FLAGS;
    p.name       = "ignored";
    CHECK(ucp_ep_modify_nb(ep, &p) == NULL);
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    r = ucp_ep_modify_nb(ep, &p);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    p.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    r = ucp_ep_modify_nb(ep, &p);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    p.field_mask = UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_USER_DATA;
    r = ucp_ep_modify_nb(ep, &p);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    r = ucp_ep_modify_nb(ep, NULL);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
    r = ucp_ep_modify_nb(NULL, &p);
    CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);

    /* A listener's port, closed again: nobody listens there. */
    {
        ucp_listener_params_t lp = {0};
        ucp_listener_attr_t la = {0};
        ucp_listener_h l;
        sin.sin_family      = AF_INET;
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        lp.field_mask       = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                              UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
        lp.sockaddr.addr    = (struct sockaddr *)&sin;
        lp.sockaddr.addrlen = sizeof(sin);
        lp.conn_handler.cb  = on_conn;
        CHECK(ucp_listener_create(wa, &lp, &l) == UCS_OK);
        la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
        CHECK(ucp_listener_query(l, &la) == UCS_OK);
        sin.sin_port = htons(port_of(&la.sockaddr));
        ucp_listener_destroy(l);
    }
    memset(&p, 0, sizeof(p));
    p.field_mask         = UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_FLAGS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                           UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.flags              = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr      = (struct sockaddr *)&sin;
    p.sockaddr.addrlen   = sizeof(sin);
    p.err_mode           = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb     = on_err_old;
    p.err_handler.arg    = (void *)0x1;
    CHECK(ucp_ep_create(wa, &p, &bad) == UCS_OK);
    p.field_mask      = UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_USER_DATA;
    p.err_handler.cb  = on_err;
    p.err_handler.arg = (void *)0x2;
    p.user_data       = (void *)0x3;   /* wins over err_handler.arg */
    CHECK(ucp_ep_modify_nb(bad, &p) == NULL);
    while (n_err == 0) {
        CHECK(time(NULL) - start < 30);
        ucp_worker_progress(wa);
    }
    CHECK(n_err == 1 && err_arg == (void *)0x3 && err_status != UCS_OK);
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    cp.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    CHECK(wait_req(ucp_ep_close_nbx(bad, &cp)) == UCS_OK);
    printf("modify ok (%s)\n", ucs_status_string(err_status));
}

/* ucp_request_query on a receive in flight, canceled, and completed. */
static void requests(ucp_ep_h ep)
{
    ucp_request_param_t rp = {0};
    ucp_request_attr_t a;
    ucp_worker_attr_t wq = {0};
    char text[256], small[4];
    uint64_t buf = 0, msg = 0x0102030405060708ull;
    time_t start = time(NULL);
    void *r;

    CHECK(ucp_request_alloc(wa) == NULL);   /* as UCX 1.13's */

    /* The longest request debug string, 200 as UCX 1.13's. */
    wq.field_mask = UCP_WORKER_ATTR_FIELD_MAX_INFO_STRING;
    CHECK(ucp_worker_query(wa, &wq) == UCS_OK);
    printf("max_debug_string %zu\n", wq.max_debug_string);
    CHECK(wq.max_debug_string == 200);
    CHECK(wq.max_debug_string <= sizeof(text));

    r = ucp_tag_recv_nbx(wa, &buf, sizeof(buf), 1, (ucp_tag_t)-1, &rp);
    CHECK(r != NULL && !UCS_PTR_IS_ERR(r));
    memset(&a, 0, sizeof(a));
    a.field_mask        = UCP_REQUEST_ATTR_FIELD_STATUS | UCP_REQUEST_ATTR_FIELD_MEM_TYPE |
                          UCP_REQUEST_ATTR_FIELD_INFO_STRING |
                          UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE;
    a.debug_string      = text;
    a.debug_string_size = sizeof(text);
    a.mem_type          = 99;
    CHECK(ucp_request_query(r, &a) == UCS_OK);
    CHECK(a.status == UCS_INPROGRESS);
    CHECK(a.mem_type == UCS_MEMORY_TYPE_HOST);
    CHECK(strlen(text) > 0 && strstr(text, "in progress") != NULL);
    CHECK(strlen(text) < wq.max_debug_string);
    printf("request in flight: '%s'\n", text);
    /* A string cut to the buffer, and its size required. */
    a.field_mask        = UCP_REQUEST_ATTR_FIELD_INFO_STRING |
                          UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE;
    a.debug_string      = small;
    a.debug_string_size = sizeof(small);
    CHECK(ucp_request_query(r, &a) == UCS_OK);
    CHECK(strlen(small) == sizeof(small) - 1);
    a.field_mask = UCP_REQUEST_ATTR_FIELD_INFO_STRING;
    CHECK(ucp_request_query(r, &a) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_request_query(r, NULL) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_request_query(NULL, &a) == UCS_ERR_INVALID_PARAM);
    a.field_mask = 0;
    CHECK(ucp_request_query(r, &a) == UCS_OK);

    ucp_request_cancel(wa, r);
    a.field_mask        = UCP_REQUEST_ATTR_FIELD_STATUS | UCP_REQUEST_ATTR_FIELD_INFO_STRING |
                          UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE;
    a.debug_string      = text;
    a.debug_string_size = sizeof(text);
    CHECK(ucp_request_query(r, &a) == UCS_OK);
    CHECK(a.status == UCS_ERR_CANCELED);
    CHECK(strstr(text, "completed") != NULL);
    ucp_request_free(r);

    /* A receive on the target's worker, completed by a send to it. */
    r = ucp_tag_recv_nbx(wb, &buf, sizeof(buf), 2, (ucp_tag_t)-1, &rp);
    CHECK(r != NULL && !UCS_PTR_IS_ERR(r));
    CHECK(wait_req(ucp_tag_send_nbx(ep, &msg, sizeof(msg), 2, &rp)) == UCS_OK);
    a.field_mask = UCP_REQUEST_ATTR_FIELD_STATUS;
    do {
        CHECK(time(NULL) - start < 30);
        CHECK(ucp_request_query(r, &a) == UCS_OK);
    } while (a.status == UCS_INPROGRESS);
    CHECK(a.status == UCS_OK && buf == msg);
    a.field_mask = UCP_REQUEST_ATTR_FIELD_INFO_STRING |
                   UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE;
    CHECK(ucp_request_query(r, &a) == UCS_OK);
    CHECK(strstr(text, "length 8") != NULL);
    printf("request completed: '%s'\n", text);
    ucp_request_free(r);
}

int main(void)
{
    ucp_context_h ctx;
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_lib_attr_t lib;
    ucp_address_t *addr_a, *addr_b;
    size_t len_a, len_b;
    ucp_worker_address_attr_t wa_attr = {0}, wb_attr = {0};
    ucp_ep_params_t ep_params = {0};
    ucp_ep_attr_t ep_attr;
    ucp_ep_evaluate_perf_param_t pp = {0};
    ucp_ep_evaluate_perf_attr_t pa = {0};
    ucp_mem_map_params_t mp = {0};
    ucp_mem_attr_t ma = {0};
    ucp_mem_h mh;
    ucp_rkey_h rkey;
    ucp_ep_h ep;
    pthread_t thread;
    void *packed;
    size_t packed_len;
    char name[64];
    double t_small, t_large;
    volatile uint64_t word = 0;

    /* The library and libucs's names. */
    lib.field_mask       = UCP_LIB_ATTR_FIELD_MAX_THREAD_LEVEL;
    lib.max_thread_level = UCS_THREAD_MODE_LAST;
    CHECK(ucp_lib_query(&lib) == UCS_OK);
    CHECK(lib.max_thread_level == UCS_THREAD_MODE_MULTI);
    lib.field_mask       = 0;
    lib.max_thread_level = UCS_THREAD_MODE_LAST;
    CHECK(ucp_lib_query(&lib) == UCS_OK);
    CHECK(lib.max_thread_level == UCS_THREAD_MODE_LAST);
    CHECK(ucp_lib_query(NULL) == UCS_ERR_INVALID_PARAM);
    CHECK(strcmp(ucs_thread_mode_names[UCS_THREAD_MODE_SINGLE], "single") == 0);
    CHECK(strcmp(ucs_thread_mode_names[UCS_THREAD_MODE_SERIALIZED], "serialized") == 0);
    CHECK(strcmp(ucs_thread_mode_names[UCS_THREAD_MODE_MULTI], "multi") == 0);
    CHECK(strcmp(ucs_memory_type_names[UCS_MEMORY_TYPE_HOST], "host") == 0);
    CHECK(strcmp(ucs_memory_type_names[UCS_MEMORY_TYPE_CUDA], "cuda") == 0);
    CHECK(strcmp(ucs_memory_type_names[UCS_MEMORY_TYPE_CUDA_MANAGED], "cuda-managed") == 0);
    CHECK(strcmp(ucs_memory_type_names[UCS_MEMORY_TYPE_ROCM], "rocm") == 0);
    CHECK(strcmp(ucs_memory_type_names[UCS_MEMORY_TYPE_ROCM_MANAGED], "rocm-managed") == 0);
    CHECK(strcmp(ucs_memory_type_names[UCS_MEMORY_TYPE_UNKNOWN], "unknown") == 0);
    CHECK(ucs_memory_type_names[UCS_MEMORY_TYPE_LAST + 1] == NULL);
    CHECK(strcmp(ucs_memory_type_descs[UCS_MEMORY_TYPE_HOST], "System memory") == 0);
    CHECK(strcmp(ucs_memory_type_descs[UCS_MEMORY_TYPE_ROCM], "AMD/ROCm GPU memory") == 0);
    CHECK(strcmp(ucs_memory_type_descs[UCS_MEMORY_TYPE_UNKNOWN], "unknown") == 0);

    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AMO32 |
                        UCP_FEATURE_AMO64;
    CHECK(ucp_init(&params, NULL, &ctx) == UCS_OK);
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &wa) == UCS_OK);
    /* The thread progresses wb; the main thread posts on it too. */
    wp.thread_mode = UCS_THREAD_MODE_MULTI;
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_OK);
    CHECK(ucp_worker_get_address(wa, &addr_a, &len_a) == UCS_OK);
    CHECK(ucp_worker_get_address(wb, &addr_b, &len_b) == UCS_OK);

    /* Worker uids: one per worker, the same every time. */
    wa_attr.field_mask = UCP_WORKER_ADDRESS_ATTR_FIELD_UID;
    wb_attr.field_mask = UCP_WORKER_ADDRESS_ATTR_FIELD_UID;
    CHECK(ucp_worker_address_query(addr_a, &wa_attr) == UCS_OK);
    CHECK(ucp_worker_address_query(addr_b, &wb_attr) == UCS_OK);
    CHECK(wa_attr.worker_uid != 0 && wb_attr.worker_uid != 0);
    CHECK(wa_attr.worker_uid != wb_attr.worker_uid);
    {
        ucp_worker_address_attr_t again = {UCP_WORKER_ADDRESS_ATTR_FIELD_UID, 0};
        ucp_worker_attr_t q = {0};
        char junk[64] = "certainly not a worker address";
        q.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
        CHECK(ucp_worker_query(wa, &q) == UCS_OK);
        CHECK(ucp_worker_address_query(q.address, &again) == UCS_OK);
        CHECK(again.worker_uid == wa_attr.worker_uid);
        ucp_worker_release_address(wa, q.address);
        again.field_mask = 0;
        again.worker_uid = 5;
        CHECK(ucp_worker_address_query((ucp_address_t *)junk, &again) == UCS_OK);
        CHECK(again.worker_uid == 5);
        again.field_mask = UCP_WORKER_ADDRESS_ATTR_FIELD_UID;
        CHECK(ucp_worker_address_query((ucp_address_t *)junk, &again) ==
              UCS_ERR_INVALID_ADDR);
        CHECK(ucp_worker_address_query(addr_a, NULL) == UCS_ERR_INVALID_PARAM);
        CHECK(ucp_worker_address_query(NULL, &again) == UCS_ERR_INVALID_PARAM);
    }

    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address    = addr_b;
    CHECK(ucp_ep_create(wa, &ep_params, &ep) == UCS_OK);
    CHECK(pthread_create(&thread, NULL, progress_b, NULL) == 0);

    /* ucp_ep_query: the name; no socket address for this endpoint. */
    memset(&ep_attr, 0, sizeof(ep_attr));
    ep_attr.field_mask = UCP_EP_ATTR_FIELD_NAME;
    CHECK(ucp_ep_query(ep, &ep_attr) == UCS_OK);
    snprintf(name, sizeof(name), "%p", (void *)ep);
    CHECK(strcmp(ep_attr.name, name) == 0);
    ep_attr.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR;
    CHECK(ucp_ep_query(ep, &ep_attr) == UCS_ERR_NOT_CONNECTED);
    ep_attr.field_mask = UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR;
    CHECK(ucp_ep_query(ep, &ep_attr) == UCS_ERR_NOT_CONNECTED);
    ep_attr.field_mask = 0;
    CHECK(ucp_ep_query(ep, &ep_attr) == UCS_OK);
    CHECK(ucp_ep_query(ep, NULL) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_ep_query(NULL, &ep_attr) == UCS_ERR_INVALID_PARAM);

    /* ucp_ep_evaluate_perf: a larger message takes longer. */
    pp.field_mask   = UCP_EP_PERF_PARAM_FIELD_MESSAGE_SIZE;
    pa.field_mask   = UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME;
    pp.message_size = 1000;
    CHECK(ucp_ep_evaluate_perf(ep, &pp, &pa) == UCS_OK);
    t_small = pa.estimated_time;
    pp.message_size = 1 << 20;
    CHECK(ucp_ep_evaluate_perf(ep, &pp, &pa) == UCS_OK);
    t_large = pa.estimated_time;
    CHECK(t_small > 0 && t_large > t_small && t_large < 10);
    printf("estimated: 1000 B %g s, 1 MiB %g s\n", t_small, t_large);
    pa.field_mask = 0;
    CHECK(ucp_ep_evaluate_perf(ep, &pp, &pa) == UCS_ERR_INVALID_PARAM);
    pa.field_mask = UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME;
    CHECK(ucp_ep_evaluate_perf(ep, NULL, &pa) == UCS_ERR_INVALID_PARAM);
    CHECK(ucp_ep_evaluate_perf(NULL, &pp, &pa) == UCS_ERR_INVALID_PARAM);

    /* The blocking atomics, on memory the library allocates. */
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.length     = 4096;
    mp.flags      = UCP_MEM_MAP_ALLOCATE;
    CHECK(ucp_mem_map(ctx, &mp, &mh) == UCS_OK);
    ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    CHECK(ucp_mem_query(mh, &ma) == UCS_OK);
    CHECK(ucp_rkey_pack(ctx, mh, &packed, &packed_len) == UCS_OK);
    CHECK(ucp_ep_rkey_unpack(ep, packed, &rkey) == UCS_OK);
    atomics(ep, rkey, ma.address);
    ucp_rkey_destroy(rkey);
    ucp_rkey_buffer_release(packed);
    CHECK(ucp_mem_unmap(ctx, mh) == UCS_OK);
    /* UCS_MEMORY_TYPE_UNKNOWN: found out, host memory. */
    mp.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    mp.memory_type = UCS_MEMORY_TYPE_UNKNOWN;
    CHECK(ucp_mem_map(ctx, &mp, &mh) == UCS_OK);
    CHECK(ucp_mem_unmap(ctx, mh) == UCS_OK);
    mp.memory_type = UCS_MEMORY_TYPE_CUDA;
    CHECK(ucp_mem_map(ctx, &mp, &mh) == UCS_ERR_UNSUPPORTED);

    requests(ep);
    modify(ep);
    sockaddrs();

    /* ucp_mem_print_info, into a memory stream. */
    {
        char *out = NULL;
        size_t out_len = 0;
        FILE *f = open_memstream(&out, &out_len);
        CHECK(f != NULL);
        ucp_mem_print_info("4k", ctx, f);
        ucp_mem_print_info("bad", ctx, f);
        fclose(f);
        CHECK(strstr(out, "# UCP memory allocation") != NULL);
        CHECK(strstr(out, "allocated 4K at address") != NULL);
        CHECK(strstr(out, "<Failed to convert a memunits string>") != NULL);
        printf("%s", out);
        free(out);
    }

    /* ucp_worker_wait_mem returns (the memory does not change). */
    ucp_worker_wait_mem(wa, (void *)&word);
    ucp_worker_wait_mem(NULL, NULL);

    {
        ucp_request_param_t cp = {0};
        CHECK(wait_req(ucp_ep_close_nbx(ep, &cp)) == UCS_OK);
    }
    stop_b = 1;
    CHECK(pthread_join(thread, NULL) == 0);
    ucp_worker_release_address(wa, addr_a);
    ucp_worker_release_address(wb, addr_b);
    ucp_worker_destroy(wa);
    ucp_worker_destroy(wb);
    ucp_cleanup(ctx);
    printf("capi_misc: ok\n");
    return 0;
}
