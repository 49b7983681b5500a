/* Operations on a client endpoint whose connect the server has not
 * answered yet, in one thread: a server worker listens, its connection
 * handler only keeps the request, and the application accepts it later
 * from its main loop. Right after ucp_ep_create by socket address (before
 * the server saw the client) the client unpacks a remote key of the
 * server's memory on the endpoint, queries its socket addresses, and posts
 * ucp_put_nbx, ucp_get_nbx, ucp_atomic_op_nbx (a post and a fetch) and
 * ucp_ep_flush_nbx: each returns at once, and all complete once the
 * server accepted; so do ucp_put_nbi, ucp_get_nbi and ucp_atomic_post,
 * which a ucp_worker_flush_nbx waits for. On a connect that fails (nobody listens) the same
 * operations fail with the status the error handler gets (and if it was
 * closed in flush mode meanwhile, its close completes and no handler
 * runs); on an endpoint closed with UCP_EP_CLOSE_FLAG_FORCE before it
 * connected they are canceled; a flush-mode close of an endpoint still connecting waits for
 * the connect and delivers what was posted on it first. A blocking
 * ucp_put and ucp_ep_flush on an endpoint of a worker that connects to
 * its own listener progress that worker while they wait, so that its
 * connection handler accepts. Prints "capi_connecting: ok" and exits 0
 * when every check holds. */
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)

#define NREQ 8

static ucp_context_h ctx;
static ucp_worker_h ws, wc;
static ucp_listener_h listener;
static ucp_conn_request_h pending;
static struct sockaddr_in listen_addr;
static ucs_status_t client_failed;
static uint64_t *mem;            /* the server's memory, 8 words */
static void *packed;             /* its packed key */

/* Keeps the request: the main loop answers it. */
static void on_conn(ucp_conn_request_h req, void *arg)
{
    (void)arg;
    CHECK(pending == NULL);
    pending = req;
}

static void on_client_err(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    (void)arg;
    (void)ep;
    client_failed = st;
}

/* The server's endpoint for a request kept by on_conn. */
static ucp_ep_h accept_pending(ucp_worker_h w)
{
    ucp_ep_params_t p = {0};
    ucp_ep_h ep;
    p.field_mask   = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                     UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.conn_request = pending;
    p.err_mode     = UCP_ERR_HANDLING_MODE_PEER;
    pending        = NULL;
    CHECK(ucp_ep_create(w, &p, &ep) == UCS_OK);
    return ep;
}

static ucp_ep_h connect_to(ucp_worker_h w, const struct sockaddr_in *sa)
{
    ucp_ep_params_t p = {0};
    ucp_ep_h ep;
    p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                   UCP_EP_PARAM_FIELD_ERR_HANDLER |
                   UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.flags            = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr    = (const struct sockaddr *)sa;
    p.sockaddr.addrlen = sizeof(*sa);
    p.err_mode         = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb   = on_client_err;
    client_failed      = UCS_OK;
    CHECK(ucp_ep_create(w, &p, &ep) == UCS_OK);
    return ep;
}

static void progress_both(time_t start)
{
    CHECK(time(NULL) - start < 60);
    ucp_worker_progress(ws);
    ucp_worker_progress(wc);
}

/* The status of what a call returned, once over (progressing both
 * workers, accepting a kept connection request as it comes). */
static ucs_status_t wait_req(void *r, ucp_ep_h *accepted)
{
    time_t start = time(NULL);
    ucs_status_t st;
    if (r == NULL || UCS_PTR_IS_ERR(r)) {
        return UCS_PTR_STATUS(r);
    }
    while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS) {
        progress_both(start);
        if (pending != NULL && accepted != NULL) {
            *accepted = accept_pending(ws);
        }
    }
    ucp_request_free(r);
    return st;
}

static void close_ep(ucp_ep_h ep, int force)
{
    ucp_request_param_t p = {0};
    if (force) {
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    }
    wait_req(ucp_ep_close_nbx(ep, &p), NULL);
}

/* Posts the one-sided operations and a flush on ep, which still
 * connects: requests (or NULL, done) in r; the values they use in
 * vals (put source, get target, fetch result). */
