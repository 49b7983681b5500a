/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * rucx C API: status codes and status pointers, with UCX 1.13's values.
 */
#ifndef RUCX_UCS_TYPE_STATUS_H
#define RUCX_UCS_TYPE_STATUS_H

#include <ucs/sys/compiler_def.h>
#include <stdint.h>

BEGIN_C_DECLS

/*
 * Result of an operation. Zero is success, one is "still in progress",
 * negative values are errors. Packed: the type is one byte wide.
 * Link errors lie in [UCS_ERR_LAST_LINK_FAILURE, UCS_ERR_FIRST_LINK_FAILURE],
 * endpoint errors in [UCS_ERR_LAST_ENDPOINT_FAILURE,
 * UCS_ERR_FIRST_ENDPOINT_FAILURE].
 */
typedef enum {
    UCS_OK                         = 0,
    UCS_INPROGRESS                 = 1,

    UCS_ERR_NO_MESSAGE             = -1,
    UCS_ERR_NO_RESOURCE            = -2,
    UCS_ERR_IO_ERROR               = -3,
    UCS_ERR_NO_MEMORY              = -4,
    UCS_ERR_INVALID_PARAM          = -5,
    UCS_ERR_UNREACHABLE            = -6,
    UCS_ERR_INVALID_ADDR           = -7,
    UCS_ERR_NOT_IMPLEMENTED        = -8,
    UCS_ERR_MESSAGE_TRUNCATED      = -9,
    UCS_ERR_NO_PROGRESS            = -10,
    UCS_ERR_BUFFER_TOO_SMALL       = -11,
    UCS_ERR_NO_ELEM                = -12,
    UCS_ERR_SOME_CONNECTS_FAILED   = -13,
    UCS_ERR_NO_DEVICE              = -14,
    UCS_ERR_BUSY                   = -15,
    UCS_ERR_CANCELED               = -16,
    UCS_ERR_SHMEM_SEGMENT          = -17,
    UCS_ERR_ALREADY_EXISTS         = -18,
    UCS_ERR_OUT_OF_RANGE           = -19,
    UCS_ERR_TIMED_OUT              = -20,
    UCS_ERR_EXCEEDS_LIMIT          = -21,
    UCS_ERR_UNSUPPORTED            = -22,
    UCS_ERR_REJECTED               = -23,
    UCS_ERR_NOT_CONNECTED          = -24,
    UCS_ERR_CONNECTION_RESET       = -25,

    UCS_ERR_FIRST_LINK_FAILURE     = -40,
    UCS_ERR_LAST_LINK_FAILURE      = -59,
    UCS_ERR_FIRST_ENDPOINT_FAILURE = -60,
    UCS_ERR_ENDPOINT_TIMEOUT       = -80,
    UCS_ERR_LAST_ENDPOINT_FAILURE  = -89,

    UCS_ERR_LAST                   = -100
} UCS_S_PACKED ucs_status_t;

/* Whether a status belongs to the link or the endpoint error range. */
#define UCS_IS_LINK_ERROR(_code) \
    (((_code) <= UCS_ERR_FIRST_LINK_FAILURE) && \
     ((_code) >= UCS_ERR_LAST_LINK_FAILURE))
#define UCS_IS_ENDPOINT_ERROR(_code) \
    (((_code) <= UCS_ERR_FIRST_ENDPOINT_FAILURE) && \
     ((_code) >= UCS_ERR_LAST_ENDPOINT_FAILURE))

/*
 * A pointer that is either NULL (UCS_OK), an error status cast to a pointer
 * (the top 100 addresses), or a real pointer (a request in progress).
 */
typedef void *ucs_status_ptr_t;

#define UCS_PTR_IS_ERR(_ptr) \
    (((uintptr_t)(_ptr)) >= ((uintptr_t)UCS_ERR_LAST))
#define UCS_PTR_IS_PTR(_ptr) \
    (((uintptr_t)(_ptr) - 1) < ((uintptr_t)UCS_ERR_LAST - 1))
#define UCS_PTR_RAW_STATUS(_ptr) ((ucs_status_t)(intptr_t)(_ptr))
#define UCS_PTR_STATUS(_ptr) \
    (UCS_PTR_IS_PTR(_ptr) ? UCS_INPROGRESS : UCS_PTR_RAW_STATUS(_ptr))
#define UCS_STATUS_PTR(_status)    ((void *)(intptr_t)(_status))
#define UCS_STATUS_IS_ERR(_status) ((_status) < 0)

/* A static, human-readable text for a status. */
const char *ucs_status_string(ucs_status_t status);

END_C_DECLS

#endif /* RUCX_UCS_TYPE_STATUS_H */
