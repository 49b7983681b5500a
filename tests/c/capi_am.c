/* rucx's libucp.so through UCX 1.13's active message calls, in one
 * process: a context and two workers connected by address; messages with
 * a user header of 0 B, 8 B, 64 KiB and 4 MiB (the last by rendezvous,
 * its data fetched with ucp_am_recv_data_nbx from inside the handler and
 * after progress); data kept by a handler and released later; a reply on
 * the reply endpoint; forced eager and rendezvous; an iovec send; the
 * legacy ucp_worker_set_am_handler and ucp_am_send_nb with and without a
 * reply endpoint, data kept; wrong arguments and an id without a handler.
 * Prints "capi_am: ok" and exits 0 when every check holds. */
#include <ucp/api/ucp.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)

/* The application's part of each request. */
struct app_req {
    int          completed;
    ucs_status_t status;
    size_t       length;
};

static void req_init(void *r)
{
    memset(r, 0, sizeof(struct app_req));
}

static ucp_worker_h wa, wb;

static void progress_both(void)
{
    ucp_worker_progress(wa);
    ucp_worker_progress(wb);
}

static void send_cb(void *r, ucs_status_t st, void *ud)
{
    CHECK(ud == (void *)0x61);
    ((struct app_req *)r)->completed = 1;
    ((struct app_req *)r)->status    = st;
}

static void send_cb_legacy(void *r, ucs_status_t st)
{
    ((struct app_req *)r)->completed = 1;
    ((struct app_req *)r)->status    = st;
}

static void recv_data_cb(void *r, ucs_status_t st, size_t length, void *ud)
{
    CHECK(ud == (void *)0x62);
    ((struct app_req *)r)->completed = 1;
    ((struct app_req *)r)->status    = st;
    ((struct app_req *)r)->length    = length;
}

/* Waits for request r (or NULL: done at once); returns its status. */
static ucs_status_t wait_req(void *r)
{
    time_t start = time(NULL);
    if (r == NULL) {
        return UCS_OK;
    }
    CHECK(!UCS_PTR_IS_ERR(r));
    while (!((struct app_req *)r)->completed) {
        CHECK(time(NULL) - start < 60);
        progress_both();
    }
    ucs_status_t st = ((struct app_req *)r)->status;
    ((struct app_req *)r)->completed = 0;
    ucp_request_free(r);
    return st;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
    }
}

/* What the handler does with a message. */
enum mode {
    COPY,        /* copy the data, return UCS_OK */
    KEEP,        /* keep the data (or the descriptor): UCS_INPROGRESS */
    FETCH_INSIDE /* a rendezvous message's data is fetched in the handler */
};

/* What the handlers saw. */
static struct {
    enum mode mode;
    int       count;
    uint8_t   header[64];
    size_t    header_length;
    uint8_t  *data;         /* a copy, or the kept pointer */
    size_t    length;
    uint64_t  recv_attr;
    ucp_ep_h  reply_ep;
    void     *fetch_req;    /* ucp_am_recv_data_nbx from the handler */
    uint8_t  *fetch_buf;
    int       reply;        /* send a reply on the reply endpoint */
} seen;

static void *fetch(void *desc, void *buf, size_t len)
{
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.recv_am   = recv_data_cb;
    p.user_data    = (void *)0x62;
    void *r = ucp_am_recv_data_nbx(wb, desc, buf, len, &p);
    CHECK(r != NULL && !UCS_PTR_IS_ERR(r));
    return r;
}

static ucs_status_t am_handler(void *arg, const void *header, size_t header_length,
                               void *data, size_t length,
                               const ucp_am_recv_param_t *param)
{
    CHECK(arg == (void *)0x71);
    CHECK(header_length <= sizeof(seen.header));
    seen.count++;
    seen.header_length = header_length;
    if (header_length > 0) {
        memcpy(seen.header, header, header_length);
    }
    seen.length    = length;
    seen.recv_attr = param->recv_attr;
    seen.reply_ep  = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ?
                     param->reply_ep : NULL;
    if (seen.reply) {
        static const char pong[] = "pong";
        ucp_request_param_t p = {0};
        CHECK(seen.reply_ep != NULL);
        void *r = ucp_am_send_nbx(seen.reply_ep, 2, NULL, 0, pong, sizeof(pong), &p);
        CHECK(!UCS_PTR_IS_ERR(r));
        if (r != NULL) {
            ucp_request_free(r); /* no callback was set */
        }
    }
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        CHECK(!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA));
        if (seen.mode == FETCH_INSIDE) {
            seen.fetch_buf = malloc(length + 1);
            seen.fetch_req = fetch(data, seen.fetch_buf, length);
            return UCS_OK;
        }
        CHECK(seen.mode == KEEP);
        seen.data = data; /* the descriptor */
        return UCS_INPROGRESS;
    }
    CHECK(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA);
    if (seen.mode == KEEP) {
        seen.data = data;
        return UCS_INPROGRESS;
    }
    seen.data = malloc(length + 1);
    memcpy(seen.data, data, length);
    return UCS_OK;
}

