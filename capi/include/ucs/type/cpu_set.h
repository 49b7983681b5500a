/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * rucx C API: a fixed-size CPU bit set with UCX 1.13's layout (1024 bits).
 */
#ifndef RUCX_UCS_TYPE_CPU_SET_H
#define RUCX_UCS_TYPE_CPU_SET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One word of the set. */
typedef unsigned long int ucs_cpu_mask_t;

/* Capacity of a set in CPUs, and CPUs per word. */
#define UCS_CPU_SETSIZE 1024
#define UCS_NCPUBITS    (8 * sizeof(ucs_cpu_mask_t))

/* The word that holds a CPU, and the CPU's bit within that word. */
#define UCS_CPUELT(_cpu)  ((_cpu) / UCS_NCPUBITS)
#define UCS_CPUMASK(_cpu) ((ucs_cpu_mask_t)1 << ((_cpu) % UCS_NCPUBITS))

typedef struct {
    ucs_cpu_mask_t ucs_bits[UCS_CPU_SETSIZE / UCS_NCPUBITS];
} ucs_cpu_set_t;

/* Clear every CPU; add or remove one (out-of-range CPUs are ignored). */
#define UCS_CPU_ZERO(_cpusetp) \
    do { \
        int _w; \
        for (_w = 0; _w < (int)(UCS_CPU_SETSIZE / UCS_NCPUBITS); ++_w) { \
            (_cpusetp)->ucs_bits[_w] = 0; \
        } \
    } while (0)

#define UCS_CPU_SET(_cpu, _cpusetp) \
    do { \
        size_t _c = (_cpu); \
        if (_c < UCS_CPU_SETSIZE) { \
            (_cpusetp)->ucs_bits[UCS_CPUELT(_c)] |= UCS_CPUMASK(_c); \
        } \
    } while (0)

#define UCS_CPU_CLR(_cpu, _cpusetp) \
    do { \
        size_t _c = (_cpu); \
        if (_c < UCS_CPU_SETSIZE) { \
            (_cpusetp)->ucs_bits[UCS_CPUELT(_c)] &= ~UCS_CPUMASK(_c); \
        } \
    } while (0)

/* Non-zero when the CPU is in the set. */
static inline int ucs_cpu_is_set(int cpu, const ucs_cpu_set_t *cpusetp)
{
    if (cpu >= (int)UCS_CPU_SETSIZE) {
        return 0;
    }
    return (cpusetp->ucs_bits[UCS_CPUELT(cpu)] & UCS_CPUMASK(cpu)) != 0;
}

/* The lowest CPU in the set, or 0 when the set is empty. */
static inline int ucs_cpu_set_find_lcs(const ucs_cpu_set_t *cpu_mask)
{
    int cpu;

    for (cpu = 0; cpu < UCS_CPU_SETSIZE; ++cpu) {
        if (ucs_cpu_is_set(cpu, cpu_mask)) {
            return cpu;
        }
    }
    return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* RUCX_UCS_TYPE_CPU_SET_H */
