/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * rucx C API: UCP handles, callback types and the structures that
 * ucp_compat.h needs (UCX 1.13 names, values and layouts).
 */
#ifndef RUCX_UCP_API_UCP_DEF_H
#define RUCX_UCP_API_UCP_DEF_H

#include <ucs/memory/memory_type.h>
#include <ucs/type/status.h>
#include <ucs/config/types.h>
#include <stddef.h>
#include <stdint.h>

BEGIN_C_DECLS

/* Structures defined in ucp.h, named here for the callbacks below. */
typedef struct ucp_tag_recv_info ucp_tag_recv_info_t;
typedef struct ucp_am_recv_param ucp_am_recv_param_t;

/*
 * Opaque handles. The library owns the objects; the application holds
 * pointers to them and never looks inside.
 */
typedef struct ucp_context      *ucp_context_h;      /* one library instance */
typedef struct ucp_config       ucp_config_t;        /* parsed UCX_* settings */
typedef struct ucp_ep           *ucp_ep_h;           /* connection to a peer */
typedef struct ucp_conn_request *ucp_conn_request_h; /* incoming connection */
typedef struct ucp_address      ucp_address_t;       /* packed worker address */
typedef struct ucp_rkey         *ucp_rkey_h;         /* unpacked remote key */
typedef struct ucp_mem          *ucp_mem_h;          /* mapped memory region */
typedef struct ucp_listener     *ucp_listener_h;     /* socket listener */
typedef struct ucp_worker       *ucp_worker_h;       /* progress engine */
typedef struct ucp_recv_desc    *ucp_tag_message_h;  /* probed, kept message */

/* Tags are 64-bit; a datatype is a 64-bit word (see ucp_dt_make_contig). */
typedef uint64_t ucp_tag_t;
typedef uint64_t ucp_datatype_t;

/* Endpoint error handling: NONE (no guarantees) or PEER (every request
 * completes, with an error if the peer fails). */
typedef enum {
    UCP_ERR_HANDLING_MODE_NONE,
    UCP_ERR_HANDLING_MODE_PEER
} ucp_err_handling_mode_t;

/* What ucp_mem_query() reports; field_mask picks the fields. */
typedef struct ucp_mem_attr {
    uint64_t          field_mask;
    void              *address;
    size_t            length;
    ucs_memory_type_t mem_type;
} ucp_mem_attr_t;

enum ucp_mem_attr_field {
    UCP_MEM_ATTR_FIELD_ADDRESS  = UCS_BIT(0),
    UCP_MEM_ATTR_FIELD_LENGTH   = UCS_BIT(1),
    UCP_MEM_ATTR_FIELD_MEM_TYPE = UCS_BIT(2)
};

/* Called on a request slot when it is first set up and when it is freed. */
typedef void (*ucp_request_init_callback_t)(void *request);
typedef void (*ucp_request_cleanup_callback_t)(void *request);

/* Send completion: the older form, and the *_nbx form with user data. */
typedef void (*ucp_send_callback_t)(void *request, ucs_status_t status);
typedef void (*ucp_send_nbx_callback_t)(void *request, ucs_status_t status,
                                        void *user_data);

/* Endpoint failure: the callback and its argument. */
typedef void (*ucp_err_handler_cb_t)(void *arg, ucp_ep_h ep,
                                     ucs_status_t status);

typedef struct ucp_err_handler {
    ucp_err_handler_cb_t cb;
    void                 *arg;
} ucp_err_handler_t;

/* Listener callbacks: an endpoint already accepted (older form), or a
 * connection request to accept with ucp_ep_create() or refuse with
 * ucp_listener_reject(). */
typedef void (*ucp_listener_accept_callback_t)(ucp_ep_h ep, void *arg);
typedef void (*ucp_listener_conn_callback_t)(ucp_conn_request_h conn_request,
                                             void *arg);

typedef struct ucp_listener_conn_handler {
    ucp_listener_conn_callback_t cb;
    void                         *arg;
} ucp_listener_conn_handler_t;

/* Receive completions: stream, tag, and active-message data. */
typedef void (*ucp_stream_recv_callback_t)(void *request, ucs_status_t status,
                                           size_t length);
typedef void (*ucp_stream_recv_nbx_callback_t)(void *request,
                                               ucs_status_t status,
                                               size_t length, void *user_data);
typedef void (*ucp_tag_recv_callback_t)(void *request, ucs_status_t status,
                                        ucp_tag_recv_info_t *info);
typedef void (*ucp_tag_recv_nbx_callback_t)(void *request, ucs_status_t status,
                                            const ucp_tag_recv_info_t *tag_info,
                                            void *user_data);
typedef void (*ucp_am_recv_data_nbx_callback_t)(void *request,
                                                ucs_status_t status,
                                                size_t length,
                                                void *user_data);

/* Events that wake a worker sleeping on its event fd (bit flags). */
typedef enum ucp_wakeup_event_types {
    UCP_WAKEUP_RMA      = UCS_BIT(0),
    UCP_WAKEUP_AMO      = UCS_BIT(1),
    UCP_WAKEUP_TAG_SEND = UCS_BIT(2),
    UCP_WAKEUP_TAG_RECV = UCS_BIT(3),
    UCP_WAKEUP_TX       = UCS_BIT(10),
    UCP_WAKEUP_RX       = UCS_BIT(11),
    UCP_WAKEUP_EDGE     = UCS_BIT(16)
} ucp_wakeup_event_t;

/*
 * Active-message handlers: the older form (ucp_worker_set_am_handler) and
 * the form with a user header and receive parameters
 * (ucp_worker_set_am_recv_handler). Returning UCS_INPROGRESS keeps the
 * data, to be released later.
 */
typedef ucs_status_t (*ucp_am_callback_t)(void *arg, void *data, size_t length,
                                          ucp_ep_h reply_ep, unsigned flags);
typedef ucs_status_t (*ucp_am_recv_callback_t)(void *arg, const void *header,
                                               size_t header_length,
                                               void *data, size_t length,
                                               const ucp_am_recv_param_t *param);

/* Endpoint creation parameters; field_mask (ucp_ep_params_field) picks the
 * fields that are set. */
typedef struct ucp_ep_params {
    uint64_t                field_mask;
    const ucp_address_t     *address;
    ucp_err_handling_mode_t err_mode;
    ucp_err_handler_t       err_handler;
    void                    *user_data;
    unsigned                flags;
    ucs_sock_addr_t         sockaddr;
    ucp_conn_request_h      conn_request;
    const char              *name;
    ucs_sock_addr_t         local_sockaddr;
} ucp_ep_params_t;

/* Length of the name arrays in attribute structures, with the NUL. */
#define UCP_ENTITY_NAME_MAX 32

END_C_DECLS

#endif /* RUCX_UCP_API_UCP_DEF_H */
