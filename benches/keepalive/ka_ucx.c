/*
 * Kill-to-error-callback probe on UCX's libucp, the counterpart of
 * examples/keepalive_probe.rs (same roles, same messages, same output).
 *
 *   ka_ucx client <addrfile>
 *       Writes its worker address (hex) to <addrfile>, receives the
 *       server's address (tag 1), connects back and then answers every
 *       tag-2 message with a tag-3 message of the same bytes, until killed.
 *
 *   ka_ucx server <addrfile> <idle|traffic> <timeout_s>
 *       Reads the client's address, connects with an endpoint in peer error
 *       mode and an error callback, sends its own address, checks one round
 *       trip and prints "ready". Then it progresses: with no traffic
 *       ("idle"), or with a tag-2 send and a tag-3 receive always in flight
 *       ("traffic"). The error callback takes CLOCK_MONOTONIC; the server
 *       prints "error_ns=<ns> status=<name>" and exits 0, or "timeout" and
 *       exits 2 if no callback ran within <timeout_s> of "ready".
 *
 *   ka_ucx kill <pid>
 *       Takes CLOCK_MONOTONIC, sends SIGKILL to <pid> and prints
 *       "kill_ns=<ns>".
 *
 * UCX reads UCX_TLS, UCX_KEEPALIVE_INTERVAL and UCX_KEEPALIVE_NUM_EPS from
 * the environment. Build: gcc -O2 -o ka_ucx ka_ucx.c -lucp -lucs
 */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TAG_ADDR 1
#define TAG_PING 2
#define TAG_PONG 3
#define PING_LEN 64

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, ucs_status_t st)
{
    fprintf(stderr, "ka_ucx: %s: %s\n", what, ucs_status_string(st));
    exit(1);
}

/* What the error callback saw. */
static volatile int failed;
static uint64_t failed_ns;
static ucs_status_t failed_status;

static void on_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg;
    (void)ep;
    if (!failed) {
        failed_ns     = now_ns();
        failed_status = status;
        failed        = 1;
    }
}

/* The client needs a callback too (peer mode wants one); its end is the
 * kill, so it only exits. */
static void on_error_exit(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg;
    (void)ep;
    (void)status;
    exit(4);
}

static ucp_context_h ctx;
static ucp_worker_h worker;

static void init(void)
{
    ucp_config_t *config;
    ucp_params_t params;
    ucp_worker_params_t wparams;
    ucs_status_t st;

    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) {
        die("ucp_config_read", st);
    }
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG;
    st = ucp_init(&params, config, &ctx);
    ucp_config_release(config);
    if (st != UCS_OK) {
        die("ucp_init", st);
    }
    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(ctx, &wparams, &worker);
    if (st != UCS_OK) {
        die("ucp_worker_create", st);
    }
}

static ucp_ep_h connect_peer(const void *addr, ucp_err_handler_cb_t cb)
{
    ucp_ep_params_t ep_params;
    ucp_ep_h ep;
    ucs_status_t st;

    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address         = addr;
    ep_params.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb  = cb;
    ep_params.err_handler.arg = NULL;
    st = ucp_ep_create(worker, &ep_params, &ep);
    if (st != UCS_OK) {
        die("ucp_ep_create", st);
    }
    return ep;
}

/* 0 while `req` is in flight, 1 when done (and freed); a failure is an
 * error status. */
static ucs_status_t poll_req(void **req, int *done)
{
    ucs_status_t st;

    if (*req == NULL) {
        *done = 1;
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(*req)) {
        *done = 1;
        return UCS_PTR_STATUS(*req);
    }
    st = ucp_request_check_status(*req);
    if (st == UCS_INPROGRESS) {
        *done = 0;
        return UCS_OK;
    }
    ucp_request_free(*req);
    *req  = NULL;
    *done = 1;
    return st;
}

static void *send_nb(ucp_ep_h ep, const void *buf, size_t len, ucp_tag_t tag)
{
    ucp_request_param_t p;
    memset(&p, 0, sizeof(p));
    return ucp_tag_send_nbx(ep, buf, len, tag, &p);
}

static void *recv_nb(void *buf, size_t len, ucp_tag_t tag,
                     ucp_tag_recv_info_t *info)
{
    ucp_request_param_t p;
    memset(&p, 0, sizeof(p));
    p.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
    p.recv_info.tag_info = info;
    return ucp_tag_recv_nbx(worker, buf, len, tag, (ucp_tag_t)-1, &p);
}

/* Progresses until `req` completes; exits on failure. */
static void wait_req(void *req, const char *what)
{
    int done = 0;
    ucs_status_t st;

    for (;;) {
        st = poll_req(&req, &done);
        if (done) {
            break;
        }
        ucp_worker_progress(worker);
    }
    if (st != UCS_OK) {
        die(what, st);
    }
}

static void write_hex_file(const char *path, const void *data, size_t len)
{
    char tmp[4096];
    const unsigned char *b = data;
    FILE *f;
    size_t i;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL) {
        perror("fopen");
        exit(1);
    }
    for (i = 0; i < len; i++) {
        fprintf(f, "%02x", b[i]);
    }
    fputc('\n', f);
    fclose(f);
    if (rename(tmp, path) != 0) {
        perror("rename");
        exit(1);
    }
}

