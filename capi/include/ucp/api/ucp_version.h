/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * rucx C API: the UCP API version these headers describe (UCX 1.13).
 */
#ifndef RUCX_UCP_API_UCP_VERSION_H
#define RUCX_UCP_API_UCP_VERSION_H

/* A version number: major in bits 24.., minor in bits 16..23. */
#define UCP_VERSION_MAJOR_SHIFT 24
#define UCP_VERSION_MINOR_SHIFT 16
#define UCP_VERSION(_major, _minor) \
    (((_major) << UCP_VERSION_MAJOR_SHIFT) | \
     ((_minor) << UCP_VERSION_MINOR_SHIFT))

/* This API: 1.13. ucp_init() passes major and minor to ucp_init_version(). */
#define UCP_API_MAJOR   1
#define UCP_API_MINOR   13
#define UCP_API_VERSION UCP_VERSION(1, 13)

#endif /* RUCX_UCP_API_UCP_VERSION_H */
