/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * ABI probe for the rucx C headers.
 *
 * Prints one fact per line ("name value"): the size of every public type,
 * the signedness of enum and integer types, the offset and size of every
 * structure field, the value of every enum constant and of the public
 * macros, and what the inline functions do. tests/capi_abi.rs builds it
 * once against capi/include and once against UCX 1.13's installed headers
 * and requires the two outputs to be identical.
 */
#include <ucp/api/ucp.h>
#include <ucp/api/ucp_def.h>
#include <ucp/api/ucp_compat.h>
#include <ucp/api/ucp_version.h>
#include <ucs/type/status.h>
#include <ucs/memory/memory_type.h>
#include <ucs/type/thread_mode.h>
#include <ucs/type/cpu_set.h>
#include <ucs/config/types.h>
#include <ucs/sys/compiler_def.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SIZE(T) printf("sizeof(%s) %zu\n", #T, sizeof(T))
#define SIGNED(T) printf("signed(%s) %d\n", #T, (int)((T)-1 < (T)0))
#define FIELD(T, f) \
    printf("offsetof(%s, %s) %zu size %zu\n", #T, #f, offsetof(T, f), \
           sizeof(((T *)0)->f))
/* An integer expression: its value (as 64 bits), size and signedness. */
#define VALUE(e) \
    printf("%s %llu size %zu signed %d\n", #e, (unsigned long long)(e), \
           sizeof(e), (int)(((e) - (e) - 1) < 0))

/* ucp_init() is inline: it must call ucp_init_version() with the version
 * of the headers. The probe links against no library and catches the call
 * here. */
ucs_status_t ucp_init_version(unsigned api_major_version,
                              unsigned api_minor_version,
                              const ucp_params_t *params,
                              const ucp_config_t *config,
                              ucp_context_h *context_p)
{
    printf("ucp_init->ucp_init_version %u %u params %d config %d\n",
           api_major_version, api_minor_version, params != NULL,
           config != NULL);
    *context_p = NULL;
    return UCS_ERR_UNSUPPORTED;
}

/* A structure declared with UCS_CONFIG_ARRAY_FIELD. */
typedef UCS_CONFIG_ARRAY_FIELD(int, items) probe_int_array_t;

/* A packed structure: no padding between its fields. */
typedef struct {
    char c;
    int  i;
} UCS_S_PACKED probe_packed_t;

/* BEGIN_C_DECLS / END_C_DECLS expand to nothing in C. */
BEGIN_C_DECLS
static int probe_c_decls = 7;
END_C_DECLS

static void status_pointers(void)
{
    static const long long raw[] = {0, 1, -1, -4, -16, -25, -40, -59, -60,
                                    -80, -89, -99, -100, -101, -4096};
    int local = 0;
    void *real = &local;
    size_t i;

    for (i = 0; i < sizeof(raw) / sizeof(raw[0]); ++i) {
        void *p = (void *)(intptr_t)raw[i];
        printf("status_ptr(%lld) is_err %d is_ptr %d raw %d status %d\n",
               raw[i], (int)UCS_PTR_IS_ERR(p), (int)UCS_PTR_IS_PTR(p),
               (int)UCS_PTR_RAW_STATUS(p), (int)UCS_PTR_STATUS(p));
    }
    printf("status_ptr(real) is_err %d is_ptr %d status %d\n",
           (int)UCS_PTR_IS_ERR(real), (int)UCS_PTR_IS_PTR(real),
           (int)UCS_PTR_STATUS(real));
    printf("UCS_STATUS_PTR(UCS_OK) %d\n", UCS_STATUS_PTR(UCS_OK) == NULL);
    printf("UCS_STATUS_PTR(UCS_ERR_NO_MEMORY) %lld\n",
           (long long)(intptr_t)UCS_STATUS_PTR(UCS_ERR_NO_MEMORY));
    printf("UCS_STATUS_PTR(UCS_ERR_NO_MEMORY) is_err %d\n",
           (int)UCS_PTR_IS_ERR(UCS_STATUS_PTR(UCS_ERR_NO_MEMORY)));
    printf("sizeof(UCS_PTR_STATUS(real)) %zu\n", sizeof(UCS_PTR_STATUS(real)));
    printf("sizeof(UCS_PTR_RAW_STATUS(real)) %zu\n",
           sizeof(UCS_PTR_RAW_STATUS(real)));
}

static void status_ranges(void)
{
    int s;

    for (s = -101; s <= 2; ++s) {
        printf("status(%d) link %d endpoint %d is_err %d\n", s,
               (int)UCS_IS_LINK_ERROR(s), (int)UCS_IS_ENDPOINT_ERROR(s),
               (int)UCS_STATUS_IS_ERR(s));
    }
    printf("UCS_STATUS_IS_ERR(UCS_INPROGRESS) %d\n",
           (int)UCS_STATUS_IS_ERR(UCS_INPROGRESS));
    printf("UCS_STATUS_IS_ERR(UCS_ERR_TIMED_OUT) %d\n",
           (int)UCS_STATUS_IS_ERR(UCS_ERR_TIMED_OUT));
}

