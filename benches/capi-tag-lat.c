/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Tag ping-pong through UCX's C API, to measure what the C API costs on
 * top of rucx (against `rucx-perftest -t tag_lat`) and to compare rucx's
 * libucp with UCX's own: the same binary runs on either, chosen with
 * LD_LIBRARY_PATH.
 *
 * The process forks; parent and child each make a context and a worker
 * (thread mode single), swap worker addresses through a socket pair and
 * connect. The parent sends SIZE bytes with ucp_tag_send_nbx, the child
 * answers with as many; each side waits by busy-polling
 * ucp_worker_progress, as ucx_perftest does. After WARMUP round trips,
 * ITERS are timed in batches of 1000; the parent prints
 *
 *   capi-tag-lat: size=<bytes> iters=<n> lat_us=<overall one-way>
 *   median_batch_us=<median one-way of the batches>
 *
 * With CAPI_TAG_LAT_MODE=ompi the calls are those of Open MPI's pml ucx
 * for MPI_Send/MPI_Recv: requests in the caller's memory (`request_size`
 * bytes from ucp_context_query, on the stack), the send with
 * UCP_OP_ATTR_FLAG_FAST_CMPL, and the receive waited for with
 * ucp_request_test between progress calls.
 *
 * Build: cc -O2 -o capi-tag-lat benches/capi-tag-lat.c -lucp -lucs
 *        (rucx's headers: -I<prefix>/include -L<prefix>/lib)
 * Run:   LD_LIBRARY_PATH=<prefix>/lib UCX_TLS=posix,self ./capi-tag-lat [SIZE [ITERS]]
 */
#include <ucp/api/ucp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH 1000
#define TAG 0x77

static ucp_worker_h worker;
static int ompi_mode;
static size_t req_size;

static void die(const char *what, ucs_status_t st)
{
    fprintf(stderr, "capi-tag-lat: %s: %s\n", what, ucs_status_string(st));
    exit(1);
}

static void wait_req(void *r, const char *what)
{
    if (r == NULL) {
        return;
    }
    if (UCS_PTR_IS_ERR(r)) {
        die(what, UCS_PTR_STATUS(r));
    }
    while (ucp_request_check_status(r) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
    }
    ucs_status_t st = ucp_request_check_status(r);
    ucp_request_free(r);
    if (st != UCS_OK) {
        die(what, st);
    }
}

/* Open MPI's blocking send: the request on the stack, FAST_CMPL. */
static void send_ompi(ucp_ep_h ep, void *buf, size_t len)
{
    char *mem = __builtin_alloca(req_size + 16);
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FIELD_DATATYPE |
                     UCP_OP_ATTR_FLAG_FAST_CMPL;
    p.datatype = ucp_dt_make_contig(1);
    p.request = mem + req_size;
    void *r = ucp_tag_send_nbx(ep, buf, len, TAG, &p);
    if (r == NULL) {
        return;
    }
    if (UCS_PTR_IS_ERR(r)) {
        die("send", UCS_PTR_STATUS(r));
    }
    ucs_status_t st;
    while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
    }
    if (st != UCS_OK) {
        die("send", st);
    }
}

/* Open MPI's blocking receive: tested with ucp_request_test whatever the
 * post returned. */
static void recv_ompi(void *buf, size_t len)
{
    char *mem = __builtin_alloca(req_size + 16);
    void *req = mem + req_size;
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_contig(1);
    p.request = req;
    ucp_tag_recv_info_t info;
    ucp_tag_recv_nbx(worker, buf, len, TAG, UINT64_MAX, &p);
    for (;;) {
        ucs_status_t st = ucp_request_test(req, &info);
        if (st == UCS_OK && info.length == len) {
            return;
        }
        if (st != UCS_INPROGRESS) {
            die("recv", st == UCS_OK ? UCS_ERR_MESSAGE_TRUNCATED : st);
        }
        ucp_worker_progress(worker);
    }
}

static void send_msg(ucp_ep_h ep, void *buf, size_t len)
{
    if (ompi_mode) {
        send_ompi(ep, buf, len);
        return;
    }
    ucp_request_param_t p = {0};
    wait_req(ucp_tag_send_nbx(ep, buf, len, TAG, &p), "send");
}

