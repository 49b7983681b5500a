/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * rucx C API: the few compiler helpers that the public ucp/ucs headers and
 * typical UCX programs rely on. Only a subset of UCX's internal header of the
 * same name; everything here has UCX's spelling and meaning.
 */
#ifndef RUCX_UCS_SYS_COMPILER_DEF_H
#define RUCX_UCS_SYS_COMPILER_DEF_H

#include <stdint.h>

/* Wrap declarations in C linkage when compiled as C++. */
#ifdef __cplusplus
#define BEGIN_C_DECLS extern "C" {
#define END_C_DECLS   }
#else
#define BEGIN_C_DECLS
#define END_C_DECLS
#endif

/* No padding: on an enum it makes the enum as small as its values allow. */
#define UCS_S_PACKED __attribute__((packed))

/* Bit i as an unsigned long, and the mask of bits 0 .. i-1. */
#define UCS_BIT(i)  (1ul << (i))
#define UCS_MASK(i) (UCS_BIT(i) - 1)

/* A pointer moved by a byte count. */
#define UCS_PTR_BYTE_OFFSET(_ptr, _offset) \
    ((void *)((intptr_t)(_ptr) + (intptr_t)(_offset)))

#endif /* RUCX_UCS_SYS_COMPILER_DEF_H */
