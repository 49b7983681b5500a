/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * rucx C API: kinds of memory a buffer can live in (UCX 1.13 values).
 * rucx itself moves host memory; the other kinds exist for source
 * compatibility.
 */
#ifndef RUCX_UCS_MEMORY_MEMORY_TYPE_H
#define RUCX_UCS_MEMORY_MEMORY_TYPE_H

#include <ucs/sys/compiler_def.h>

BEGIN_C_DECLS

/* Where a buffer lives. UNKNOWN shares its value with LAST. */
typedef enum ucs_memory_type {
    UCS_MEMORY_TYPE_HOST,
    UCS_MEMORY_TYPE_CUDA,
    UCS_MEMORY_TYPE_CUDA_MANAGED,
    UCS_MEMORY_TYPE_ROCM,
    UCS_MEMORY_TYPE_ROCM_MANAGED,
    UCS_MEMORY_TYPE_LAST,
    UCS_MEMORY_TYPE_UNKNOWN = UCS_MEMORY_TYPE_LAST
} ucs_memory_type_t;

/* Bit mask (over ucs_memory_type_t) of the kinds the CPU can read. */
#define UCS_MEMORY_TYPES_CPU_ACCESSIBLE \
    (UCS_BIT(UCS_MEMORY_TYPE_HOST) | UCS_BIT(UCS_MEMORY_TYPE_ROCM_MANAGED))

/* Loop _x over every memory type, HOST first. */
#define ucs_memory_type_for_each(_x) \
    for ((_x) = UCS_MEMORY_TYPE_HOST; (_x) < UCS_MEMORY_TYPE_LAST; (_x)++)

/* Short names and one-line descriptions, indexed by ucs_memory_type_t. */
extern const char *ucs_memory_type_names[];
extern const char *ucs_memory_type_descs[];

END_C_DECLS

#endif /* RUCX_UCS_MEMORY_MEMORY_TYPE_H */
