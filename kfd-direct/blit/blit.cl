// Blit kernels of the kfd-direct backend: byte copy, pattern fill and value store. Their
// kernel-argument layouts are core's CopyArgs / FillArgs / WriteValueArgs
// (core/src/backend.rs). Core dispatches them as one work-item; on hardware each kernel is a
// grid-stride loop, so any grid is correct. They read the grid from the dispatch packet, not
// from hidden arguments, so the 32 argument bytes core writes are all they need.
//
// Built by build-blit.sh (clang-15, ld.lld-15) into AMDHSA code objects for gfx90a, gfx940 and
// gfx1100, which the crate embeds. On the emulator their host twins run (registered by
// EmuSys under these names).

static inline ulong global_id(void) {
    __constant ushort *dispatch = (__constant ushort *)__builtin_amdgcn_dispatch_ptr();
    ulong wg_size = dispatch[2]; // hsa_kernel_dispatch_packet_t.workgroup_size_x
    return (ulong)__builtin_amdgcn_workgroup_id_x() * wg_size + __builtin_amdgcn_workitem_id_x();
}

static inline ulong grid_size(void) {
    __constant uint *dispatch = (__constant uint *)__builtin_amdgcn_dispatch_ptr();
    return dispatch[3]; // grid_size_x
}

// CopyArgs { dst, src, bytes }. Overlapping ranges copy as memmove does.
__kernel void aqueduct_copy(__global uchar *dst, __global const uchar *src, ulong bytes) {
    ulong n = grid_size();
    ulong i = global_id();
    if (dst > src && dst < src + bytes) {
        // Backwards, one work-item at a time per stride, to honour the overlap.
        for (ulong k = i; k < bytes; k += n)
            dst[bytes - 1 - k] = src[bytes - 1 - k];
    } else {
        for (ulong k = i; k < bytes; k += n)
            dst[k] = src[k];
    }
}

// FillArgs { dst, count, value, element_bytes }.
__kernel void aqueduct_fill(__global uchar *dst, ulong count, uint value, uint element_bytes) {
    ulong n = grid_size();
    for (ulong k = global_id(); k < count; k += n) {
        if (element_bytes == 4)
            ((__global uint *)dst)[k] = value;
        else if (element_bytes == 2)
            ((__global ushort *)dst)[k] = (ushort)value;
        else
            dst[k] = (uchar)value;
    }
}

// WriteValueArgs { dst, value, width, reserved }.
__kernel void aqueduct_write_value(__global uchar *dst, ulong value, uint width, uint reserved) {
    if (global_id() != 0)
        return;
    if (width == 8)
        __atomic_store_n((__global ulong *)dst, value, __ATOMIC_RELEASE);
    else
        __atomic_store_n((__global uint *)dst, (uint)value, __ATOMIC_RELEASE);
}
