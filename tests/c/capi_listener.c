/* rucx's libucp.so through UCX 1.13's listener calls, in one process: a
 * server worker listens on 127.0.0.1 and on ::1 (port 0, the bound port
 * read back with ucp_listener_query); a client worker of the same context
 * connects by socket address (ucp_ep_create returns at once, the
 * connection completes in progress; sends posted before the server
 * answered are requests that go out in order once connected, fail with
 * a failed connect, or are canceled by a close), the server's connection handler
 * queries the client's address and the server accepts; tag messages go
 * both ways, the first posted before the client knows it is connected; a
 * second client is rejected and its error handler sees
 * UCS_ERR_REJECTED; a connect to a port nobody listens on fails through
 * the error handler. Listening on a port another socket listens on, or
 * one a closed connection holds in TIME_WAIT, is UCS_ERR_BUSY (as UCX
 * 1.13's). Prints
 * "capi_listener: ok" and exits 0 when every check holds. */
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)

static ucp_worker_h ws, wc;
static ucp_listener_h listener;
static ucp_conn_request_h pending;
static int family_seen;

static void on_conn(ucp_conn_request_h req, void *arg)
{
    ucp_conn_request_attr_t a;
    CHECK(arg == (void *)0x51);
    CHECK(pending == NULL);
    a.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR |
                   UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID;
    CHECK(ucp_conn_request_query(req, &a) == UCS_OK);
    family_seen = a.client_address.ss_family;
    pending     = req;
}

/* The client side: its address and the failure its error handler saw. */
struct client {
    struct sockaddr_storage addr;
    socklen_t               len;
    ucp_ep_h                ep;
    ucs_status_t            failed;
};

static void on_client_err(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    struct client *c = arg;
    CHECK(ep == c->ep);
    printf("client endpoint failed: %s\n", ucs_status_string(st));
    c->failed = st;
}

/* Creates the client endpoint: returns at once, the connection completes
 * in progress. */
static void connect_to(struct client *c)
{
    ucp_ep_params_t p = {0};
    p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                   UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_USER_DATA |
                   UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.flags            = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr    = (struct sockaddr *)&c->addr;
    p.sockaddr.addrlen = c->len;
    p.err_mode         = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb   = on_client_err;
    p.user_data        = c;
    c->failed          = UCS_OK;
    CHECK(ucp_ep_create(wc, &p, &c->ep) == UCS_OK);
}

/* Waits for request r (NULL: done at once), progressing both workers. */
static ucs_status_t wait_req(void *r)
{
    time_t start = time(NULL);
    ucs_status_t st;
    if (r == NULL) {
        return UCS_OK;
    }
    CHECK(!UCS_PTR_IS_ERR(r));
    while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS) {
        CHECK(time(NULL) - start < 60);
        ucp_worker_progress(ws);
        ucp_worker_progress(wc);
    }
    ucp_request_free(r);
    return st;
}

/* Waits for the client's connection request on the server and accepts
 * it (returning the server's endpoint) or rejects it (NULL). */
static ucp_ep_h answer(int accept)
{
    time_t start = time(NULL);
    ucp_conn_request_h r;
    ucp_ep_params_t p = {0};
    ucp_ep_h ep;
    while (pending == NULL) {
        CHECK(time(NULL) - start < 60);
        ucp_worker_progress(ws);
        ucp_worker_progress(wc);
    }
    r       = pending;
    pending = NULL;
    if (!accept) {
        CHECK(ucp_listener_reject(listener, r) == UCS_OK);
        return NULL;
    }
    p.field_mask   = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                     UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.conn_request = r;
    p.err_mode     = UCP_ERR_HANDLING_MODE_PEER;
    CHECK(ucp_ep_create(ws, &p, &ep) == UCS_OK);
    return ep;
}

/* Progresses both workers until the client's error handler ran. */
static ucs_status_t wait_failure(struct client *c)
{
    time_t start = time(NULL);
    while (c->failed == UCS_OK) {
        CHECK(time(NULL) - start < 60);
        ucp_worker_progress(ws);
        ucp_worker_progress(wc);
    }
    return c->failed;
}

