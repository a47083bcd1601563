/* aqueduct_hip.h: HIP's C API served by aqueduct (libaqueduct_hip.so / libaqueduct_hip.a).
 *
 * Include this instead of (or after) <hip/hip_runtime_api.h> (Debian's libamdhip64-dev, HIP 5.2;
 * compile with -D__HIP_PLATFORM_AMD__) and link with -laqueduct_hip instead of -lamdhip64. It adds
 * the newer HIP declarations the 5.2 header lacks and aqueduct's extensions: host kernels (what
 * the emulated GPU runs in place of GPU code), execution ("green") contexts and conditional graph
 * nodes (aqueduct_hip_device.h has the device-side setter). */
#ifndef AQUEDUCT_HIP_H
#define AQUEDUCT_HIP_H

#include <hip/hip_runtime_api.h>
#include <stdint.h>

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
/* Newer HIP's (CUDA's cuGetErrorName/cuGetErrorString): an unnamed code is hipErrorInvalidValue
   with *str NULL. */
hipError_t hipDrvGetErrorName(hipError_t error, const char** str);
hipError_t hipDrvGetErrorString(hipError_t error, const char** str);
/* HIP 5.2's header renames hipEventRecord to this under HIP_API_PER_THREAD_DEFAULT_STREAM but
   neither declares it nor exports it; aqueduct does (the null stream is hipStreamPerThread). */
hipError_t hipEventRecord_spt(hipEvent_t event, hipStream_t stream);
/* hipLimitStackSize (0) of newer HIP, and hipDeviceSetLimit, which HIP 5.2 does not declare. */
#ifndef hipLimitStackSize
#define hipLimitStackSize ((enum hipLimit_t)0)
#endif
hipError_t hipDeviceSetLimit(enum hipLimit_t limit, size_t value);
/* Newer HIP's cooperative launches of module functions (hipFunction_t). */
typedef struct hipFunctionLaunchParams_t {
    hipFunction_t function;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    hipStream_t hStream;
    void** kernelParams;
} hipFunctionLaunchParams;
hipError_t hipModuleLaunchCooperativeKernel(hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY,
                                            unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                            unsigned int blockDimZ, unsigned int sharedMemBytes, hipStream_t stream,
                                            void** kernelParams);
hipError_t hipModuleLaunchCooperativeKernelMultiDevice(hipFunctionLaunchParams* launchParamsList,
                                                       unsigned int numDevices, unsigned int flags);
/* Newer HIP's launch and stream attributes (CUDA's cudaLaunchAttribute*; hipStreamAttrID and
   hipStreamAttrValue are the same types). On a stream: the access policy window and the
   synchronization policy are kept and answered as set (hints here); the priority is the stream's
   creation priority (setting another one is hipErrorNotSupported); memory synchronization
   domains are hipErrorNotSupported; launch-only attributes are hipErrorInvalidValue. */
typedef enum hipLaunchAttributeID {
    hipLaunchAttributeAccessPolicyWindow = 1,
    hipLaunchAttributeCooperative = 2,
    hipLaunchAttributeSynchronizationPolicy = 3,
    hipLaunchAttributePriority = 8,
    hipLaunchAttributeMemSyncDomainMap = 9,
    hipLaunchAttributeMemSyncDomain = 10,
    hipLaunchAttributeMax
} hipLaunchAttributeID;
typedef enum hipSynchronizationPolicy {
    hipSyncPolicyAuto = 1,
    hipSyncPolicySpin = 2,
    hipSyncPolicyYield = 3,
    hipSyncPolicyBlockingSync = 4
} hipSynchronizationPolicy;
typedef union hipLaunchAttributeValue {
    char pad[64];
    hipAccessPolicyWindow accessPolicyWindow;
    int cooperative;
    int priority;
    hipSynchronizationPolicy syncPolicy;
} hipLaunchAttributeValue;
typedef hipLaunchAttributeID hipStreamAttrID;
typedef hipLaunchAttributeValue hipStreamAttrValue;
typedef struct hipLaunchAttribute_st {
    hipLaunchAttributeID id;
    char pad[8 - sizeof(hipLaunchAttributeID)];
    union {
        hipLaunchAttributeValue val;
        hipLaunchAttributeValue value;
    };
} hipLaunchAttribute;
typedef struct hipLaunchConfig_st {
    dim3 gridDim;
    dim3 blockDim;
    size_t dynamicSmemBytes;
    hipStream_t stream;
    hipLaunchAttribute* attrs;
    unsigned int numAttrs;
} hipLaunchConfig_t;
hipError_t hipStreamGetAttribute(hipStream_t stream, hipStreamAttrID attr, hipStreamAttrValue* value_out);
hipError_t hipStreamSetAttribute(hipStream_t stream, hipStreamAttrID attr, const hipStreamAttrValue* value);
/* CUDA's cudaStreamCopyAttributes: dst gets src's access policy window and synchronization
   policy (priorities stay each stream's own). */