static int post_all(ucp_ep_h ep, ucp_rkey_h rkey, uint64_t *vals, void **r)
{
    ucp_request_param_t p = {0}, p0 = {0};
    uint64_t base = (uintptr_t)mem;
    int n = 0;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype     = ucp_dt_make_contig(8);
    vals[0] = 0x1122334455667788ull;                  /* put to mem[0] */
    vals[1] = 0;                                      /* get of mem[1] */
    vals[2] = 3;                                      /* add to mem[2] */
    vals[3] = 10;                                     /* fadd to mem[3] */
    vals[4] = 0;                                      /* old mem[3] */
    /* Bytes (no datatype): UCX 1.13 takes an RMA count as bytes. */
    r[n++] = ucp_put_nbx(ep, &vals[0], 8, base, rkey, &p0);
    r[n++] = ucp_get_nbx(ep, &vals[1], 8, base + 8, rkey, &p0);
    r[n++] = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &vals[2], 1, base + 16,
                               rkey, &p);
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    p.reply_buffer  = &vals[4];
    r[n++] = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &vals[3], 1, base + 24,
                               rkey, &p);
    p.op_attr_mask = 0;
    r[n++] = ucp_ep_flush_nbx(ep, &p);
    for (int i = 0; i < n; i++) {
        CHECK(!UCS_PTR_IS_ERR(r[i]));
    }
    return n;
}

static void reset_mem(void)
{
    mem[0] = 0;
    mem[1] = 0xabcdef0123456789ull;
    mem[2] = 5;
    mem[3] = 100;
}

/* The operations posted while connecting complete once the server
 * accepted from its main loop. */
static void connected_later(void)
{
    ucp_ep_h ep, server_ep = NULL;
    ucp_rkey_h rkey;
    ucp_ep_attr_t attr;
    uint64_t vals[5];
    void *r[NREQ];
    int n, i;
    ucs_status_t st;

    reset_mem();
    ep = connect_to(wc, &listen_addr);
    CHECK(ucp_ep_rkey_unpack(ep, packed, &rkey) == UCS_OK);
    attr.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR |
                      UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR;
    st = ucp_ep_query(ep, &attr);
    printf("query while connecting: %s\n", ucs_status_string(st));
    CHECK(pending == NULL);
    n = post_all(ep, rkey, vals, r);
    CHECK(pending == NULL);   /* nothing waited for the server */
    for (i = 0; i < n; i++) {
        CHECK(wait_req(r[i], &server_ep) == UCS_OK);
    }
    CHECK(server_ep != NULL);
    CHECK(mem[0] == vals[0]);
    CHECK(vals[1] == 0xabcdef0123456789ull);
    CHECK(mem[2] == 8);
    CHECK(mem[3] == 110 && vals[4] == 100);
    printf("one-sided operations posted while connecting: ok\n");
    ucp_rkey_destroy(rkey);
    close_ep(ep, 1);
    close_ep(server_ep, 1);
}

/* Implicit operations (ucp_put_nbi, ucp_get_nbi, ucp_atomic_post) posted
 * while connecting return at once, and a worker flush waits for them. */
static void implicit_then_worker_flush(void)
{
    ucp_request_param_t p = {0};
    ucp_ep_h ep, server_ep = NULL;
    ucp_rkey_h rkey;
    uint64_t put = 0x0102030405060708ull, got = 0, base = (uintptr_t)mem;
    ucs_status_t st;
    void *fr;

    reset_mem();
    ep = connect_to(wc, &listen_addr);
    CHECK(ucp_ep_rkey_unpack(ep, packed, &rkey) == UCS_OK);
    st = ucp_put_nbi(ep, &put, sizeof(put), base, rkey);
    CHECK(st == UCS_OK || st == UCS_INPROGRESS);
    st = ucp_get_nbi(ep, &got, sizeof(got), base + 8, rkey);
    CHECK(st == UCS_OK || st == UCS_INPROGRESS);
    CHECK(ucp_atomic_post(ep, UCP_ATOMIC_POST_OP_ADD, 4, 8, base + 16, rkey) ==
          UCS_OK);
    CHECK(pending == NULL);   /* nothing waited for the server */
    fr = ucp_worker_flush_nbx(wc, &p);
    CHECK(UCS_PTR_IS_PTR(fr));
    CHECK(wait_req(fr, &server_ep) == UCS_OK);
    CHECK(server_ep != NULL);
    CHECK(mem[0] == put && got == 0xabcdef0123456789ull && mem[2] == 9);
    printf("implicit operations and a worker flush while connecting: ok\n");
    ucp_rkey_destroy(rkey);
    close_ep(ep, 1);
    close_ep(server_ep, 1);
}

