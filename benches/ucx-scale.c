/*
 * ucx-scale: the endpoint benchmark of rucx-scale, written against UCX's
 * ucp API, with the same options and the same output line, so that the
 * two can be compared run for run.
 *
 *   cc -O2 -o ucx-scale benches/ucx-scale.c -lucp -lucs
 *   UCX_TLS=tcp UCX_NET_DEVICES=lo ./ucx-scale -n 1000 -P 4
 *
 * One worker creates N endpoints to N workers held by P child processes
 * (this program started again with --serve K), sends one active message
 * on each and waits for the answer, twice. It prints the mean creation
 * time per endpoint (all, first and last tenth), the median first and
 * warm round trip, and the growth of resident memory and of open
 * descriptors per endpoint, here and in the children.
 *
 * Only the endpoint mode of rucx-scale is here (no --incast).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

#define ECHO 1
#define ANSWER 2
#define RTT_LIMIT_S 60.0

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static long fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    long n = 0;
    if (!d)
        return 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own descriptor */
}

static void raise_nofile(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

static void die(const char *what, ucs_status_t st)
{
    fprintf(stderr, "ucx-scale: %s: %s\n", what, ucs_status_string(st));
    exit(1);
}

static ucp_context_h init_context(void)
{
    ucp_params_t p = {0};
    ucp_context_h ctx;
    ucs_status_t st;
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    st = ucp_init(&p, NULL, &ctx);
    if (st != UCS_OK)
        die("ucp_init", st);
    return ctx;
}

static ucp_worker_h new_worker(ucp_context_h ctx)
{
    ucp_worker_params_t p = {0};
    ucp_worker_h w;
    ucs_status_t st;
    p.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    p.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(ctx, &p, &w);
    if (st != UCS_OK)
        die("ucp_worker_create", st);
    return w;
}

static void set_handler(ucp_worker_h w, unsigned id, ucp_am_recv_callback_t cb, void *arg)
{
    ucp_am_handler_param_t p = {0};
    ucs_status_t st;
    p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                   UCP_AM_HANDLER_PARAM_FIELD_ARG;
    p.id = id;
    p.cb = cb;
    p.arg = arg;
    st = ucp_worker_set_am_recv_handler(w, &p);
    if (st != UCS_OK)
        die("ucp_worker_set_am_recv_handler", st);
}

/* The remote side: answers every ECHO on its reply endpoint. */
static ucs_status_t on_echo(void *arg, const void *hdr, size_t hdr_len, void *data,
                            size_t len, const ucp_am_recv_param_t *param)
{
    ucp_request_param_t p = {0};
    ucs_status_ptr_t r;
    static char payload[64];
    (void)arg;
    (void)hdr;
    (void)hdr_len;
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) || len > sizeof payload)
        return UCS_OK;
    memcpy(payload, data, len);
    r = ucp_am_send_nbx(param->reply_ep, ANSWER, NULL, 0, payload, len, &p);
    if (UCS_PTR_IS_ERR(r))
        fprintf(stderr, "ucx-scale: answer failed: %s\n",
                ucs_status_string(UCS_PTR_STATUS(r)));
    else if (r != NULL)
        ucp_request_free(r);
    return UCS_OK;
}