static void cpu_sets(void)
{
    static const int cpus[] = {0, 1, 63, 64, 65, 127, 500, 1023, 1024, 5000};
    ucs_cpu_set_t set;
    size_t i, w;
    unsigned long long sum = 0;

    UCS_CPU_ZERO(&set);
    printf("cpu_set empty lcs %d\n", ucs_cpu_set_find_lcs(&set));
    for (i = 0; i < sizeof(cpus) / sizeof(cpus[0]); ++i) {
        UCS_CPU_SET(cpus[i], &set);
    }
    UCS_CPU_CLR(0, &set);
    UCS_CPU_CLR(64, &set);
    UCS_CPU_CLR(4096, &set);
    for (w = 0; w < UCS_CPU_SETSIZE / UCS_NCPUBITS; ++w) {
        sum = sum * 31 + set.ucs_bits[w];
    }
    printf("cpu_set words hash %llu\n", sum);
    for (i = 0; i < sizeof(cpus) / sizeof(cpus[0]); ++i) {
        printf("ucs_cpu_is_set(%d) %d\n", cpus[i],
               ucs_cpu_is_set(cpus[i], &set));
    }
    printf("ucs_cpu_set_find_lcs %d\n", ucs_cpu_set_find_lcs(&set));
}

static void datatypes(void)
{
    static const unsigned long long sizes[] = {0, 1, 2, 8, 13, 4096,
                                               0x123456789ull};
    size_t i;

    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        ucp_datatype_t dt = ucp_dt_make_contig(sizes[i]);
        printf("ucp_dt_make_contig(%llu) %llu class %llu\n", sizes[i],
               (unsigned long long)dt,
               (unsigned long long)(dt & UCP_DATATYPE_CLASS_MASK));
    }
    VALUE(ucp_dt_make_contig(1));
    VALUE(ucp_dt_make_iov());
}

static void memory_types(void)
{
    ucs_memory_type_t t;
    int n = 0, sum = 0;

    ucs_memory_type_for_each(t) {
        ++n;
        sum = sum * 10 + (int)t;
    }
    printf("ucs_memory_type_for_each count %d sequence %d\n", n, sum);
}

static void pointers(void)
{
    char buf[64];

    printf("UCS_PTR_BYTE_OFFSET(buf, 24) %td\n",
           (char *)UCS_PTR_BYTE_OFFSET(buf, 24) - buf);
    printf("UCS_PTR_BYTE_OFFSET(buf + 40, -16) %td\n",
           (char *)UCS_PTR_BYTE_OFFSET(buf + 40, -16) - buf);
}

static void version(void)
{
    ucp_context_h context = (ucp_context_h)&context;
    ucs_status_t status = ucp_init(NULL, NULL, &context);

    printf("ucp_init status %d context %d\n", (int)status, context == NULL);
}

