/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * rucx C API: configuration value types shared by the ucp/ucs headers
 * (UCX 1.13 names, values and layouts).
 */
#ifndef RUCX_UCS_CONFIG_TYPES_H
#define RUCX_UCS_CONFIG_TYPES_H

#include <ucs/sys/compiler_def.h>
#include <sys/socket.h>

BEGIN_C_DECLS

/* Log levels, from the most to the least severe. */
typedef enum {
    UCS_LOG_LEVEL_FATAL,
    UCS_LOG_LEVEL_ERROR,
    UCS_LOG_LEVEL_WARN,
    UCS_LOG_LEVEL_DIAG,
    UCS_LOG_LEVEL_INFO,
    UCS_LOG_LEVEL_DEBUG,
    UCS_LOG_LEVEL_TRACE,
    UCS_LOG_LEVEL_TRACE_REQ,
    UCS_LOG_LEVEL_TRACE_DATA,
    UCS_LOG_LEVEL_TRACE_ASYNC,
    UCS_LOG_LEVEL_TRACE_FUNC,
    UCS_LOG_LEVEL_TRACE_POLL,
    UCS_LOG_LEVEL_LAST,
    UCS_LOG_LEVEL_PRINT
} ucs_log_level_t;

/* How asynchronous events are delivered. THREAD is the older name of
 * THREAD_SPINLOCK. */
typedef enum {
    UCS_ASYNC_MODE_SIGNAL,
    UCS_ASYNC_MODE_THREAD,
    UCS_ASYNC_MODE_THREAD_SPINLOCK = UCS_ASYNC_MODE_THREAD,
    UCS_ASYNC_MODE_THREAD_MUTEX,
    UCS_ASYNC_MODE_POLL,
    UCS_ASYNC_MODE_LAST
} ucs_async_mode_t;

extern const char *ucs_async_mode_names[];

/* Yes / no / try / auto settings. */
typedef enum ucs_ternary_auto_value {
    UCS_NO   = 0,
    UCS_YES  = 1,
    UCS_TRY  = 2,
    UCS_AUTO = 3,
    UCS_TERNARY_LAST
} ucs_ternary_auto_value_t;

/* On / off / auto settings. */
typedef enum ucs_on_off_auto_value {
    UCS_CONFIG_OFF  = 0,
    UCS_CONFIG_ON   = 1,
    UCS_CONFIG_AUTO = 2,
    UCS_CONFIG_ON_OFF_LAST
} ucs_on_off_auto_value_t;

/* What to do on a fatal error. */
typedef enum {
    UCS_HANDLE_ERROR_BACKTRACE,
    UCS_HANDLE_ERROR_FREEZE,
    UCS_HANDLE_ERROR_DEBUG,
    UCS_HANDLE_ERROR_NONE,
    UCS_HANDLE_ERROR_LAST
} ucs_handle_error_t;

/* What a configuration dump prints (bit flags). */
typedef enum {
    UCS_CONFIG_PRINT_CONFIG          = UCS_BIT(0),
    UCS_CONFIG_PRINT_HEADER          = UCS_BIT(1),
    UCS_CONFIG_PRINT_DOC             = UCS_BIT(2),
    UCS_CONFIG_PRINT_HIDDEN          = UCS_BIT(3),
    UCS_CONFIG_PRINT_COMMENT_DEFAULT = UCS_BIT(4)
} ucs_config_print_flags_t;

/* A counted array inside a configuration structure. */
#define UCS_CONFIG_ARRAY_FIELD(_type, _array_name) \
    struct { \
        _type    *_array_name; \
        unsigned count; \
        unsigned pad; \
    }

/* A counted array of strings. */
#define UCS_CONFIG_STRING_ARRAY_FIELD(_array_name) \
    UCS_CONFIG_ARRAY_FIELD(char *, _array_name)

typedef UCS_CONFIG_STRING_ARRAY_FIELD(names) ucs_config_names_array_t;

/* A list of names that is allowed, forbidden, or ignored (all allowed). */
typedef enum {
    UCS_CONFIG_ALLOW_LIST_ALLOW_ALL,
    UCS_CONFIG_ALLOW_LIST_ALLOW,
    UCS_CONFIG_ALLOW_LIST_NEGATE
} ucs_config_allow_list_mode_t;

typedef struct {
    ucs_config_names_array_t     array;
    ucs_config_allow_list_mode_t mode;
} ucs_config_allow_list_t;

/* A socket address and its length. */
typedef struct ucs_sock_addr {
    const struct sockaddr *addr;
    socklen_t             addrlen;
} ucs_sock_addr_t;

/* Log level and source file filter of one logging component. */
typedef struct ucs_log_component_config {
    ucs_log_level_t log_level;
    char            name[16];
    const char      *file_filter;
} ucs_log_component_config_t;

END_C_DECLS

#endif /* RUCX_UCS_CONFIG_TYPES_H */