/* The operations posted on a connect that fails fail with it; those on an
 * endpoint closed before it connected are canceled. */
static void failed_and_closed(void)
{
    struct sockaddr_in nobody = listen_addr;
    ucp_ep_h ep;
    ucp_rkey_h rkey;
    uint64_t vals[5];
    void *r[NREQ];
    int n, i;
    time_t start = time(NULL);

    nobody.sin_port = htons(ntohs(listen_addr.sin_port) + 1);
    ep = connect_to(wc, &nobody);
    CHECK(ucp_ep_rkey_unpack(ep, packed, &rkey) == UCS_OK);
    n = post_all(ep, rkey, vals, r);
    while (client_failed == UCS_OK) {
        progress_both(start);
    }
    for (i = 0; i < n; i++) {
        CHECK(wait_req(r[i], NULL) == client_failed);
    }
    printf("failed with the connect: %s\n", ucs_status_string(client_failed));
    ucp_rkey_destroy(rkey);
    close_ep(ep, 1);

    /* Closed in flush mode before its connect failed: what was posted
     * fails with the connect, the close completes, no handler runs. */
    {
        ucp_request_param_t p = {0};
        char out[8] = "lost";
        ucs_status_t failed;
        void *sr, *cr;
        ep = connect_to(wc, &nobody);
        sr = ucp_tag_send_nbx(ep, out, sizeof(out), 22, &p);
        CHECK(UCS_PTR_IS_PTR(sr));
        cr = ucp_ep_close_nbx(ep, &p);
        CHECK(wait_req(cr, NULL) == UCS_OK);
        failed = wait_req(sr, NULL);
        CHECK(failed != UCS_OK && failed != UCS_ERR_CANCELED);
        CHECK(client_failed == UCS_OK);
        printf("flush-mode close of a failing connect: ok (%s)\n",
               ucs_status_string(failed));
    }

    ep = connect_to(wc, &listen_addr);
    CHECK(ucp_ep_rkey_unpack(ep, packed, &rkey) == UCS_OK);
    n = post_all(ep, rkey, vals, r);
    ucp_rkey_destroy(rkey);
    close_ep(ep, 1);
    for (i = 0; i < n; i++) {
        CHECK(wait_req(r[i], NULL) == UCS_ERR_CANCELED);
    }
    /* The server may have seen the client: drop its request. */
    while (time(NULL) - start < 1 || pending != NULL) {
        progress_both(start);
        if (pending != NULL) {
            CHECK(ucp_listener_reject(listener, pending) == UCS_OK);
            pending = NULL;
        }
    }
    printf("canceled by a forced close: ok\n");
}

/* A flush-mode close of an endpoint still connecting: what was posted on
 * it arrives, then the close completes. */
static void flush_close(void)
{
    ucp_request_param_t p = {0};
    char out[16] = "before close", in[16] = {0};
    ucp_ep_h ep, server_ep = NULL;
    void *sr, *cr, *rr;

    ep = connect_to(wc, &listen_addr);
    sr = ucp_tag_send_nbx(ep, out, sizeof(out), 21, &p);
    CHECK(UCS_PTR_IS_PTR(sr));
    cr = ucp_ep_close_nbx(ep, &p);
    CHECK(!UCS_PTR_IS_ERR(cr));
    CHECK(ucp_request_check_status(sr) == UCS_INPROGRESS);
    rr = ucp_tag_recv_nbx(ws, in, sizeof(in), 21, (ucp_tag_t)-1, &p);
    CHECK(wait_req(cr, &server_ep) == UCS_OK);
    CHECK(wait_req(sr, &server_ep) == UCS_OK);
    CHECK(wait_req(rr, &server_ep) == UCS_OK);
    CHECK(strcmp(in, out) == 0);
    CHECK(server_ep != NULL);
    close_ep(server_ep, 1);
    printf("flush-mode close while connecting: ok\n");
}