int main(void)
{
    /* Sizes of the types: structures, enums, scalars, handles, callbacks. */
    SIZE(ucp_am_callback_t);
    SIZE(ucp_am_handler_param_t);
    SIZE(ucp_am_recv_attr_t);
    SIZE(ucp_am_recv_callback_t);
    SIZE(ucp_am_recv_data_nbx_callback_t);
    SIZE(ucp_atomic_fetch_op_t);
    SIZE(ucp_atomic_op_t);
    SIZE(ucp_atomic_post_op_t);
    SIZE(ucp_conn_request_attr_t);
    SIZE(ucp_conn_request_h);
    SIZE(ucp_context_attr_t);
    SIZE(ucp_context_h);
    SIZE(ucp_datatype_t);
    SIZE(ucp_dt_iov_t);
    SIZE(ucp_ep_attr_t);
    SIZE(ucp_ep_close_flags_t);
    SIZE(ucp_ep_evaluate_perf_attr_t);
    SIZE(ucp_ep_evaluate_perf_param_t);
    SIZE(ucp_ep_h);
    SIZE(ucp_ep_params_t);
    SIZE(ucp_ep_perf_attr_field_t);
    SIZE(ucp_ep_perf_param_field_t);
    SIZE(ucp_err_handler_cb_t);
    SIZE(ucp_err_handler_t);
    SIZE(ucp_err_handling_mode_t);
    SIZE(ucp_generic_dt_ops_t);
    SIZE(ucp_lib_attr_t);
    SIZE(ucp_listener_accept_callback_t);
    SIZE(ucp_listener_accept_handler_t);
    SIZE(ucp_listener_attr_t);
    SIZE(ucp_listener_conn_callback_t);
    SIZE(ucp_listener_conn_handler_t);
    SIZE(ucp_listener_h);
    SIZE(ucp_listener_params_t);
    SIZE(ucp_mem_advice_t);
    SIZE(ucp_mem_advise_params_t);
    SIZE(ucp_mem_attr_t);
    SIZE(ucp_mem_h);
    SIZE(ucp_mem_map_params_t);
    SIZE(ucp_op_attr_t);
    SIZE(ucp_params_t);
    SIZE(ucp_req_attr_field);
    SIZE(ucp_request_attr_t);
    SIZE(ucp_request_cleanup_callback_t);
    SIZE(ucp_request_init_callback_t);
    SIZE(ucp_request_param_t);
    SIZE(ucp_rkey_h);
    SIZE(ucp_send_callback_t);
    SIZE(ucp_send_nbx_callback_t);
    SIZE(ucp_stream_poll_ep_t);
    SIZE(ucp_stream_recv_callback_t);
    SIZE(ucp_stream_recv_flags_t);
    SIZE(ucp_stream_recv_nbx_callback_t);
    SIZE(ucp_tag_message_h);
    SIZE(ucp_tag_recv_callback_t);
    SIZE(ucp_tag_recv_nbx_callback_t);
    SIZE(ucp_tag_t);
    SIZE(ucp_wakeup_event_t);
    SIZE(ucp_worker_address_attr_t);
    SIZE(ucp_worker_address_flags_t);
    SIZE(ucp_worker_attr_t);
    SIZE(ucp_worker_flags_t);
    SIZE(ucp_worker_h);
    SIZE(ucp_worker_params_t);
    SIZE(ucs_async_mode_t);
    SIZE(ucs_config_allow_list_mode_t);
    SIZE(ucs_config_allow_list_t);
    SIZE(ucs_config_names_array_t);
    SIZE(ucs_config_print_flags_t);
    SIZE(ucs_cpu_mask_t);
    SIZE(ucs_cpu_set_t);
    SIZE(ucs_handle_error_t);
    SIZE(ucs_log_component_config_t);
    SIZE(ucs_log_level_t);
    SIZE(ucs_memory_type_t);
    SIZE(ucs_on_off_auto_value_t);
    SIZE(ucs_sock_addr_t);
    SIZE(ucs_status_ptr_t);
    SIZE(ucs_status_t);
    SIZE(ucs_ternary_auto_value_t);
    SIZE(ucs_thread_mode_t);
    SIZE(enum ucp_am_cb_flags);
    SIZE(enum ucp_am_handler_param_field);
    SIZE(enum ucp_cb_param_flags);
    SIZE(enum ucp_conn_request_attr_field);
    SIZE(enum ucp_context_attr_field);
    SIZE(enum ucp_dt_type);
    SIZE(enum ucp_ep_attr_field);
    SIZE(enum ucp_ep_close_mode);
    SIZE(enum ucp_ep_params_field);
    SIZE(enum ucp_ep_params_flags_field);
    SIZE(enum ucp_ep_perf_attr_field);
    SIZE(enum ucp_ep_perf_param_field);
    SIZE(enum ucp_feature);
    SIZE(enum ucp_lib_attr_field);
    SIZE(enum ucp_listener_attr_field);
    SIZE(enum ucp_listener_params_field);
    SIZE(enum ucp_mem_advice);
    SIZE(enum ucp_mem_advise_params_field);
    SIZE(enum ucp_mem_attr_field);
    SIZE(enum ucp_mem_map_params_field);
    SIZE(enum ucp_params_field);
    SIZE(enum ucp_send_am_flags);
    SIZE(enum ucp_wakeup_event_types);
    SIZE(enum ucp_worker_address_attr_field);
    SIZE(enum ucp_worker_attr_field);
    SIZE(enum ucp_worker_params_field);
    SIZE(enum ucs_memory_type);
    SIZE(enum ucs_on_off_auto_value);
    SIZE(enum ucs_ternary_auto_value);
    SIZE(struct ucp_am_handler_param);
    SIZE(struct ucp_am_recv_param);
    SIZE(struct ucp_conn_request_attr);
    SIZE(struct ucp_context_attr);
    SIZE(struct ucp_dt_iov);
    SIZE(struct ucp_ep_attr);
    SIZE(struct ucp_ep_params);
    SIZE(struct ucp_err_handler);
    SIZE(struct ucp_generic_dt_ops);
    SIZE(struct ucp_lib_attr);
    SIZE(struct ucp_listener_accept_handler);
    SIZE(struct ucp_listener_attr);
    SIZE(struct ucp_listener_conn_handler);
    SIZE(struct ucp_listener_params);
    SIZE(struct ucp_mem_advise_params);
    SIZE(struct ucp_mem_attr);
    SIZE(struct ucp_mem_map_params);
    SIZE(struct ucp_params);
    SIZE(struct ucp_stream_poll_ep);
    SIZE(struct ucp_tag_recv_info);
    SIZE(struct ucp_worker_address_attr);
    SIZE(struct ucp_worker_attr);
    SIZE(struct ucp_worker_params);
    SIZE(struct ucs_log_component_config);
    SIZE(struct ucs_sock_addr);

    /* Signedness of the enum and integer types. */
    SIGNED(ucp_am_recv_attr_t);
    SIGNED(ucp_atomic_fetch_op_t);
    SIGNED(ucp_atomic_op_t);
    SIGNED(ucp_atomic_post_op_t);
    SIGNED(ucp_datatype_t);
    SIGNED(ucp_ep_close_flags_t);
    SIGNED(ucp_ep_perf_attr_field_t);
    SIGNED(ucp_ep_perf_param_field_t);
    SIGNED(ucp_err_handling_mode_t);
    SIGNED(ucp_mem_advice_t);
    SIGNED(ucp_op_attr_t);
    SIGNED(ucp_req_attr_field);
    SIGNED(ucp_stream_recv_flags_t);
    SIGNED(ucp_tag_t);
    SIGNED(ucp_wakeup_event_t);
    SIGNED(ucp_worker_address_flags_t);
    SIGNED(ucp_worker_flags_t);
    SIGNED(ucs_async_mode_t);
    SIGNED(ucs_config_allow_list_mode_t);
    SIGNED(ucs_config_print_flags_t);
    SIGNED(ucs_cpu_mask_t);
    SIGNED(ucs_handle_error_t);
    SIGNED(ucs_log_level_t);
    SIGNED(ucs_memory_type_t);
    SIGNED(ucs_on_off_auto_value_t);
    SIGNED(ucs_status_t);
    SIGNED(ucs_ternary_auto_value_t);
    SIGNED(ucs_thread_mode_t);
    SIGNED(enum ucp_am_cb_flags);
    SIGNED(enum ucp_am_handler_param_field);
    SIGNED(enum ucp_cb_param_flags);
    SIGNED(enum ucp_conn_request_attr_field);
    SIGNED(enum ucp_context_attr_field);
    SIGNED(enum ucp_dt_type);
    SIGNED(enum ucp_ep_attr_field);
    SIGNED(enum ucp_ep_close_mode);
    SIGNED(enum ucp_ep_params_field);
    SIGNED(enum ucp_ep_params_flags_field);
    SIGNED(enum ucp_ep_perf_attr_field);
    SIGNED(enum ucp_ep_perf_param_field);
    SIGNED(enum ucp_feature);
    SIGNED(enum ucp_lib_attr_field);
    SIGNED(enum ucp_listener_attr_field);
    SIGNED(enum ucp_listener_params_field);
    SIGNED(enum ucp_mem_advice);
    SIGNED(enum ucp_mem_advise_params_field);
    SIGNED(enum ucp_mem_attr_field);
    SIGNED(enum ucp_mem_map_params_field);
    SIGNED(enum ucp_params_field);
    SIGNED(enum ucp_send_am_flags);
    SIGNED(enum ucp_wakeup_event_types);
    SIGNED(enum ucp_worker_address_attr_field);
    SIGNED(enum ucp_worker_attr_field);
    SIGNED(enum ucp_worker_params_field);
    SIGNED(enum ucs_memory_type);
    SIGNED(enum ucs_on_off_auto_value);
    SIGNED(enum ucs_ternary_auto_value);

    /* Every field of every structure: offset and size. */
    FIELD(ucp_am_recv_param_t, recv_attr);
    FIELD(ucp_am_recv_param_t, reply_ep);
    FIELD(ucp_tag_recv_info_t, sender_tag);
    FIELD(ucp_tag_recv_info_t, length);
    FIELD(ucp_am_handler_param_t, field_mask);
    FIELD(ucp_am_handler_param_t, id);
    FIELD(ucp_am_handler_param_t, flags);
    FIELD(ucp_am_handler_param_t, cb);
    FIELD(ucp_am_handler_param_t, arg);
    FIELD(ucp_conn_request_attr_t, field_mask);
    FIELD(ucp_conn_request_attr_t, client_address);
    FIELD(ucp_conn_request_attr_t, client_id);
    FIELD(ucp_context_attr_t, field_mask);
    FIELD(ucp_context_attr_t, request_size);
    FIELD(ucp_context_attr_t, thread_mode);
    FIELD(ucp_context_attr_t, memory_types);
    FIELD(ucp_context_attr_t, name);
    FIELD(ucp_dt_iov_t, buffer);
    FIELD(ucp_dt_iov_t, length);
    FIELD(ucp_ep_attr_t, field_mask);
    FIELD(ucp_ep_attr_t, name);
    FIELD(ucp_ep_attr_t, local_sockaddr);
    FIELD(ucp_ep_attr_t, remote_sockaddr);
    FIELD(ucp_ep_evaluate_perf_attr_t, field_mask);
    FIELD(ucp_ep_evaluate_perf_attr_t, estimated_time);
    FIELD(ucp_ep_evaluate_perf_param_t, field_mask);
    FIELD(ucp_ep_evaluate_perf_param_t, message_size);
    FIELD(ucp_ep_params_t, field_mask);
    FIELD(ucp_ep_params_t, address);
    FIELD(ucp_ep_params_t, err_mode);
    FIELD(ucp_ep_params_t, err_handler);
    FIELD(ucp_ep_params_t, user_data);
    FIELD(ucp_ep_params_t, flags);
    FIELD(ucp_ep_params_t, sockaddr);
    FIELD(ucp_ep_params_t, conn_request);
    FIELD(ucp_ep_params_t, name);
    FIELD(ucp_ep_params_t, local_sockaddr);
    FIELD(ucp_err_handler_t, cb);
    FIELD(ucp_err_handler_t, arg);
    FIELD(ucp_generic_dt_ops_t, start_pack);
    FIELD(ucp_generic_dt_ops_t, start_unpack);
    FIELD(ucp_generic_dt_ops_t, packed_size);
    FIELD(ucp_generic_dt_ops_t, pack);
    FIELD(ucp_generic_dt_ops_t, unpack);
    FIELD(ucp_generic_dt_ops_t, finish);
    FIELD(ucp_lib_attr_t, field_mask);
    FIELD(ucp_lib_attr_t, max_thread_level);
    FIELD(ucp_listener_accept_handler_t, cb);
    FIELD(ucp_listener_accept_handler_t, arg);
    FIELD(ucp_listener_attr_t, field_mask);
    FIELD(ucp_listener_attr_t, sockaddr);
    FIELD(ucp_listener_conn_handler_t, cb);
    FIELD(ucp_listener_conn_handler_t, arg);
    FIELD(ucp_listener_params_t, field_mask);
    FIELD(ucp_listener_params_t, sockaddr);
    FIELD(ucp_listener_params_t, accept_handler);
    FIELD(ucp_listener_params_t, conn_handler);
    FIELD(ucp_mem_advise_params_t, field_mask);
    FIELD(ucp_mem_advise_params_t, address);
    FIELD(ucp_mem_advise_params_t, length);
    FIELD(ucp_mem_advise_params_t, advice);
    FIELD(ucp_mem_attr_t, field_mask);
    FIELD(ucp_mem_attr_t, address);
    FIELD(ucp_mem_attr_t, length);
    FIELD(ucp_mem_attr_t, mem_type);
    FIELD(ucp_mem_map_params_t, field_mask);
    FIELD(ucp_mem_map_params_t, address);
    FIELD(ucp_mem_map_params_t, length);
    FIELD(ucp_mem_map_params_t, flags);
    FIELD(ucp_mem_map_params_t, prot);
    FIELD(ucp_mem_map_params_t, memory_type);
    FIELD(ucp_params_t, field_mask);
    FIELD(ucp_params_t, features);
    FIELD(ucp_params_t, request_size);
    FIELD(ucp_params_t, request_init);
    FIELD(ucp_params_t, request_cleanup);
    FIELD(ucp_params_t, tag_sender_mask);
    FIELD(ucp_params_t, mt_workers_shared);
    FIELD(ucp_params_t, estimated_num_eps);
    FIELD(ucp_params_t, estimated_num_ppn);
    FIELD(ucp_params_t, name);
    FIELD(ucp_request_attr_t, field_mask);
    FIELD(ucp_request_attr_t, debug_string);
    FIELD(ucp_request_attr_t, debug_string_size);
    FIELD(ucp_request_attr_t, status);
    FIELD(ucp_request_attr_t, mem_type);
    FIELD(ucp_request_param_t, op_attr_mask);
    FIELD(ucp_request_param_t, flags);
    FIELD(ucp_request_param_t, request);
    FIELD(ucp_request_param_t, cb);
    FIELD(ucp_request_param_t, cb.send);
    FIELD(ucp_request_param_t, cb.recv);
    FIELD(ucp_request_param_t, cb.recv_stream);
    FIELD(ucp_request_param_t, cb.recv_am);
    FIELD(ucp_request_param_t, datatype);
    FIELD(ucp_request_param_t, user_data);
    FIELD(ucp_request_param_t, reply_buffer);
    FIELD(ucp_request_param_t, memory_type);
    FIELD(ucp_request_param_t, recv_info);
    FIELD(ucp_request_param_t, recv_info.length);
    FIELD(ucp_request_param_t, recv_info.tag_info);
    FIELD(ucp_request_param_t, memh);
    FIELD(ucp_stream_poll_ep_t, ep);
    FIELD(ucp_stream_poll_ep_t, user_data);
    FIELD(ucp_stream_poll_ep_t, flags);
    FIELD(ucp_stream_poll_ep_t, reserved);
    FIELD(ucp_worker_address_attr_t, field_mask);
    FIELD(ucp_worker_address_attr_t, worker_uid);
    FIELD(ucp_worker_attr_t, field_mask);
    FIELD(ucp_worker_attr_t, thread_mode);
    FIELD(ucp_worker_attr_t, address_flags);
    FIELD(ucp_worker_attr_t, address);
    FIELD(ucp_worker_attr_t, address_length);
    FIELD(ucp_worker_attr_t, max_am_header);
    FIELD(ucp_worker_attr_t, name);
    FIELD(ucp_worker_attr_t, max_debug_string);
    FIELD(ucp_worker_params_t, field_mask);
    FIELD(ucp_worker_params_t, thread_mode);
    FIELD(ucp_worker_params_t, cpu_mask);
    FIELD(ucp_worker_params_t, events);
    FIELD(ucp_worker_params_t, user_data);
    FIELD(ucp_worker_params_t, event_fd);
    FIELD(ucp_worker_params_t, flags);
    FIELD(ucp_worker_params_t, name);
    FIELD(ucp_worker_params_t, am_alignment);
    FIELD(ucp_worker_params_t, client_id);
    FIELD(ucs_config_allow_list_t, array);
    FIELD(ucs_config_allow_list_t, mode);
    FIELD(ucs_cpu_set_t, ucs_bits);
    FIELD(ucs_log_component_config_t, log_level);
    FIELD(ucs_log_component_config_t, name);
    FIELD(ucs_log_component_config_t, file_filter);
    FIELD(ucs_sock_addr_t, addr);
    FIELD(ucs_sock_addr_t, addrlen);
    FIELD(ucs_config_names_array_t, names);
    FIELD(ucs_config_names_array_t, count);
    FIELD(ucs_config_names_array_t, pad);

    /* Every enum constant. */
    VALUE(UCP_AM_FLAG_WHOLE_MSG);
    VALUE(UCP_AM_FLAG_PERSISTENT_DATA);
    VALUE(UCP_AM_HANDLER_PARAM_FIELD_ID);
    VALUE(UCP_AM_HANDLER_PARAM_FIELD_FLAGS);
    VALUE(UCP_AM_HANDLER_PARAM_FIELD_CB);
    VALUE(UCP_AM_HANDLER_PARAM_FIELD_ARG);
    VALUE(UCP_AM_RECV_ATTR_FIELD_REPLY_EP);
    VALUE(UCP_AM_RECV_ATTR_FLAG_DATA);
    VALUE(UCP_AM_RECV_ATTR_FLAG_RNDV);
    VALUE(UCP_AM_SEND_FLAG_REPLY);
    VALUE(UCP_AM_SEND_FLAG_EAGER);
    VALUE(UCP_AM_SEND_FLAG_RNDV);
    VALUE(UCP_AM_SEND_REPLY);
    VALUE(UCP_ATOMIC_FETCH_OP_FADD);
    VALUE(UCP_ATOMIC_FETCH_OP_SWAP);
    VALUE(UCP_ATOMIC_FETCH_OP_CSWAP);
    VALUE(UCP_ATOMIC_FETCH_OP_FAND);
    VALUE(UCP_ATOMIC_FETCH_OP_FOR);
    VALUE(UCP_ATOMIC_FETCH_OP_FXOR);
    VALUE(UCP_ATOMIC_FETCH_OP_LAST);
    VALUE(UCP_ATOMIC_OP_ADD);
    VALUE(UCP_ATOMIC_OP_SWAP);
    VALUE(UCP_ATOMIC_OP_CSWAP);
    VALUE(UCP_ATOMIC_OP_AND);
    VALUE(UCP_ATOMIC_OP_OR);
    VALUE(UCP_ATOMIC_OP_XOR);
    VALUE(UCP_ATOMIC_OP_LAST);
    VALUE(UCP_ATOMIC_POST_OP_ADD);
    VALUE(UCP_ATOMIC_POST_OP_AND);
    VALUE(UCP_ATOMIC_POST_OP_OR);
    VALUE(UCP_ATOMIC_POST_OP_XOR);
    VALUE(UCP_ATOMIC_POST_OP_LAST);
    VALUE(UCP_ATTR_FIELD_REQUEST_SIZE);
    VALUE(UCP_ATTR_FIELD_THREAD_MODE);
    VALUE(UCP_ATTR_FIELD_MEMORY_TYPES);
    VALUE(UCP_ATTR_FIELD_NAME);
    VALUE(UCP_CB_PARAM_FLAG_DATA);
    VALUE(UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR);
    VALUE(UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID);
    VALUE(UCP_DATATYPE_CONTIG);
    VALUE(UCP_DATATYPE_STRIDED);
    VALUE(UCP_DATATYPE_IOV);
    VALUE(UCP_DATATYPE_GENERIC);
    VALUE(UCP_DATATYPE_SHIFT);
    VALUE(UCP_DATATYPE_CLASS_MASK);
    VALUE(UCP_EP_ATTR_FIELD_NAME);
    VALUE(UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR);
    VALUE(UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR);
    VALUE(UCP_EP_CLOSE_FLAG_FORCE);
    VALUE(UCP_EP_CLOSE_MODE_FORCE);
    VALUE(UCP_EP_CLOSE_MODE_FLUSH);
    VALUE(UCP_EP_PARAMS_FLAGS_CLIENT_SERVER);
    VALUE(UCP_EP_PARAMS_FLAGS_NO_LOOPBACK);
    VALUE(UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID);
    VALUE(UCP_EP_PARAM_FIELD_REMOTE_ADDRESS);
    VALUE(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE);
    VALUE(UCP_EP_PARAM_FIELD_ERR_HANDLER);
    VALUE(UCP_EP_PARAM_FIELD_USER_DATA);
    VALUE(UCP_EP_PARAM_FIELD_SOCK_ADDR);
    VALUE(UCP_EP_PARAM_FIELD_FLAGS);
    VALUE(UCP_EP_PARAM_FIELD_CONN_REQUEST);
    VALUE(UCP_EP_PARAM_FIELD_NAME);
    VALUE(UCP_EP_PARAM_FIELD_LOCAL_SOCK_ADDR);
    VALUE(UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME);
    VALUE(UCP_EP_PERF_PARAM_FIELD_MESSAGE_SIZE);
    VALUE(UCP_ERR_HANDLING_MODE_NONE);
    VALUE(UCP_ERR_HANDLING_MODE_PEER);
    VALUE(UCP_FEATURE_TAG);
    VALUE(UCP_FEATURE_RMA);
    VALUE(UCP_FEATURE_AMO32);
    VALUE(UCP_FEATURE_AMO64);
    VALUE(UCP_FEATURE_WAKEUP);
    VALUE(UCP_FEATURE_STREAM);
    VALUE(UCP_FEATURE_AM);
    VALUE(UCP_LIB_ATTR_FIELD_MAX_THREAD_LEVEL);
    VALUE(UCP_LISTENER_ATTR_FIELD_SOCKADDR);
    VALUE(UCP_LISTENER_PARAM_FIELD_SOCK_ADDR);
    VALUE(UCP_LISTENER_PARAM_FIELD_ACCEPT_HANDLER);
    VALUE(UCP_LISTENER_PARAM_FIELD_CONN_HANDLER);
    VALUE(UCP_MADV_NORMAL);
    VALUE(UCP_MADV_WILLNEED);
    VALUE(UCP_MEM_ADVISE_PARAM_FIELD_ADDRESS);
    VALUE(UCP_MEM_ADVISE_PARAM_FIELD_LENGTH);
    VALUE(UCP_MEM_ADVISE_PARAM_FIELD_ADVICE);
    VALUE(UCP_MEM_ATTR_FIELD_ADDRESS);
    VALUE(UCP_MEM_ATTR_FIELD_LENGTH);
    VALUE(UCP_MEM_ATTR_FIELD_MEM_TYPE);
    VALUE(UCP_MEM_MAP_NONBLOCK);
    VALUE(UCP_MEM_MAP_ALLOCATE);
    VALUE(UCP_MEM_MAP_FIXED);
    VALUE(UCP_MEM_MAP_PARAM_FIELD_ADDRESS);
    VALUE(UCP_MEM_MAP_PARAM_FIELD_LENGTH);
    VALUE(UCP_MEM_MAP_PARAM_FIELD_FLAGS);
    VALUE(UCP_MEM_MAP_PARAM_FIELD_PROT);
    VALUE(UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE);
    VALUE(UCP_MEM_MAP_PROT_LOCAL_READ);
    VALUE(UCP_MEM_MAP_PROT_LOCAL_WRITE);
    VALUE(UCP_MEM_MAP_PROT_REMOTE_READ);
    VALUE(UCP_MEM_MAP_PROT_REMOTE_WRITE);
    VALUE(UCP_OP_ATTR_FIELD_REQUEST);
    VALUE(UCP_OP_ATTR_FIELD_CALLBACK);
    VALUE(UCP_OP_ATTR_FIELD_USER_DATA);
    VALUE(UCP_OP_ATTR_FIELD_DATATYPE);
    VALUE(UCP_OP_ATTR_FIELD_FLAGS);
    VALUE(UCP_OP_ATTR_FIELD_REPLY_BUFFER);
    VALUE(UCP_OP_ATTR_FIELD_MEMORY_TYPE);
    VALUE(UCP_OP_ATTR_FIELD_RECV_INFO);
    VALUE(UCP_OP_ATTR_FIELD_MEMH);
    VALUE(UCP_OP_ATTR_FLAG_NO_IMM_CMPL);
    VALUE(UCP_OP_ATTR_FLAG_FAST_CMPL);
    VALUE(UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL);
    VALUE(UCP_OP_ATTR_FLAG_MULTI_SEND);
    VALUE(UCP_PARAM_FIELD_FEATURES);
    VALUE(UCP_PARAM_FIELD_REQUEST_SIZE);
    VALUE(UCP_PARAM_FIELD_REQUEST_INIT);
    VALUE(UCP_PARAM_FIELD_REQUEST_CLEANUP);
    VALUE(UCP_PARAM_FIELD_TAG_SENDER_MASK);
    VALUE(UCP_PARAM_FIELD_MT_WORKERS_SHARED);
    VALUE(UCP_PARAM_FIELD_ESTIMATED_NUM_EPS);
    VALUE(UCP_PARAM_FIELD_ESTIMATED_NUM_PPN);
    VALUE(UCP_PARAM_FIELD_NAME);
    VALUE(UCP_REQUEST_ATTR_FIELD_INFO_STRING);
    VALUE(UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE);
    VALUE(UCP_REQUEST_ATTR_FIELD_STATUS);
    VALUE(UCP_REQUEST_ATTR_FIELD_MEM_TYPE);
    VALUE(UCP_STREAM_RECV_FLAG_WAITALL);
    VALUE(UCP_WAKEUP_RMA);
    VALUE(UCP_WAKEUP_AMO);
    VALUE(UCP_WAKEUP_TAG_SEND);
    VALUE(UCP_WAKEUP_TAG_RECV);
    VALUE(UCP_WAKEUP_TX);
    VALUE(UCP_WAKEUP_RX);
    VALUE(UCP_WAKEUP_EDGE);
    VALUE(UCP_WORKER_ADDRESS_ATTR_FIELD_UID);
    VALUE(UCP_WORKER_ADDRESS_FLAG_NET_ONLY);
    VALUE(UCP_WORKER_ATTR_FIELD_THREAD_MODE);
    VALUE(UCP_WORKER_ATTR_FIELD_ADDRESS);
    VALUE(UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS);
    VALUE(UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER);
    VALUE(UCP_WORKER_ATTR_FIELD_NAME);
    VALUE(UCP_WORKER_ATTR_FIELD_MAX_INFO_STRING);
    VALUE(UCP_WORKER_FLAG_IGNORE_REQUEST_LEAK);
    VALUE(UCP_WORKER_PARAM_FIELD_THREAD_MODE);
    VALUE(UCP_WORKER_PARAM_FIELD_CPU_MASK);
    VALUE(UCP_WORKER_PARAM_FIELD_EVENTS);
    VALUE(UCP_WORKER_PARAM_FIELD_USER_DATA);
    VALUE(UCP_WORKER_PARAM_FIELD_EVENT_FD);
    VALUE(UCP_WORKER_PARAM_FIELD_FLAGS);
    VALUE(UCP_WORKER_PARAM_FIELD_NAME);
    VALUE(UCP_WORKER_PARAM_FIELD_AM_ALIGNMENT);
    VALUE(UCP_WORKER_PARAM_FIELD_CLIENT_ID);
    VALUE(UCS_ASYNC_MODE_SIGNAL);
    VALUE(UCS_ASYNC_MODE_THREAD);
    VALUE(UCS_ASYNC_MODE_THREAD_SPINLOCK);
    VALUE(UCS_ASYNC_MODE_THREAD_MUTEX);
    VALUE(UCS_ASYNC_MODE_POLL);
    VALUE(UCS_ASYNC_MODE_LAST);
    VALUE(UCS_CONFIG_ALLOW_LIST_ALLOW_ALL);
    VALUE(UCS_CONFIG_ALLOW_LIST_ALLOW);
    VALUE(UCS_CONFIG_ALLOW_LIST_NEGATE);
    VALUE(UCS_CONFIG_OFF);
    VALUE(UCS_CONFIG_ON);
    VALUE(UCS_CONFIG_AUTO);
    VALUE(UCS_CONFIG_ON_OFF_LAST);
    VALUE(UCS_CONFIG_PRINT_CONFIG);
    VALUE(UCS_CONFIG_PRINT_HEADER);
    VALUE(UCS_CONFIG_PRINT_DOC);
    VALUE(UCS_CONFIG_PRINT_HIDDEN);
    VALUE(UCS_CONFIG_PRINT_COMMENT_DEFAULT);
    VALUE(UCS_HANDLE_ERROR_BACKTRACE);
    VALUE(UCS_HANDLE_ERROR_FREEZE);
    VALUE(UCS_HANDLE_ERROR_DEBUG);
    VALUE(UCS_HANDLE_ERROR_NONE);
    VALUE(UCS_HANDLE_ERROR_LAST);
    VALUE(UCS_LOG_LEVEL_FATAL);
    VALUE(UCS_LOG_LEVEL_ERROR);
    VALUE(UCS_LOG_LEVEL_WARN);
    VALUE(UCS_LOG_LEVEL_DIAG);
    VALUE(UCS_LOG_LEVEL_INFO);
    VALUE(UCS_LOG_LEVEL_DEBUG);
    VALUE(UCS_LOG_LEVEL_TRACE);
    VALUE(UCS_LOG_LEVEL_TRACE_REQ);
    VALUE(UCS_LOG_LEVEL_TRACE_DATA);
    VALUE(UCS_LOG_LEVEL_TRACE_ASYNC);
    VALUE(UCS_LOG_LEVEL_TRACE_FUNC);
    VALUE(UCS_LOG_LEVEL_TRACE_POLL);
    VALUE(UCS_LOG_LEVEL_LAST);
    VALUE(UCS_LOG_LEVEL_PRINT);
    VALUE(UCS_MEMORY_TYPE_HOST);
    VALUE(UCS_MEMORY_TYPE_CUDA);
    VALUE(UCS_MEMORY_TYPE_CUDA_MANAGED);
    VALUE(UCS_MEMORY_TYPE_ROCM);
    VALUE(UCS_MEMORY_TYPE_ROCM_MANAGED);
    VALUE(UCS_MEMORY_TYPE_LAST);
    VALUE(UCS_MEMORY_TYPE_UNKNOWN);
    VALUE(UCS_NO);
    VALUE(UCS_YES);
    VALUE(UCS_TRY);
    VALUE(UCS_AUTO);
    VALUE(UCS_TERNARY_LAST);
    VALUE(UCS_OK);
    VALUE(UCS_INPROGRESS);
    VALUE(UCS_ERR_NO_MESSAGE);
    VALUE(UCS_ERR_NO_RESOURCE);
    VALUE(UCS_ERR_IO_ERROR);
    VALUE(UCS_ERR_NO_MEMORY);
    VALUE(UCS_ERR_INVALID_PARAM);
    VALUE(UCS_ERR_UNREACHABLE);
    VALUE(UCS_ERR_INVALID_ADDR);
    VALUE(UCS_ERR_NOT_IMPLEMENTED);
    VALUE(UCS_ERR_MESSAGE_TRUNCATED);
    VALUE(UCS_ERR_NO_PROGRESS);
    VALUE(UCS_ERR_BUFFER_TOO_SMALL);
    VALUE(UCS_ERR_NO_ELEM);
    VALUE(UCS_ERR_SOME_CONNECTS_FAILED);
    VALUE(UCS_ERR_NO_DEVICE);
    VALUE(UCS_ERR_BUSY);
    VALUE(UCS_ERR_CANCELED);
    VALUE(UCS_ERR_SHMEM_SEGMENT);
    VALUE(UCS_ERR_ALREADY_EXISTS);
    VALUE(UCS_ERR_OUT_OF_RANGE);
    VALUE(UCS_ERR_TIMED_OUT);
    VALUE(UCS_ERR_EXCEEDS_LIMIT);
    VALUE(UCS_ERR_UNSUPPORTED);
    VALUE(UCS_ERR_REJECTED);
    VALUE(UCS_ERR_NOT_CONNECTED);
    VALUE(UCS_ERR_CONNECTION_RESET);
    VALUE(UCS_ERR_FIRST_LINK_FAILURE);
    VALUE(UCS_ERR_LAST_LINK_FAILURE);
    VALUE(UCS_ERR_FIRST_ENDPOINT_FAILURE);
    VALUE(UCS_ERR_ENDPOINT_TIMEOUT);
    VALUE(UCS_ERR_LAST_ENDPOINT_FAILURE);
    VALUE(UCS_ERR_LAST);
    VALUE(UCS_THREAD_MODE_SINGLE);
    VALUE(UCS_THREAD_MODE_SERIALIZED);
    VALUE(UCS_THREAD_MODE_MULTI);
    VALUE(UCS_THREAD_MODE_LAST);

    /* Macros with a value. */
    VALUE(UCP_API_MAJOR);
    VALUE(UCP_API_MINOR);
    VALUE(UCP_API_VERSION);
    VALUE(UCP_VERSION_MAJOR_SHIFT);
    VALUE(UCP_VERSION_MINOR_SHIFT);
    VALUE(UCP_VERSION(1, 13));
    VALUE(UCP_VERSION(2, 0));
    VALUE(UCP_VERSION(1, 255));
    VALUE(UCP_ENTITY_NAME_MAX);
    VALUE(UCS_CPU_SETSIZE);
    VALUE(UCS_NCPUBITS);
    VALUE(UCS_CPUELT(0));
    VALUE(UCS_CPUELT(130));
    VALUE(UCS_CPUMASK(0));
    VALUE(UCS_CPUMASK(130));
    VALUE(UCS_CPUMASK(63));
    VALUE(UCS_MEMORY_TYPES_CPU_ACCESSIBLE);
    VALUE(UCS_BIT(0));
    VALUE(UCS_BIT(31));
    VALUE(UCS_BIT(32));
    VALUE(UCS_BIT(63));
    VALUE(UCS_MASK(0));
    VALUE(UCS_MASK(8));
    VALUE(UCS_MASK(63));
    VALUE(probe_c_decls);
    SIZE(probe_packed_t);
    SIZE(probe_int_array_t);
    FIELD(probe_int_array_t, items);
    FIELD(probe_int_array_t, count);
    FIELD(probe_int_array_t, pad);

    /* Macros and inline functions with behaviour. */
    status_pointers();
    status_ranges();
    cpu_sets();
    datatypes();
    memory_types();
    pointers();
    version();
    return 0;
}