static void send_recv(ucp_ep_h from, ucp_worker_h to, uint64_t tag)
{
    char out[64], in[64] = {0};
    ucp_request_param_t p = {0};
    void *rr, *sr;
    snprintf(out, sizeof(out), "message %llu", (unsigned long long)tag);
    rr = ucp_tag_recv_nbx(to, in, sizeof(in), tag, (ucp_tag_t)-1, &p);
    sr = ucp_tag_send_nbx(from, out, sizeof(out), tag, &p);
    CHECK(wait_req(sr) == UCS_OK);
    CHECK(wait_req(rr) == UCS_OK);
    CHECK(strcmp(in, out) == 0);
}

static void close_ep(ucp_ep_h ep)
{
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    wait_req(ucp_ep_close_nbx(ep, &p));
}

/* The loopback address of family, port 0, in ss; its length. */
static socklen_t loopback(int family, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (family == AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)ss;
        s->sin_family      = AF_INET;
        s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return sizeof(*s);
    } else {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
        s->sin6_family = AF_INET6;
        s->sin6_addr   = in6addr_loopback;
        return sizeof(*s);
    }
}

/* ucp_listener_create on ss (of length len); closes the listener if it
 * was made. */
static ucs_status_t try_listen(struct sockaddr_storage *ss, socklen_t len)
{
    ucp_listener_params_t lp = {0};
    ucp_listener_h l;
    ucs_status_t st;
    lp.field_mask       = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                          UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr    = (struct sockaddr *)ss;
    lp.sockaddr.addrlen = len;
    lp.conn_handler.cb  = on_conn;
    lp.conn_handler.arg = (void *)0x51;
    st = ucp_listener_create(ws, &lp, &l);
    if (st == UCS_OK) {
        ucp_listener_destroy(l);
    }
    return st;
}

/* A listener on a port in use: one a plain socket listens on, then the
 * same port once only a closed connection's TIME_WAIT holds it (the
 * sockets have no SO_REUSEADDR). */
static void address_in_use(int family)
{
    const char *name = family == AF_INET ? "ipv4" : "ipv6";
    struct sockaddr_storage ss;
    socklen_t len = loopback(family, &ss), alen = len;
    int lfd, cfd, afd;
    ucs_status_t st;

    lfd = socket(family, SOCK_STREAM, 0);
    CHECK(lfd >= 0);
    CHECK(bind(lfd, (struct sockaddr *)&ss, len) == 0);
    CHECK(listen(lfd, 4) == 0);
    CHECK(getsockname(lfd, (struct sockaddr *)&ss, &alen) == 0);
    st = try_listen(&ss, len);
    printf("%s address in use: %s\n", name, ucs_status_string(st));
    CHECK(st == UCS_ERR_BUSY);

    /* The server's side closes first: its port goes to TIME_WAIT. */
    cfd = socket(family, SOCK_STREAM, 0);
    CHECK(cfd >= 0);
    CHECK(connect(cfd, (struct sockaddr *)&ss, len) == 0);
    afd = accept(lfd, NULL, NULL);
    CHECK(afd >= 0);
    close(afd);
    close(lfd);
    close(cfd);
    st = try_listen(&ss, len);
    printf("%s address in time-wait: %s\n", name, ucs_status_string(st));
    CHECK(st == UCS_ERR_BUSY);
}

