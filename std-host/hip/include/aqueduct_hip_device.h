/* aqueduct_hip_device.h: device code's side of aqueduct's conditional graph nodes.
 *
 * Include it in HIP source compiled for an AMD GPU (clang -x hip, or hipcc). A kernel in a graph
 * sets the value of a conditional handle (aqueduct_hip.h, hipGraphConditionalHandleCreate) with
 * hipGraphSetConditional, as CUDA kernels call cudaGraphSetConditional; the node's scheduler reads
 * the value once the kernel is done (docs/conditional-graphs.md). On the emulated GPU kernels are
 * host twins, which call aqdGraphSetConditional instead. Header-only: nothing links. */
#ifndef AQUEDUCT_HIP_DEVICE_H
#define AQUEDUCT_HIP_DEVICE_H

#include "aqueduct_hip.h"

#if defined(__HIP__)

#ifndef __device__
#define __device__ __attribute__((device))
#endif

/* Stores `value` into the handle's condition word: a 32-bit store with release order at system
   scope, so the work the kernel did before is visible to the scheduler dispatch that reads the
   word (another dispatch, possibly on another queue). */
static __device__ inline void hipGraphSetConditional(hipGraphConditionalHandle handle, unsigned int value) {
    __hip_atomic_store((unsigned int*)handle, value, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}

#endif /* __HIP__ */

#endif /* AQUEDUCT_HIP_DEVICE_H */