hipError_t hipStreamCopyAttributes(hipStream_t dst, hipStream_t src);
/* A launch of fPtr (a kernel handle, a host kernel or a hipFunction_t) with config's dimensions,
   LDS bytes and stream, and its attributes (cooperative non-zero: hipLaunchCooperativeKernel's
   checks; a priority other than the stream's: hipErrorNotSupported). */
hipError_t hipLaunchKernelExC(const hipLaunchConfig_t* config, const void* fPtr, void** args);
/* Newer HIP's edge data (CUDA's cudaGraphEdgeData); only the default edge (all zeros) is taken. */
typedef struct hipGraphEdgeData {
    unsigned char from_port;
    unsigned char reserved[5];
    unsigned char to_port;
    unsigned char type;
} hipGraphEdgeData;
/* CUDA's cudaStreamBeginCaptureToGraph: the capture's work is added to graph (after
   dependencies, nodes of it; dependencyData NULL or default edges), and hipStreamEndCapture
   answers graph. hipMallocAsync/hipFreeAsync on the stream meanwhile are hipErrorNotSupported. */
hipError_t hipStreamBeginCaptureToGraph(hipStream_t stream, hipGraph_t graph, const hipGraphNode_t* dependencies,
                                        const hipGraphEdgeData* dependencyData, size_t numDependencies,
                                        hipStreamCaptureMode mode);
/* Newer HIP's batched stream memory operations (CUDA's cuStreamBatchMemOp): every entry is
   checked before any is enqueued; waits compare with a mask of all ones; barriers and
   remote-write flushes are already implied by stream order here. */
typedef enum hipStreamBatchMemOpType {
    hipStreamMemOpWaitValue32 = 0x1,
    hipStreamMemOpWriteValue32 = 0x2,
    hipStreamMemOpWaitValue64 = 0x4,
    hipStreamMemOpWriteValue64 = 0x5,
    hipStreamMemOpBarrier = 0x6,
    hipStreamMemOpFlushRemoteWrites = 0x3
} hipStreamBatchMemOpType;
typedef union hipStreamBatchMemOpParams_union {
    hipStreamBatchMemOpType operation;
    struct hipStreamMemOpWaitValueParams_t {
        hipStreamBatchMemOpType operation;
        hipDeviceptr_t address;
        union {
            uint32_t value;
            uint64_t value64;
        };
        unsigned int flags;
        hipDeviceptr_t alias;
    } waitValue;
    struct hipStreamMemOpWriteValueParams_t {
        hipStreamBatchMemOpType operation;
        hipDeviceptr_t address;
        union {
            uint32_t value;
            uint64_t value64;
        };
        unsigned int flags;
        hipDeviceptr_t alias;
    } writeValue;
    struct hipStreamMemOpFlushRemoteWritesParams_t {
        hipStreamBatchMemOpType operation;
        unsigned int flags;
    } flushRemoteWrites;
    struct hipStreamMemOpMemoryBarrierParams_t {
        hipStreamBatchMemOpType operation;
        unsigned int flags;
    } memoryBarrier;
    uint64_t pad[6];
} hipStreamBatchMemOpParams;
hipError_t hipStreamBatchMemOp(hipStream_t stream, unsigned int count, hipStreamBatchMemOpParams* paramArray,
                               unsigned int flags);
/* Newer HIP's batched copies (CUDA's cudaMemcpyBatchAsync): attrs[k] applies from copy
   attrsIdxs[k] on (attrsIdxs[0] == 0, increasing); DuringApiCall reads each source before the
   call returns; on an error *failIdx is the failing copy or SIZE_MAX. */
typedef enum hipMemcpySrcAccessOrder {
    hipMemcpySrcAccessOrderInvalid = 0,
    hipMemcpySrcAccessOrderStream = 1,
    hipMemcpySrcAccessOrderDuringApiCall = 2,
    hipMemcpySrcAccessOrderAny = 3,
    hipMemcpySrcAccessOrderMax = 0x7FFFFFFF
} hipMemcpySrcAccessOrder;
#define hipMemcpyFlagPreferOverlapWithCompute 0x1
typedef struct hipMemcpyAttributes {
    hipMemcpySrcAccessOrder srcAccessOrder;
    hipMemLocation srcLocHint;
    hipMemLocation dstLocHint;
    unsigned int flags;
} hipMemcpyAttributes;
hipError_t hipMemcpyBatchAsync(void** dsts, void** srcs, size_t* sizes, size_t count, hipMemcpyAttributes* attrs,
                               size_t* attrsIdxs, size_t numAttrs, size_t* failIdx, hipStream_t stream);
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
/* For aqueduct bench: count such launches captured on stream by the core runtime's own capture, the
   graph instantiated by it, then both destroyed (the floor of capture + instantiate through HIP). */