static void run(int family)
{
    struct sockaddr_storage ss;
    socklen_t len;
    ucp_listener_params_t lp = {0};
    ucp_listener_attr_t la;
    struct client c;
    ucp_ep_h server_ep, accepted;
    const char *name = family == AF_INET ? "ipv4" : "ipv6";
    uint16_t port;
    ucs_status_t st;

    len = loopback(family, &ss);
    lp.field_mask       = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                          UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr    = (struct sockaddr *)&ss;
    lp.sockaddr.addrlen = len;
    lp.conn_handler.cb  = on_conn;
    lp.conn_handler.arg = (void *)0x51;
    CHECK(ucp_listener_create(ws, &lp, &listener) == UCS_OK);
    la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    CHECK(ucp_listener_query(listener, &la) == UCS_OK);
    CHECK(la.sockaddr.ss_family == family);
    port = family == AF_INET ? ntohs(((struct sockaddr_in *)&la.sockaddr)->sin_port)
                             : ntohs(((struct sockaddr_in6 *)&la.sockaddr)->sin6_port);
    CHECK(port != 0);
    printf("%s listener on port %u\n", name, port);

    memcpy(&c.addr, &la.sockaddr, sizeof(c.addr));
    c.len = len;
    connect_to(&c);
    /* Sends posted before the server even answered: requests, which go
     * out in order once the client is connected. */
    {
        ucp_request_param_t p = {0};
        char first[16] = "first", second[16] = "second", a[16], b[16];
        void *s1 = ucp_tag_send_nbx(c.ep, first, sizeof(first), 5, &p);
        void *s2 = ucp_tag_send_nbx(c.ep, second, sizeof(second), 5, &p);
        void *r1, *r2;
        CHECK(UCS_PTR_IS_PTR(s1) && UCS_PTR_IS_PTR(s2));
        server_ep = answer(1);
        r1 = ucp_tag_recv_nbx(ws, a, sizeof(a), 5, (ucp_tag_t)-1, &p);
        r2 = ucp_tag_recv_nbx(ws, b, sizeof(b), 5, (ucp_tag_t)-1, &p);
        CHECK(wait_req(s1) == UCS_OK && wait_req(s2) == UCS_OK);
        CHECK(wait_req(r1) == UCS_OK && wait_req(r2) == UCS_OK);
        CHECK(strcmp(a, "first") == 0 && strcmp(b, "second") == 0);
        printf("%s sends posted while connecting: ok\n", name);
    }
    CHECK(family_seen == family);
    /* Posted as soon as the server accepted: the client's connection may
     * still be completing. */
    send_recv(c.ep, ws, 7);
    send_recv(server_ep, wc, 8);
    printf("%s tag both ways: ok\n", name);
    accepted = c.ep;

    connect_to(&c);
    answer(0);
    st = wait_failure(&c);
    printf("%s rejected client: %s\n", name, ucs_status_string(st));
    CHECK(st == UCS_ERR_REJECTED);
    close_ep(c.ep);

    close_ep(accepted);
    close_ep(server_ep);
    ucp_listener_destroy(listener);
    listener = NULL;

    /* Nobody listens on the port now. */
    connect_to(&c);
    st = wait_failure(&c);
    printf("%s no listener: %s\n", name, ucs_status_string(st));
    CHECK(st == UCS_ERR_UNREACHABLE || st == UCS_ERR_REJECTED ||
          st == UCS_ERR_CONNECTION_RESET || st == UCS_ERR_ENDPOINT_TIMEOUT);
    close_ep(c.ep);

    /* A send posted while the connect is under way gets a request, which
     * fails with the connect. */
    {
        ucp_request_param_t p = {0};
        char out[8] = "late";
        void *sr;
        ucs_status_t failed;
        connect_to(&c);
        sr = ucp_tag_send_nbx(c.ep, out, sizeof(out), 11, &p);
        CHECK(UCS_PTR_IS_PTR(sr));
        st     = wait_req(sr);
        failed = wait_failure(&c);
        CHECK(st == failed);
        close_ep(c.ep);
        /* ... and one closed before it connects is canceled. */
        connect_to(&c);
        sr = ucp_tag_send_nbx(c.ep, out, sizeof(out), 12, &p);
        CHECK(UCS_PTR_IS_PTR(sr));
        close_ep(c.ep);
        CHECK(ucp_request_check_status(sr) == UCS_ERR_CANCELED);
        ucp_request_free(sr);
        printf("%s deferred sends: failed with the connect (%s), canceled by "
               "a close\n", name, ucs_status_string(st));
    }
}

int main(void)
{
    ucp_context_h ctx;
    ucp_config_t *config;
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_listener_params_t lp = {0};
    ucp_listener_h l;

    CHECK(ucp_config_read(NULL, NULL, &config) == UCS_OK);
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG;
    CHECK(ucp_init(&params, config, &ctx) == UCS_OK);
    ucp_config_release(config);
    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &ws) == UCS_OK);
    CHECK(ucp_worker_create(ctx, &wp, &wc) == UCS_OK);

    /* Wrong arguments: no address; the legacy accept handler. */
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    CHECK(ucp_listener_create(ws, &lp, &l) == UCS_ERR_INVALID_PARAM);

    run(AF_INET);
    run(AF_INET6);
    address_in_use(AF_INET);
    address_in_use(AF_INET6);

    ucp_worker_destroy(wc);
    ucp_worker_destroy(ws);
    ucp_cleanup(ctx);
    printf("capi_listener: ok\n");
    return 0;
}
