/* aqueduct_hip.h: HIP's C API served by aqueduct (libaqueduct_hip.so / libaqueduct_hip.a).
 *
 * Include this instead of (or after) <hip/hip_runtime_api.h> (Debian's libamdhip64-dev, HIP 5.2;
 * compile with -D__HIP_PLATFORM_AMD__) and link with -laqueduct_hip instead of -lamdhip64. It adds
 * the newer HIP declarations the 5.2 header lacks and aqueduct's extensions: host kernels (what
 * the emulated GPU runs in place of GPU code) and execution ("green") contexts. */
#ifndef AQUEDUCT_HIP_H
#define AQUEDUCT_HIP_H

#include <hip/hip_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef hipStreamLegacy
#define hipStreamLegacy ((hipStream_t)1)
#endif
#define hipErrorStreamDetached ((hipError_t)916)
hipError_t hipStreamGetId(hipStream_t stream, unsigned long long* id);
hipError_t hipStreamGetDevice(hipStream_t stream, hipDevice_t* device);
hipError_t hipEventRecordWithFlags(hipEvent_t event, hipStream_t stream, unsigned int flags);
/* hipLimitStackSize (0) of newer HIP, and hipDeviceSetLimit, which HIP 5.2 does not declare. */
#ifndef hipLimitStackSize
#define hipLimitStackSize ((enum hipLimit_t)0)
#endif
hipError_t hipDeviceSetLimit(enum hipLimit_t limit, size_t value);
/* Host kernels: the emulated device runs these in place of GPU code. */
typedef void (*aqdHostKernel)(void** args, dim3 blockIdx, dim3 gridDim, dim3 blockDim);
/* Binds body to symbol (any unique address). argCount/argSizes describe the kernel's arguments; at
   launch each argument's bytes are copied (a kernarg segment), and args passed to body points at the
   copies. hipLaunchKernel(symbol, grid, block, args, sharedMem, stream) then enqueues a dispatch whose
   workgroups each call body once. */
hipError_t aqdRegisterHostKernel(const void* symbol, aqdHostKernel body, unsigned int argCount, const size_t* argSizes);
/* For aqueduct bench: count launches as hipLaunchKernel would make them, resolved and packed once
   and enqueued by the core runtime directly (the floor of hipLaunchKernel's cost). */
hipError_t aqdBenchCoreLaunch(const void* function, dim3 grid, dim3 block, void** args, size_t sharedMem,
                              hipStream_t stream, unsigned int count);
/* Execution ("green") contexts: streams created in one are detached when it is destroyed. */
typedef struct aqdExecCtx_st* aqdExecCtx_t;
hipError_t aqdExecCtxCreate(aqdExecCtx_t* ctx, int device);
hipError_t aqdExecCtxStreamCreate(aqdExecCtx_t ctx, hipStream_t* stream, unsigned int flags, int priority);
hipError_t aqdExecCtxDestroy(aqdExecCtx_t ctx);

#ifdef __cplusplus
}
#endif

#endif /* AQUEDUCT_HIP_H */