/* Blocking calls on an endpoint of a worker that connects to its own
 * listener: they progress the worker, whose handler accepts. */
static ucp_ep_h self_accepted;

static void on_conn_accept(ucp_conn_request_h req, void *arg)
{
    ucp_worker_h w = arg;
    pending = req;
    self_accepted = accept_pending(w);
}

static void blocking_on_own_listener(ucp_worker_h w)
{
    ucp_listener_params_t lp = {0};
    ucp_listener_attr_t la;
    ucp_listener_h l;
    struct sockaddr_in sa;
    ucp_ep_h ep;
    ucp_rkey_h rkey;
    uint64_t v = 0x5555aaaa5555aaaaull;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family      = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lp.field_mask       = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                          UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr    = (struct sockaddr *)&sa;
    lp.sockaddr.addrlen = sizeof(sa);
    lp.conn_handler.cb  = on_conn_accept;
    lp.conn_handler.arg = w;
    CHECK(ucp_listener_create(w, &lp, &l) == UCS_OK);
    la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    CHECK(ucp_listener_query(l, &la) == UCS_OK);
    memcpy(&sa, &la.sockaddr, sizeof(sa));

    reset_mem();
    self_accepted = NULL;
    ep = connect_to(w, &sa);
    CHECK(ucp_ep_rkey_unpack(ep, packed, &rkey) == UCS_OK);
    CHECK(ucp_put(ep, &v, sizeof(v), (uintptr_t)mem, rkey) == UCS_OK);
    CHECK(ucp_ep_flush(ep) == UCS_OK);
    CHECK(mem[0] == v);
    CHECK(self_accepted != NULL);
    printf("blocking calls progress the worker: ok\n");
    ucp_rkey_destroy(rkey);
    close_ep(ep, 1);
    close_ep(self_accepted, 1);
    ucp_listener_destroy(l);
}

int main(void)
{
    ucp_config_t *config;
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_listener_params_t lp = {0};
    ucp_listener_attr_t la;
    ucp_mem_map_params_t mp = {0};
    ucp_mem_h mh;
    size_t packed_len;

    CHECK(ucp_config_read(NULL, NULL, &config) == UCS_OK);
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AMO64;
    CHECK(ucp_init(&params, config, &ctx) == UCS_OK);
    ucp_config_release(config);
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &ws) == UCS_OK);
    CHECK(ucp_worker_create(ctx, &wp, &wc) == UCS_OK);

    mem = calloc(8, sizeof(uint64_t));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address    = mem;
    mp.length     = 8 * sizeof(uint64_t);
    CHECK(ucp_mem_map(ctx, &mp, &mh) == UCS_OK);
    CHECK(ucp_rkey_pack(ctx, mh, &packed, &packed_len) == UCS_OK);

    memset(&listen_addr, 0, sizeof(listen_addr));
    listen_addr.sin_family      = AF_INET;
    listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lp.field_mask       = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                          UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr    = (struct sockaddr *)&listen_addr;
    lp.sockaddr.addrlen = sizeof(listen_addr);
    lp.conn_handler.cb  = on_conn;
    CHECK(ucp_listener_create(ws, &lp, &listener) == UCS_OK);
    la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    CHECK(ucp_listener_query(listener, &la) == UCS_OK);
    memcpy(&listen_addr, &la.sockaddr, sizeof(listen_addr));

    connected_later();
    implicit_then_worker_flush();
    failed_and_closed();
    flush_close();
    ucp_listener_destroy(listener);
    blocking_on_own_listener(wc);

    ucp_rkey_buffer_release(packed);
    CHECK(ucp_mem_unmap(ctx, mh) == UCS_OK);
    ucp_worker_destroy(wc);
    ucp_worker_destroy(ws);
    ucp_cleanup(ctx);
    free(mem);
    printf("capi_connecting: ok\n");
    return 0;
}