static int serve(int count)
{
    ucp_context_h ctx;
    ucp_worker_h *ws = calloc(count, sizeof *ws);
    char *busy = calloc(count, 1);
    struct epoll_event evs[256];
    char line[256];
    size_t have = 0;
    double last_sweep = now_s();
    int ep_fd = epoll_create1(EPOLL_CLOEXEC);
    raise_nofile();
    ctx = init_context();
    for (int i = 0; i < count; i++) {
        ucp_address_t *a;
        size_t alen;
        ucs_status_t st;
        ws[i] = new_worker(ctx);
        set_handler(ws[i], ECHO, on_echo, NULL);
        st = ucp_worker_get_address(ws[i], &a, &alen);
        if (st != UCS_OK)
            die("ucp_worker_get_address", st);
        printf("addr ");
        for (size_t k = 0; k < alen; k++)
            printf("%02x", ((unsigned char *)a)[k]);
        printf("\n");
        ucp_worker_release_address(ws[i], a);
    }
    /* Each worker's event fd in one epoll set: an answer waits only for
     * the worker that has work, not for a sweep over all of them. */
    for (int i = 0; i < count; i++) {
        int fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
        ucs_status_t st = ucp_worker_get_efd(ws[i], &fd);
        if (st != UCS_OK)
            die("ucp_worker_get_efd", st);
        if (epoll_ctl(ep_fd, EPOLL_CTL_ADD, fd, &ev)) {
            perror("epoll_ctl");
            return 1;
        }
        busy[i] = 1;
    }
    struct epoll_event in = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    epoll_ctl(ep_fd, EPOLL_CTL_ADD, 0, &in);
    printf("ready %ld %ld\n", rss_kb(), fds());
    fflush(stdout);
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    for (;;) {
        int any = 0, read_stdin = 0;
        for (int i = 0; i < count && !any; i++)
            any = busy[i];
        int n = epoll_wait(ep_fd, evs, 256, any ? 0 : 10);
        for (int k = 0; k < n; k++) {
            if (evs[k].data.u64 == UINT64_MAX)
                read_stdin = 1;
            else
                busy[evs[k].data.u64] = 1;
        }
        if (now_s() - last_sweep >= 0.1) {
            last_sweep = now_s();
            memset(busy, 1, count);
        }
        for (int i = 0; i < count; i++) {
            if (!busy[i])
                continue;
            while (ucp_worker_progress(ws[i]))
                ;
            busy[i] = ucp_worker_arm(ws[i]) == UCS_ERR_BUSY;
        }
        if (!read_stdin)
            continue;
        ssize_t got = read(0, line + have, sizeof line - 1 - have);
        if (got == 0)
            return 0;
        if (got < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return 1;
        }
        have += got;
        line[have] = 0;
        char *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = 0;
            if (!strcmp(line, "report")) {
                printf("report %ld %ld\n", rss_kb(), fds());
                fflush(stdout);
            } else if (!strcmp(line, "exit")) {
                return 0;
            }
            have -= nl + 1 - line;
            memmove(line, nl + 1, have + 1);
        }
        if (have >= sizeof line - 1)
            have = 0;
    }
}

/* The driver. */
static uint64_t answers;

static ucs_status_t on_answer(void *arg, const void *hdr, size_t hdr_len, void *data,
                              size_t len, const ucp_am_recv_param_t *param)
{
    (void)arg, (void)hdr, (void)hdr_len, (void)data, (void)len, (void)param;
    answers++;
    return UCS_OK;
}

struct child {
    pid_t pid;
    FILE *out; /* its standard output */
    FILE *in;  /* its standard input */
};