hipError_t aqdBenchCoreCapture(const void* function, dim3 grid, dim3 block, void** args, size_t sharedMem,
                               hipStream_t stream, unsigned int count);
/* Execution ("green") contexts: streams created in one are detached when it is destroyed. */
typedef struct aqdExecCtx_st* aqdExecCtx_t;
hipError_t aqdExecCtxCreate(aqdExecCtx_t* ctx, int device);
hipError_t aqdExecCtxStreamCreate(aqdExecCtx_t ctx, hipStream_t* stream, unsigned int flags, int priority);
hipError_t aqdExecCtxDestroy(aqdExecCtx_t ctx);

/* Conditional graph nodes (CUDA 12.8's semantics, HIP-style names; docs/conditional-graphs.md).
   A handle is the device address of a cell whose first 32-bit word is the condition. */
typedef unsigned long long hipGraphConditionalHandle;
typedef enum hipGraphConditionalNodeType {
    hipGraphCondTypeIf = 0,     /* body 0 once if the value is not 0; with size 2, else body 1 */
    hipGraphCondTypeWhile = 1,  /* body 0 while the value is not 0 (checked before each round) */
    hipGraphCondTypeSwitch = 2  /* body `value` once; none if value >= size */
} hipGraphConditionalNodeType;
/* Flag of hipGraphConditionalHandleCreate: set the value to the default at every launch. */
#define hipGraphCondAssignDefault 1
/* hipGraphNodeParams.type of a conditional node: CUDA's value, unused in HIP 5.2's numbering. */
#define hipGraphNodeTypeConditional ((hipGraphNodeType)13)

typedef struct hipConditionalNodeParams {
    hipGraphConditionalHandle handle;
    hipGraphConditionalNodeType type;
    unsigned int size;        /* number of bodies: WHILE 1, IF 1 or 2, SWITCH 1..8 */
    hipGraph_t* phGraph_out;  /* out: the node's own array of `size` empty body graphs */
} hipConditionalNodeParams;

/* The other node kinds of hipGraphNodeParams (newer HIP's types, which HIP 5.2 lacks). */
typedef struct hipMemcpyNodeParams {
    int flags;  /* 0 */
    int reserved[3];
    hipMemcpy3DParms copyParams;
} hipMemcpyNodeParams;
typedef struct hipChildGraphNodeParams {
    hipGraph_t graph;
} hipChildGraphNodeParams;
typedef struct hipEventWaitNodeParams {
    hipEvent_t event;
} hipEventWaitNodeParams;
typedef struct hipEventRecordNodeParams {
    hipEvent_t event;
} hipEventRecordNodeParams;
typedef struct hipMemAllocNodeParams {
    hipMemPoolProps poolProps;
    const hipMemAccessDesc* accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    void* dptr;
} hipMemAllocNodeParams;
typedef struct hipMemFreeNodeParams {
    void* dptr;
} hipMemFreeNodeParams;

/* hipGraphAddNode's parameters (CUDA's and newer HIP's layout, 256 bytes). `type` takes HIP 5.2's
   numbering (hipGraphNodeTypeKernel = 1 ...) and hipGraphNodeTypeConditional. */
typedef struct hipGraphNodeParams {
    hipGraphNodeType type;
    int reserved0[3];
    union {
        long long reserved1[29];
        hipKernelNodeParams kernel;
        hipMemcpyNodeParams memcpy;
        hipMemsetParams memset;
        hipHostNodeParams host;
        hipChildGraphNodeParams graph;
        hipEventWaitNodeParams eventWait;
        hipEventRecordNodeParams eventRecord;
        hipMemAllocNodeParams alloc;
        hipMemFreeNodeParams free;
        hipConditionalNodeParams conditional;
    };
    long long reserved2;
} hipGraphNodeParams;

/* A handle on `graph` (the graph holding its node, or an ancestor of it) whose value starts at
   defaultLaunchValue; flags 0 or hipGraphCondAssignDefault. */
hipError_t hipGraphConditionalHandleCreate(hipGraphConditionalHandle* pHandle_out, hipGraph_t graph,
                                           unsigned int defaultLaunchValue, unsigned int flags);
/* Adds a node of any kind. For a conditional node the call creates `size` empty body graphs and
   points nodeParams->conditional.phGraph_out at the node's array of them. */
hipError_t hipGraphAddNode(hipGraphNode_t* pGraphNode, hipGraph_t graph, const hipGraphNode_t* pDependencies,
                           size_t numDependencies, hipGraphNodeParams* nodeParams);
/* Sets a handle's value (a release store of its word): what a host kernel on the emulated GPU
   calls where GPU code calls hipGraphSetConditional (aqueduct_hip_device.h). No checks: the
   handle must be live, as on the device. */
void aqdGraphSetConditional(hipGraphConditionalHandle handle, unsigned int value);

#ifdef __cplusplus
}
#endif

#endif /* AQUEDUCT_HIP_H */
