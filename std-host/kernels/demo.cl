// The `aqueduct demo` kernel, built into an AMDHSA code object by build.sh (clang-15 and
// ld.lld-15). On the emulator it runs as the host twin registered under the same name.

static inline uint global_id_x(void) {
    __constant ushort *dispatch = (__constant ushort *)__builtin_amdgcn_dispatch_ptr();
    uint wg_size = dispatch[2]; // hsa_kernel_dispatch_packet_t.workgroup_size_x
    return __builtin_amdgcn_workgroup_id_x() * wg_size + __builtin_amdgcn_workitem_id_x();
}

// y[i] = a * x[i] + y[i] for i < n.
__kernel void axpy_u32(__global const uint *x, __global uint *y, uint a, uint n) {
    uint i = global_id_x();
    if (i < n)
        y[i] = a * x[i] + y[i];
}

// dst[i] = i * scale for i < n.
__kernel void iota_u32(__global uint *dst, uint n, uint scale) {
    uint i = global_id_x();
    if (i < n)
        dst[i] = i * scale;
}

// dst[i] += v for i < n.
__kernel void add_u32(__global uint *dst, uint n, uint v) {
    uint i = global_id_x();
    if (i < n)
        dst[i] += v;
}