/* Waits up to 20 s for `path` and decodes it; returns the length. */
static size_t read_hex_file(const char *path, unsigned char *out, size_t cap)
{
    char line[16384];
    FILE *f = NULL;
    size_t n = 0;
    int i;

    for (i = 0; i < 2000 && f == NULL; i++) {
        f = fopen(path, "r");
        if (f == NULL) {
            usleep(10000);
        }
    }
    if (f == NULL) {
        fprintf(stderr, "ka_ucx: no address in %s\n", path);
        exit(1);
    }
    if (fgets(line, sizeof(line), f) == NULL) {
        fprintf(stderr, "ka_ucx: empty %s\n", path);
        exit(1);
    }
    fclose(f);
    while (n < cap && line[2 * n] != '\0' && line[2 * n] != '\n') {
        unsigned x;
        if (sscanf(&line[2 * n], "%2x", &x) != 1) {
            break;
        }
        out[n++] = (unsigned char)x;
    }
    return n;
}

static int client(const char *addrfile)
{
    ucp_address_t *addr;
    size_t addr_len;
    unsigned char peer[8192];
    unsigned char buf[PING_LEN];
    ucp_tag_recv_info_t info;
    pid_t ppid = getppid();
    ucs_status_t st;
    ucp_ep_h ep;
    void *req;

    init();
    st = ucp_worker_get_address(worker, &addr, &addr_len);
    if (st != UCS_OK) {
        die("ucp_worker_get_address", st);
    }
    write_hex_file(addrfile, addr, addr_len);
    ucp_worker_release_address(worker, addr);

    req = recv_nb(peer, sizeof(peer), TAG_ADDR, &info);
    wait_req(req, "receive the server's address");
    ep = connect_peer(peer, on_error_exit);

    /* Echo pings until killed (or orphaned). */
    for (;;) {
        int done = 0;
        req = recv_nb(buf, sizeof(buf), TAG_PING, &info);
        for (;;) {
            st = poll_req(&req, &done);
            if (done) {
                break;
            }
            ucp_worker_progress(worker);
            if (getppid() != ppid) {
                return 3;
            }
        }
        if (st != UCS_OK) {
            die("receive a ping", st);
        }
        wait_req(send_nb(ep, buf, sizeof(buf), TAG_PONG), "send a pong");
    }
}

static int server(const char *addrfile, int traffic, double timeout_s)
{
    unsigned char peer[8192];
    unsigned char ping[PING_LEN], pong[PING_LEN];
    ucp_tag_recv_info_t info;
    ucp_address_t *addr;
    size_t addr_len;
    ucs_status_t st;
    uint64_t ready_ns, limit_ns;
    void *sreq = NULL, *rreq = NULL;
    int sdone = 1, rdone = 1;
    unsigned long rounds = 0;
    ucp_ep_h ep;

    init();
    read_hex_file(addrfile, peer, sizeof(peer));
    ep = connect_peer(peer, on_error);

    st = ucp_worker_get_address(worker, &addr, &addr_len);
    if (st != UCS_OK) {
        die("ucp_worker_get_address", st);
    }
    wait_req(send_nb(ep, addr, addr_len, TAG_ADDR), "send the address");
    ucp_worker_release_address(worker, addr);

    /* One round trip: both directions are wired up. */
    memset(ping, 0x5a, sizeof(ping));
    rreq = recv_nb(pong, sizeof(pong), TAG_PONG, &info);
    wait_req(send_nb(ep, ping, sizeof(ping), TAG_PING), "send a ping");
    wait_req(rreq, "receive a pong");
    rreq = NULL;

    printf("ready\n");
    fflush(stdout);
    ready_ns = now_ns();
    limit_ns = ready_ns + (uint64_t)(timeout_s * 1e9);

    while (!failed) {
        ucp_worker_progress(worker);
        if (traffic) {
            /* Poll results are ignored: a failure here is the peer's
             * death, which the callback reports. */
            if (!sdone) {
                (void)poll_req(&sreq, &sdone);
            }
            if (!rdone) {
                (void)poll_req(&rreq, &rdone);
            }
            if (sdone && rdone) {
                ++rounds;
                rreq = recv_nb(pong, sizeof(pong), TAG_PONG, &info);
                sreq = send_nb(ep, ping, sizeof(ping), TAG_PING);
                sdone = rdone = 0;
            }
        }
        if (now_ns() > limit_ns) {
            printf("timeout rounds=%lu\n", rounds);
            fflush(stdout);
            return 2;
        }
    }
    printf("error_ns=%llu status=%s rounds=%lu\n",
           (unsigned long long)failed_ns, ucs_status_string(failed_status),
           rounds);
    fflush(stdout);
    /* The receive that never matched, and the endpoint, go with the
     * process. */
    return 0;
}

static int kill_peer(pid_t pid)
{
    uint64_t t = now_ns();
    if (kill(pid, SIGKILL) != 0) {
        perror("kill");
        return 1;
    }
    printf("kill_ns=%llu\n", (unsigned long long)t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "client") == 0) {
        return client(argv[2]);
    }
    if (argc == 5 && strcmp(argv[1], "server") == 0) {
        return server(argv[2], strcmp(argv[3], "traffic") == 0,
                      atof(argv[4]));
    }
    if (argc == 3 && strcmp(argv[1], "kill") == 0) {
        return kill_peer((pid_t)atoi(argv[2]));
    }
    fprintf(stderr,
            "usage: ka_ucx client <addrfile>\n"
            "       ka_ucx server <addrfile> <idle|traffic> <timeout_s>\n"
            "       ka_ucx kill <pid>\n");
    return 1;
}
