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

// The conditional-node scheduler (core/src/conditional.rs; docs/conditional-graphs.md): reads
// the node's condition word and publishes into the node's body queue either the chosen body's
// prebuilt packets and the frame's follow packet (the tail dispatch for WHILE, the exit barrier
// otherwise), or the exit barrier alone, then rings that queue's doorbell. SchedulerArgs
// { frame, role, reserved }; the SchedulerFrame offsets below are core's (checked there).
#define FRAME_CONDITION 32
#define FRAME_KIND 40
#define FRAME_BODY_COUNT 44
#define FRAME_BODIES 48
#define BODY_BYTES 24
#define FRAME_RING 240
#define FRAME_DOORBELL 272
#define FRAME_TAIL 320
#define FRAME_EXIT 384
#define KIND_IF 0
#define KIND_WHILE 1
#define KIND_SWITCH 2
#define ROLE_TAIL 1

static void publish(__global uchar *frame, __global const uint *packets, uint len, __global const uint *last) {
    __global ulong *ring = (__global ulong *)(frame + FRAME_RING);
    __global uint *base = (__global uint *)ring[0];
    ulong size = ((__global uint *)ring)[2];
    __global ulong *write_index = (__global ulong *)ring[2];
    __global ulong *read_index = (__global ulong *)ring[3];
    __global ulong *bell = (__global ulong *)(frame + FRAME_DOORBELL);
    ulong n = (ulong)len + 1;
    // One body is in flight per body queue and the instantiation sized the ring for it; a ring
    // without room is a broken executable: stop the queue.
    ulong w = __atomic_load_n(write_index, __ATOMIC_RELAXED);
    if (w + n - __atomic_load_n(read_index, __ATOMIC_ACQUIRE) > size)
        __builtin_trap();
    __atomic_store_n(write_index, w + n, __ATOMIC_RELAXED);
    for (ulong k = 0; k < n; k++) {
        __global const uint *src = k < len ? packets + 16 * k : last;
        __global uint *dst = base + 16 * ((w + k) & (size - 1));
        for (int d = 1; d < 16; d++)
            dst[d] = src[d];
        __atomic_store_n(dst, src[0], __ATOMIC_RELEASE);
    }
    __atomic_store_n((__global ulong *)bell[0], w + n - 1 + bell[1], __ATOMIC_RELEASE);
}

__kernel void aqueduct_graph_scheduler(__global uchar *frame, uint role, uint reserved) {
    if (global_id() != 0)
        return;
    __global uint *words = (__global uint *)frame;
    __global uint *cond = (__global uint *)(*(__global ulong *)(frame + FRAME_CONDITION));
    uint kind = words[FRAME_KIND / 4];
    uint count = words[FRAME_BODY_COUNT / 4];
    uint value = __atomic_load_n(cond, __ATOMIC_ACQUIRE);
    int body = -1;
    if (kind == KIND_IF)
        body = value != 0 ? 0 : (count == 2 ? 1 : -1);
    else if (kind == KIND_WHILE)
        body = value != 0 ? 0 : -1;
    else if (kind == KIND_SWITCH)
        body = value < count ? (int)value : -1;
    else
        __builtin_trap();
    if (role == ROLE_TAIL && kind != KIND_WHILE)
        __builtin_trap();
    __global const uint *exit = (__global const uint *)(frame + FRAME_EXIT);
    if (body < 0) {
        publish(frame, exit, 0, exit);
        return;
    }
    __global uchar *b = frame + FRAME_BODIES + BODY_BYTES * body;
    __global const uint *packets = (__global const uint *)(*(__global ulong *)b);
    uint len = *(__global uint *)(b + 8);
    uint resets = *(__global uint *)(b + 12);
    __global ulong *reset = (__global ulong *)(*(__global ulong *)(b + 16));
    // Body signals start at 1 before every publication (amd_signal_t.value at offset 8).
    for (uint k = 0; k < resets; k++)
        __atomic_store_n((__global long *)(reset[k] + 8), 1, __ATOMIC_RELEASE);
    __global const uint *follow = (__global const uint *)(frame + (kind == KIND_WHILE ? FRAME_TAIL : FRAME_EXIT));
    publish(frame, packets, len, follow);
}