static struct child spawn(const char *self, int count)
{
    int to[2], from[2];
    struct child c;
    char n[32];
    if (pipe(to) || pipe(from)) {
        perror("pipe");
        exit(1);
    }
    c.pid = fork();
    if (c.pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[1]);
        close(from[0]);
        snprintf(n, sizeof n, "%d", count);
        execl(self, self, "--serve", n, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    c.out = fdopen(from[0], "r");
    c.in = fdopen(to[1], "w");
    return c;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n ? v[n / 2] : 0;
}

static double mean(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return n ? s / n : 0;
}

static unsigned char unhex(char c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

static void round_trips(ucp_worker_h w, ucp_ep_h *eps, int n, double *out)
{
    static char payload[8];
    for (int i = 0; i < n; i++) {
        ucp_request_param_t p = {0};
        uint64_t before = answers;
        double t = now_s();
        ucs_status_ptr_t r;
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_AM_SEND_FLAG_REPLY;
        r = ucp_am_send_nbx(eps[i], ECHO, NULL, 0, payload, sizeof payload, &p);
        if (UCS_PTR_IS_ERR(r))
            die("sending", UCS_PTR_STATUS(r));
        if (r != NULL)
            ucp_request_free(r);
        for (unsigned spins = 1; answers == before; spins++) {
            ucp_worker_progress(w);
            if (spins % 1024 == 0 && now_s() - t > RTT_LIMIT_S) {
                fprintf(stderr, "ucx-scale: no answer on endpoint %d of %d in %.0f s\n", i, n,
                        RTT_LIMIT_S);
                exit(1);
            }
        }
        out[i] = (now_s() - t) * 1e6;
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: ucx-scale [-n ENDPOINTS] [-P PROCESSES] [-H]\n"
                    "The transports are chosen by UCX_TLS and UCX_NET_DEVICES.\n");
}

int main(int argc, char **argv)
{
    int n = 1000, procs = 4, header = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--serve") && i + 1 < argc)
            return serve(atoi(argv[i + 1]));
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-P") && i + 1 < argc)
            procs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-H"))
            header = 0;
        else {
            usage();
            return 1;
        }
    }
    if (n <= 0 || procs <= 0) {
        usage();
        return 1;
    }
    if (procs > n)
        procs = n;
    raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    struct child *kids = calloc(procs, sizeof *kids);
    unsigned char **addrs = calloc(n, sizeof *addrs);
    long rb_rss = 0, rb_fds = 0, r_rss = 0, r_fds = 0;
    size_t cap = 1 << 16;
    char *line = malloc(cap);
    int got = 0;
    for (int p = 0; p < procs; p++)
        kids[p] = spawn("/proc/self/exe", n / procs + (p < n % procs));
    for (int p = 0; p < procs; p++) {
        int count = n / procs + (p < n % procs);
        for (int k = 0; k < count; k++) {
            if (!fgets(line, cap, kids[p].out) || strncmp(line, "addr ", 5)) {
                fprintf(stderr, "ucx-scale: a child sent no address\n");
                return 1;
            }
            size_t len = strcspn(line + 5, "\n") / 2;
            addrs[got] = malloc(len);
            for (size_t b = 0; b < len; b++)
                addrs[got][b] = unhex(line[5 + 2 * b]) << 4 | unhex(line[6 + 2 * b]);
            got++;
        }
        long a = 0, b = 0;
        if (!fgets(line, cap, kids[p].out) || sscanf(line, "ready %ld %ld", &a, &b) != 2) {
            fprintf(stderr, "ucx-scale: a child did not get ready\n");
            return 1;
        }
        rb_rss += a;
        rb_fds += b;
    }

    ucp_context_h ctx = init_context();
    ucp_worker_h w = new_worker(ctx);
    set_handler(w, ANSWER, on_answer, NULL);
    ucp_worker_progress(w);
    long rss0 = rss_kb(), fds0 = fds();
    ucp_ep_h *eps = calloc(n, sizeof *eps);
    double *create = calloc(n, sizeof *create);
    double *first = calloc(n, sizeof *first), *warm = calloc(n, sizeof *warm);
    for (int i = 0; i < n; i++) {
        ucp_ep_params_t p = {0};
        ucs_status_t st;
        double t = now_s();
        p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        p.address = (ucp_address_t *)addrs[i];
        st = ucp_ep_create(w, &p, &eps[i]);
        if (st != UCS_OK) {
            fprintf(stderr, "ucx-scale: endpoint %d of %d: %s\n", i, n, ucs_status_string(st));
            return 1;
        }
        create[i] = (now_s() - t) * 1e6;
    }
    round_trips(w, eps, n, first);
    round_trips(w, eps, n, warm);
    long rss1 = rss_kb(), fds1 = fds();
    for (int p = 0; p < procs; p++) {
        long a = 0, b = 0;
        fprintf(kids[p].in, "report\n");
        fflush(kids[p].in);
        if (!fgets(line, cap, kids[p].out) || sscanf(line, "report %ld %ld", &a, &b) != 2) {
            fprintf(stderr, "ucx-scale: a child did not report\n");
            return 1;
        }
        r_rss += a;
        r_fds += b;
    }
    for (int p = 0; p < procs; p++) {
        fprintf(kids[p].in, "exit\n");
        fclose(kids[p].in);
        waitpid(kids[p].pid, NULL, 0);
    }
    int tenth = n / 10 > 0 ? n / 10 : 1;
    const char *tls = getenv("UCX_TLS");
    if (header)
        printf("# tls       endpoints procs  create_us first10_us last10_us  rtt1_us  rtt2_us   "
               "kB/ep  fds/ep  remote_kB/ep remote_fds/ep\n");
    printf("%-12s %8d %5d %10.2f %10.2f %9.2f %8.2f %8.2f %7.2f %7.2f %13.2f %13.2f\n",
           tls ? tls : "all", n, procs, mean(create, n), mean(create, tenth),
           mean(create + n - tenth, tenth), median(first, n), median(warm, n),
           (double)(rss1 > rss0 ? rss1 - rss0 : 0) / n,
           (double)(fds1 > fds0 ? fds1 - fds0 : 0) / n,
           (double)(r_rss > rb_rss ? r_rss - rb_rss : 0) / n,
           (double)(r_fds > rb_fds ? r_fds - rb_fds : 0) / n);
    return 0;
}
