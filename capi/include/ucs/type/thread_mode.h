/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * rucx C API: how many threads may use an object at once (UCX 1.13 values).
 */
#ifndef RUCX_UCS_TYPE_THREAD_MODE_H
#define RUCX_UCS_TYPE_THREAD_MODE_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * SINGLE: only the thread that created the object uses it; SERIALIZED: any
 * thread, one at a time; MULTI: any threads concurrently.
 */
typedef enum {
    UCS_THREAD_MODE_SINGLE,
    UCS_THREAD_MODE_SERIALIZED,
    UCS_THREAD_MODE_MULTI,
    UCS_THREAD_MODE_LAST
} ucs_thread_mode_t;

/* Names, indexed by ucs_thread_mode_t. */
extern const char *ucs_thread_mode_names[];

#ifdef __cplusplus
}
#endif

#endif /* RUCX_UCS_TYPE_THREAD_MODE_H */
