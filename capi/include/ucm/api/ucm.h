/* rucx's libucp.so: the UCM entry points of UCX 1.13 that programs call
 * to report memory they release (Open MPI's common UCX component calls
 * them when it opens). rucx installs no memory hooks of its own: a
 * program that declares UCM_EVENT_VM_UNMAPPED external and calls
 * ucm_vm_munmap() keeps the registration caches of every live context
 * correct. Names and values are UCX 1.13's. */
#ifndef UCM_API_UCM_H_
#define UCM_API_UCM_H_

#include <ucs/sys/compiler_def.h>
#include <ucs/type/status.h>

#include <stddef.h>

BEGIN_C_DECLS

/* Memory events (bits of the `events` arguments). */
typedef enum ucm_event_type {
    UCM_EVENT_NONE                = 0,
    UCM_EVENT_MMAP                = UCS_BIT(0),
    UCM_EVENT_MUNMAP              = UCS_BIT(1),
    UCM_EVENT_MREMAP              = UCS_BIT(2),
    UCM_EVENT_SHMAT               = UCS_BIT(3),
    UCM_EVENT_SHMDT               = UCS_BIT(4),
    UCM_EVENT_SBRK                = UCS_BIT(5),
    UCM_EVENT_MADVISE             = UCS_BIT(6),
    UCM_EVENT_BRK                 = UCS_BIT(7),
    UCM_EVENT_VM_MAPPED           = UCS_BIT(16),
    UCM_EVENT_VM_UNMAPPED         = UCS_BIT(17),
    UCM_EVENT_MEM_TYPE_ALLOC      = UCS_BIT(20),
    UCM_EVENT_MEM_TYPE_FREE       = UCS_BIT(21),
    UCM_EVENT_FLAG_NO_INSTALL     = UCS_BIT(24),
    UCM_EVENT_FLAG_EXISTING_ALLOC = UCS_BIT(25)
} ucm_event_type_t;

/* The caller reports `events` itself (UCM_EVENT_VM_UNMAPPED through
 * ucm_vm_munmap). */
void ucm_set_external_event(int events);

/* UCS_OK: nothing to check, rucx relies on no hooks. */
ucs_status_t ucm_test_events(int events);
ucs_status_t ucm_test_external_events(int events);

/* `length` bytes at `addr` are about to be released: registrations
 * cached over them end, in every live context. */
void ucm_vm_munmap(void *addr, size_t length);

END_C_DECLS

#endif
