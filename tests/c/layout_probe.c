/* Prints sizes and offsets of the UCX 1.13 structs that rucx's C API
 * mirrors in Rust (capi/src/types.rs), for the numbers its unit test
 * checks. Build: cc -I/usr/include tests/c/layout_probe.c && ./a.out */
#include <stddef.h>
#include <stdio.h>
#include <ucp/api/ucp.h>

#define S(t) printf("sizeof %-26s %zu\n", #t, sizeof(t))
#define O(t, f) printf("  %-24s %-18s %zu\n", #t, #f, offsetof(t, f))

int main(void)
{
    S(ucs_status_t);
    S(ucp_params_t);
    O(ucp_params_t, request_size); O(ucp_params_t, request_init);
    O(ucp_params_t, request_cleanup); O(ucp_params_t, mt_workers_shared);
    O(ucp_params_t, name);
    S(ucp_context_attr_t);
    O(ucp_context_attr_t, thread_mode); O(ucp_context_attr_t, memory_types);
    O(ucp_context_attr_t, name);
    S(ucp_worker_params_t);
    O(ucp_worker_params_t, cpu_mask); O(ucp_worker_params_t, events);
    O(ucp_worker_params_t, user_data); O(ucp_worker_params_t, event_fd);
    O(ucp_worker_params_t, flags); O(ucp_worker_params_t, name);
    O(ucp_worker_params_t, client_id);
    S(ucp_worker_attr_t);
    O(ucp_worker_attr_t, address_flags); O(ucp_worker_attr_t, address);
    O(ucp_worker_attr_t, address_length); O(ucp_worker_attr_t, max_am_header);
    O(ucp_worker_attr_t, name); O(ucp_worker_attr_t, max_debug_string);
    S(ucp_ep_params_t);
    O(ucp_ep_params_t, err_mode); O(ucp_ep_params_t, err_handler);
    O(ucp_ep_params_t, user_data); O(ucp_ep_params_t, flags);
    O(ucp_ep_params_t, sockaddr); O(ucp_ep_params_t, conn_request);
    O(ucp_ep_params_t, name); O(ucp_ep_params_t, local_sockaddr);
    S(ucp_request_param_t);
    O(ucp_request_param_t, flags); O(ucp_request_param_t, request);
    O(ucp_request_param_t, cb); O(ucp_request_param_t, datatype);
    O(ucp_request_param_t, user_data); O(ucp_request_param_t, memory_type);
    O(ucp_request_param_t, recv_info); O(ucp_request_param_t, memh);
    S(ucp_tag_recv_info_t);
    S(ucp_listener_params_t);
    O(ucp_listener_params_t, sockaddr); O(ucp_listener_params_t, accept_handler);
    O(ucp_listener_params_t, conn_handler);
    S(ucp_listener_attr_t);
    O(ucp_listener_attr_t, sockaddr);
    S(ucp_conn_request_attr_t);
    O(ucp_conn_request_attr_t, client_address); O(ucp_conn_request_attr_t, client_id);
    return 0;
}