/* Worker a's handler for replies. */
static int    n_replies;
static char   reply_text[16];

static ucs_status_t reply_handler(void *arg, const void *header, size_t header_length,
                                  void *data, size_t length,
                                  const ucp_am_recv_param_t *param)
{
    (void)arg;
    (void)header;
    CHECK(header_length == 0 && length == 5 && length < sizeof(reply_text));
    CHECK(!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP));
    memcpy(reply_text, data, length);
    n_replies++;
    return UCS_OK;
}

static void wait_count(int *counter, int want)
{
    time_t start = time(NULL);
    while (*counter < want) {
        CHECK(time(NULL) - start < 60);
        progress_both();
    }
}

/* Sends id 1 with a header and len bytes; `flags` are the send flags.
 * Returns the send's request (or NULL) unwaited. */
static void *send_am(ucp_ep_h ep, const void *hdr, size_t hdr_len,
                     const void *buf, size_t len, uint32_t flags)
{
    ucp_request_param_t p = {0};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send      = send_cb;
    p.user_data    = (void *)0x61;
    p.flags        = flags;
    void *r = ucp_am_send_nbx(ep, 1, hdr, hdr_len, buf, len, &p);
    CHECK(!UCS_PTR_IS_ERR(r));
    return r;
}

/* One message of len bytes through handler mode m; checks header, data,
 * and whether it came by rendezvous (rndv: 1 yes, 0 no, -1 either). */