static void recv_msg(void *buf, size_t len)
{
    if (ompi_mode) {
        recv_ompi(buf, len);
        return;
    }
    ucp_request_param_t p = {0};
    wait_req(ucp_tag_recv_nbx(worker, buf, len, TAG, UINT64_MAX, &p), "recv");
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void xfer(int fd, void *buf, size_t len, int out)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = out ? write(fd, (char *)buf + done, len - done)
                        : read(fd, (char *)buf + done, len - done);
        if (n <= 0) {
            perror("capi-tag-lat: address exchange");
            exit(1);
        }
        done += (size_t)n;
    }
}

int main(int argc, char **argv)
{
    size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 8;
    long iters = argc > 2 ? strtol(argv[2], NULL, 0) : 100000;
    long warmup = iters / 10 < 1000 ? 1000 : iters / 10;
    int sv[2];

    const char *mode = getenv("CAPI_TAG_LAT_MODE");
    ompi_mode = mode != NULL && strcmp(mode, "ompi") == 0;
    if (iters < BATCH) {
        iters = BATCH;
    }
    iters -= iters % BATCH;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("capi-tag-lat: socketpair");
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("capi-tag-lat: fork");
        return 1;
    }
    int rank = child == 0;
    int fd = sv[rank];

    ucp_params_t params = {0};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    ucp_context_h ctx;
    ucs_status_t st = ucp_init(&params, NULL, &ctx);
    if (st != UCS_OK) {
        die("ucp_init", st);
    }
    ucp_context_attr_t ca;
    ca.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE;
    if ((st = ucp_context_query(ctx, &ca)) != UCS_OK) {
        die("ucp_context_query", st);
    }
    req_size = ca.request_size;
    ucp_worker_params_t wp = {0};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if ((st = ucp_worker_create(ctx, &wp, &worker)) != UCS_OK) {
        die("ucp_worker_create", st);
    }
    ucp_address_t *addr;
    size_t addr_len;
    if ((st = ucp_worker_get_address(worker, &addr, &addr_len)) != UCS_OK) {
        die("ucp_worker_get_address", st);
    }
    size_t peer_len;
    xfer(fd, &addr_len, sizeof(addr_len), 1);
    xfer(fd, &peer_len, sizeof(peer_len), 0);
    void *peer = malloc(peer_len);
    xfer(fd, addr, addr_len, 1);
    xfer(fd, peer, peer_len, 0);
    ucp_worker_release_address(worker, addr);

    ucp_ep_params_t ep_params = {0};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address = peer;
    ucp_ep_h ep;
    if ((st = ucp_ep_create(worker, &ep_params, &ep)) != UCS_OK) {
        die("ucp_ep_create", st);
    }

    char *buf = calloc(1, size ? size : 1);
    long nb = iters / BATCH;
    double *batch = calloc((size_t)nb, sizeof(double));
    double t_all = 0;
    for (long i = 0; i < warmup + iters; i++) {
        if (i >= warmup && (i - warmup) % BATCH == 0) {
            double t = now_us();
            if (i > warmup) {
                batch[(i - warmup) / BATCH - 1] = t;
            } else {
                t_all = t;
            }
        }
        if (rank == 0) {
            send_msg(ep, buf, size);
            recv_msg(buf, size);
        } else {
            recv_msg(buf, size);
            send_msg(ep, buf, size);
        }
    }
    double t_end = now_us();
    batch[nb - 1] = t_end;
    for (long b = nb - 1; b > 0; b--) {
        batch[b] = (batch[b] - batch[b - 1]) / BATCH / 2;
    }
    batch[0] = (batch[0] - t_all) / BATCH / 2;
    qsort(batch, (size_t)nb, sizeof(double), cmp_double);

    /* A flush close: both sides progress until their closes are done,
     * then wait for each other before the worker goes. */
    ucp_request_param_t cp = {0};
    wait_req(ucp_ep_close_nbx(ep, &cp), "close");
    char sync = 0;
    xfer(fd, &sync, 1, 1);
    xfer(fd, &sync, 1, 0);
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    if (rank == 0) {
        printf("capi-tag-lat: mode=%s size=%zu iters=%ld lat_us=%.4f median_batch_us=%.4f\n",
               ompi_mode ? "ompi" : "nbx", size, iters, (t_end - t_all) / iters / 2, batch[nb / 2]);
        int status = 0;
        waitpid(child, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    return 0;
}
