/* The kernel of `aqueduct trace` (and of the ROCr backend's run under the emulator's preload,
 * whose host twin of the same name and signature lives in aqueduct-kfd-preload): c = a + b. */
static inline size_t gid(void) {
    __constant ushort *dispatch = (__constant ushort *)__builtin_amdgcn_dispatch_ptr();
    return __builtin_amdgcn_workgroup_id_x() * dispatch[2] + __builtin_amdgcn_workitem_id_x();
}

__kernel void aqueduct_vadd(__global float *c, __global const float *a, __global const float *b, uint n) {
    size_t i = gid();
    if (i < n) c[i] = a[i] + b[i];
}