static void one_message(ucp_ep_h ep, size_t len, uint32_t flags, enum mode m,
                        int rndv)
{
    uint8_t *out = malloc(len + 1);
    char hdr[32];
    int before = seen.count;

    snprintf(hdr, sizeof(hdr), "header-%zu", len);
    fill(out, len, (unsigned)len);
    seen.mode = m;
    seen.data = NULL;
    seen.fetch_req = NULL;
    void *s = send_am(ep, hdr, strlen(hdr), out, len, flags);
    wait_count(&seen.count, before + 1);
    CHECK(seen.header_length == strlen(hdr));
    CHECK(memcmp(seen.header, hdr, strlen(hdr)) == 0);
    CHECK(seen.length == len);
    int was_rndv = (seen.recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    CHECK(rndv < 0 || rndv == was_rndv);
    CHECK(!(seen.recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP));
    uint8_t *got;
    if (was_rndv) {
        if (m == FETCH_INSIDE) {
            got = seen.fetch_buf;
            CHECK(wait_req(seen.fetch_req) == UCS_OK);
        } else {
            /* The descriptor, kept past the handler: fetched now. */
            got = malloc(len + 1);
            CHECK(wait_req(fetch(seen.data, got, len)) == UCS_OK);
        }
    } else {
        got = seen.data;
    }
    CHECK(wait_req(s) == UCS_OK);
    CHECK(memcmp(got, out, len) == 0);
    if (m == KEEP && !was_rndv) {
        ucp_am_data_release(wb, seen.data);
    } else {
        free(got);
    }
    printf("am %zu B%s%s: ok\n", len, was_rndv ? " (rendezvous)" : "",
           m == KEEP ? " (kept)" : "");
    free(out);
}

/* The legacy handler (id 5 on b, id 6 on a for replies). */
static struct {
    int      count;
    uint8_t  data[256];
    size_t   length;
    unsigned flags;
    ucp_ep_h reply_ep;
    int      keep;
    void    *kept;
} legacy;

static ucs_status_t legacy_handler(void *arg, void *data, size_t length,
                                   ucp_ep_h reply_ep, unsigned flags)
{
    CHECK(arg == (void *)0x81);
    CHECK(length <= sizeof(legacy.data));
    legacy.count++;
    memcpy(legacy.data, data, length);
    legacy.length   = length;
    legacy.flags    = flags;
    legacy.reply_ep = reply_ep;
    if (reply_ep != NULL) {
        static const char ack[] = "ack";
        void *r = ucp_am_send_nb(reply_ep, 6, ack, sizeof(ack), ucp_dt_make_contig(1),
                                 send_cb_legacy, 0);
        CHECK(!UCS_PTR_IS_ERR(r));
        if (r != NULL) {
            ucp_request_free(r);
        }
    }
    if (legacy.keep && (flags & UCP_CB_PARAM_FLAG_DATA)) {
        legacy.kept = data;
        return UCS_INPROGRESS;
    }
    return UCS_OK;
}

static int n_acks;

static ucs_status_t ack_handler(void *arg, void *data, size_t length,
                                ucp_ep_h reply_ep, unsigned flags)
{
    (void)arg;
    (void)flags;
    CHECK(length == 4 && strcmp(data, "ack") == 0 && reply_ep == NULL);
    n_acks++;
    return UCS_OK;
}

int main(void)
{
    ucp_config_t *config;
    ucp_context_h ctx;
    ucp_params_t params = {0};
    ucp_worker_params_t wp = {0};
    ucp_address_t *addr_b;
    size_t addr_b_len;
    ucp_ep_params_t ep_params = {0};
    ucp_ep_h ep;

    CHECK(ucp_config_read(NULL, NULL, &config) == UCS_OK);
    ucp_config_print(config, stdout, "capi_am", UCS_CONFIG_PRINT_CONFIG |
                     UCS_CONFIG_PRINT_HEADER);
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                        UCP_PARAM_FIELD_REQUEST_INIT;
    params.features     = UCP_FEATURE_AM;
    params.request_size = sizeof(struct app_req);
    params.request_init = req_init;
    CHECK(ucp_init(&params, config, &ctx) == UCS_OK);
    ucp_config_release(config);
    ucp_context_print_info(ctx, stdout);

    wp.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    CHECK(ucp_worker_create(ctx, &wp, &wa) == UCS_OK);
    CHECK(ucp_worker_create(ctx, &wp, &wb) == UCS_OK);
    CHECK(ucp_worker_get_address(wb, &addr_b, &addr_b_len) == UCS_OK);
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address    = addr_b;
    CHECK(ucp_ep_create(wa, &ep_params, &ep) == UCS_OK);

    ucp_am_handler_param_t hp = {0};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                    UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id    = 1;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
    hp.cb    = am_handler;
    hp.arg   = (void *)0x71;

    /* Wrong arguments give statuses. */
    {
        CHECK(ucp_worker_set_am_recv_handler(NULL, &hp) == UCS_ERR_INVALID_PARAM);
        CHECK(ucp_worker_set_am_recv_handler(wb, NULL) == UCS_ERR_INVALID_PARAM);
        CHECK(ucp_worker_set_am_handler(NULL, 5, legacy_handler, NULL, 0) ==
              UCS_ERR_INVALID_PARAM);
        ucp_request_param_t p = {0};
        void *r = ucp_am_send_nbx(NULL, 1, NULL, 0, "x", 1, &p);
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
        r = ucp_am_send_nbx(ep, 1, NULL, 4, "x", 1, &p);
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
        r = ucp_am_send_nb(NULL, 5, "x", 1, ucp_dt_make_contig(1), NULL, 0);
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
        char buf[8];
        r = ucp_am_recv_data_nbx(NULL, buf, buf, 1, &p);
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
        r = ucp_am_recv_data_nbx(wb, buf, buf, 1, &p); /* not a descriptor */
        CHECK(UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) == UCS_ERR_INVALID_PARAM);
        ucp_am_data_release(NULL, buf);
        ucp_am_data_release(wb, buf); /* logged, ignored */
    }

    /* An id without a handler: dropped (with a log line). */
    {
        static const char lost[] = "lost";
        ucp_request_param_t p = {0};
        void *r = ucp_am_send_nbx(ep, 9, NULL, 0, lost, sizeof(lost), &p);
        CHECK(!UCS_PTR_IS_ERR(r));
        while (r != NULL && ucp_request_check_status(r) == UCS_INPROGRESS) {
            progress_both();
        }
        if (r != NULL) {
            ucp_request_free(r);
        }
        for (int i = 0; i < 100; i++) {
            progress_both();
        }
    }
    CHECK(ucp_worker_set_am_recv_handler(wb, &hp) == UCS_OK);
    CHECK(seen.count == 0);

    /* 0 B, 8 B, 64 KiB and 4 MiB; 4 MiB by rendezvous, fetched from
     * the handler and after it. */
    one_message(ep, 0, 0, COPY, 0);
    one_message(ep, 8, 0, COPY, 0);
    one_message(ep, 65536, 0, FETCH_INSIDE, -1);
    one_message(ep, 4 << 20, 0, FETCH_INSIDE, 1);
    one_message(ep, 4 << 20, 0, KEEP, 1);
    /* Data kept by the handler, released after the next message. */
    {
        uint8_t out[64];
        one_message(ep, 64, 0, KEEP, 0);
        seen.mode = KEEP;
        fill(out, sizeof(out), 3);
        int before = seen.count;
        CHECK(wait_req(send_am(ep, NULL, 0, out, sizeof(out), 0)) == UCS_OK);
        wait_count(&seen.count, before + 1);
        uint8_t *kept = seen.data;
        seen.mode = COPY;
        CHECK(wait_req(send_am(ep, "x", 1, "later", 5, 0)) == UCS_OK);
        wait_count(&seen.count, before + 2);
        CHECK(memcmp(seen.data, "later", 5) == 0);
        free(seen.data);
        CHECK(memcmp(kept, out, sizeof(out)) == 0);
        ucp_am_data_release(wb, kept);
        printf("kept and released: ok\n");
    }
    /* Forced protocols. */
    one_message(ep, 1 << 20, UCP_AM_SEND_FLAG_EAGER, COPY, 0);
    one_message(ep, 8, UCP_AM_SEND_FLAG_RNDV, FETCH_INSIDE, 1);
    one_message(ep, 16, UCP_AM_SEND_FLAG_RNDV, KEEP, 1);

    /* A reply on the reply endpoint, from the handler. */
    {
        ucp_am_handler_param_t rp = hp;
        rp.id  = 2;
        rp.cb  = reply_handler;
        rp.arg = NULL;
        CHECK(ucp_worker_set_am_recv_handler(wa, &rp) == UCS_OK);
        seen.mode  = COPY;
        seen.reply = 1;
        int before = seen.count;
        CHECK(wait_req(send_am(ep, "ping", 4, "data", 4, UCP_AM_SEND_FLAG_REPLY)) ==
              UCS_OK);
        wait_count(&seen.count, before + 1);
        CHECK(seen.reply_ep != NULL);
        free(seen.data);
        wait_count(&n_replies, 1);
        CHECK(strcmp(reply_text, "pong") == 0);
        seen.reply = 0;
        printf("reply: ok\n");
    }

    /* An iovec send. */
    {
        uint8_t a[100], b[3000], c[1];
        ucp_dt_iov_t iov[3] = {{a, sizeof(a)}, {b, sizeof(b)}, {c, sizeof(c)}};
        fill(a, sizeof(a), 1);
        fill(b, sizeof(b), 2);
        fill(c, sizeof(c), 3);
        ucp_request_param_t p = {0};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
        p.datatype     = ucp_dt_make_iov();
        seen.mode      = COPY;
        int before     = seen.count;
        void *r = ucp_am_send_nbx(ep, 1, "iov", 3, iov, 3, &p);
        CHECK(!UCS_PTR_IS_ERR(r));
        wait_count(&seen.count, before + 1);
        while (r != NULL && ucp_request_check_status(r) == UCS_INPROGRESS) {
            progress_both();
        }
        if (r != NULL) {
            CHECK(ucp_request_check_status(r) == UCS_OK);
            ucp_request_free(r);
        }
        CHECK(seen.length == sizeof(a) + sizeof(b) + sizeof(c));
        CHECK(memcmp(seen.data, a, sizeof(a)) == 0);
        CHECK(memcmp(seen.data + sizeof(a), b, sizeof(b)) == 0);
        CHECK(memcmp(seen.data + sizeof(a) + sizeof(b), c, sizeof(c)) == 0);
        free(seen.data);
        printf("iov: ok\n");
    }

    /* The legacy calls. */
    {
        uint8_t out[200];
        CHECK(ucp_worker_set_am_handler(wb, 5, legacy_handler, (void *)0x81,
                                        UCP_AM_FLAG_WHOLE_MSG) == UCS_OK);
        CHECK(ucp_worker_set_am_handler(wa, 6, ack_handler, NULL, 0) == UCS_OK);
        fill(out, sizeof(out), 5);
        void *r = ucp_am_send_nb(ep, 5, out, 50, ucp_dt_make_contig(4), send_cb_legacy, 0);
        CHECK(wait_req(r) == UCS_OK);
        wait_count(&legacy.count, 1);
        CHECK(legacy.length == 200 && memcmp(legacy.data, out, 200) == 0);
        CHECK(legacy.flags & UCP_CB_PARAM_FLAG_DATA);
        CHECK(legacy.reply_ep == NULL);

        r = ucp_am_send_nb(ep, 5, out, 10, ucp_dt_make_contig(1), send_cb_legacy,
                           UCP_AM_SEND_REPLY);
        CHECK(wait_req(r) == UCS_OK);
        wait_count(&legacy.count, 2);
        CHECK(legacy.length == 10 && memcmp(legacy.data, out, 10) == 0);
        CHECK(legacy.reply_ep != NULL);
        wait_count(&n_acks, 1);

        legacy.keep = 1;
        r = ucp_am_send_nb(ep, 5, out + 1, 100, ucp_dt_make_contig(1), send_cb_legacy, 0);
        CHECK(wait_req(r) == UCS_OK);
        wait_count(&legacy.count, 3);
        void *kept = legacy.kept;
        legacy.keep = 0;
        r = ucp_am_send_nb(ep, 5, out, 7, ucp_dt_make_contig(1), send_cb_legacy, 0);
        CHECK(wait_req(r) == UCS_OK);
        wait_count(&legacy.count, 4);
        CHECK(memcmp(kept, out + 1, 100) == 0);
        ucp_am_data_release(wb, kept);
        printf("legacy: ok\n");
    }

    /* A handler removed: its messages are dropped. */
    {
        hp.cb = NULL;
        CHECK(ucp_worker_set_am_recv_handler(wb, &hp) == UCS_OK);
        int before = seen.count;
        CHECK(wait_req(send_am(ep, NULL, 0, "gone", 4, 0)) == UCS_OK);
        for (int i = 0; i < 100; i++) {
            progress_both();
        }
        CHECK(seen.count == before);
    }

    /* An endpoint back from b to a, used once. */
    ucp_ep_h ep_b;
    {
        ucp_address_t *addr_a;
        size_t addr_a_len;
        CHECK(ucp_worker_get_address(wa, &addr_a, &addr_a_len) == UCS_OK);
        ep_params.address = addr_a;
        CHECK(ucp_ep_create(wb, &ep_params, &ep_b) == UCS_OK);
        ucp_worker_release_address(wa, addr_a);
        ucp_request_param_t p = {0};
        int before = n_acks;
        CHECK(wait_req(ucp_am_send_nbx(ep_b, 6, NULL, 0, "ack", 4, &p)) == UCS_OK);
        wait_count(&n_acks, before + 1);
    }

    /* Flush and close. */
    {
        ucp_request_param_t p = {0};
        void *f = ucp_ep_flush_nbx(ep, &p);
        CHECK(!UCS_PTR_IS_ERR(f));
        if (f != NULL) {
            while (ucp_request_check_status(f) == UCS_INPROGRESS) {
                progress_both();
            }
            CHECK(ucp_request_check_status(f) == UCS_OK);
            ucp_request_free(f);
        }
        void *c = ucp_ep_close_nbx(ep, &p);
        CHECK(!UCS_PTR_IS_ERR(c));
        if (c != NULL) {
            time_t start = time(NULL);
            while (ucp_request_check_status(c) == UCS_INPROGRESS) {
                CHECK(time(NULL) - start < 30);
                progress_both();
            }
            ucp_request_free(c);
        }
        ucp_worker_destroy(wa);
        for (int i = 0; i < 1000; i++) {
            ucp_worker_progress(wb);
        }
    }

    /* An endpoint without error handling closes well in flush mode after
     * its peer's worker is gone. */
    {
        ucp_request_param_t p = {0};
        void *c = ucp_ep_close_nbx(ep_b, &p);
        CHECK(!UCS_PTR_IS_ERR(c));
        if (c != NULL) {
            time_t start = time(NULL);
            while (ucp_request_check_status(c) == UCS_INPROGRESS) {
                CHECK(time(NULL) - start < 30);
                ucp_worker_progress(wb);
            }
            CHECK(ucp_request_check_status(c) == UCS_OK);
            ucp_request_free(c);
        }
        printf("close after the peer: ok\n");
    }

    ucp_worker_release_address(wb, addr_b);
    ucp_worker_destroy(wb);
    ucp_cleanup(ctx);
    printf("capi_am: ok\n");
    return 0;
}
