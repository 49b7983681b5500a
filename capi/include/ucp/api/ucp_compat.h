/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * rucx C API: calls and types that UCX 1.13 keeps for older programs.
 * Each has a newer replacement in ucp.h (noted per group).
 */
#ifndef RUCX_UCP_API_UCP_COMPAT_H
#define RUCX_UCP_API_UCP_COMPAT_H

#include <ucp/api/ucp_def.h>
#include <ucs/sys/compiler_def.h>

BEGIN_C_DECLS

/* Listener callback for endpoints already accepted (now: connection
 * requests, ucp_listener_conn_handler_t). */
typedef struct ucp_listener_accept_handler {
    ucp_listener_accept_callback_t cb;
    void                           *arg;
} ucp_listener_accept_handler_t;

/* Request state (now: ucp_request_check_status, ucp_request_free,
 * ucp_tag_recv_request_test). */
int ucp_request_is_completed(void *request);
void ucp_request_release(void *request);
ucs_status_t ucp_request_test(void *request, ucp_tag_recv_info_t *info);

/* Closing an endpoint (now: ucp_ep_close_nbx). */
void ucp_ep_destroy(ucp_ep_h ep);
ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep);

/* Blocking flush (now: ucp_ep_flush_nbx, ucp_worker_flush_nbx). */
ucs_status_t ucp_ep_flush(ucp_ep_h ep);
ucs_status_t ucp_worker_flush(ucp_worker_h worker);

/* Blocking put and get (now: ucp_put_nbx, ucp_get_nbx). */
ucs_status_t ucp_put(ucp_ep_h ep, const void *buffer, size_t length,
                     uint64_t remote_addr, ucp_rkey_h rkey);
ucs_status_t ucp_get(ucp_ep_h ep, void *buffer, size_t length,
                     uint64_t remote_addr, ucp_rkey_h rkey);

/* Blocking atomics on 32- and 64-bit words (now: ucp_atomic_op_nbx). */
ucs_status_t ucp_atomic_add32(ucp_ep_h ep, uint32_t add,
                              uint64_t remote_addr, ucp_rkey_h rkey);
ucs_status_t ucp_atomic_add64(ucp_ep_h ep, uint64_t add,
                              uint64_t remote_addr, ucp_rkey_h rkey);
ucs_status_t ucp_atomic_fadd32(ucp_ep_h ep, uint32_t add, uint64_t remote_addr,
                               ucp_rkey_h rkey, uint32_t *result);
ucs_status_t ucp_atomic_fadd64(ucp_ep_h ep, uint64_t add, uint64_t remote_addr,
                               ucp_rkey_h rkey, uint64_t *result);
ucs_status_t ucp_atomic_swap32(ucp_ep_h ep, uint32_t swap,
                               uint64_t remote_addr, ucp_rkey_h rkey,
                               uint32_t *result);
ucs_status_t ucp_atomic_swap64(ucp_ep_h ep, uint64_t swap,
                               uint64_t remote_addr, ucp_rkey_h rkey,
                               uint64_t *result);
ucs_status_t ucp_atomic_cswap32(ucp_ep_h ep, uint32_t compare, uint32_t swap,
                                uint64_t remote_addr, ucp_rkey_h rkey,
                                uint32_t *result);
ucs_status_t ucp_atomic_cswap64(ucp_ep_h ep, uint64_t compare, uint64_t swap,
                                uint64_t remote_addr, ucp_rkey_h rkey,
                                uint64_t *result);

/* Changing an endpoint's parameters after creation. */
ucs_status_ptr_t ucp_ep_modify_nb(ucp_ep_h ep, const ucp_ep_params_t *params);

END_C_DECLS

#endif /* RUCX_UCP_API_UCP_COMPAT_H */
