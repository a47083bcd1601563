/* Device code for the user-kernel tests (built at test time with clang-15 / lld-15, no device
 * libraries). The emulator runs their host twins from aqueduct-kfd-preload. */
static inline size_t gid(void) {
    __constant ushort *dispatch = (__constant ushort *)__builtin_amdgcn_dispatch_ptr();
    return __builtin_amdgcn_workgroup_id_x() * dispatch[2] + __builtin_amdgcn_workitem_id_x();
}

__kernel void aqueduct_vadd(__global float *c, __global const float *a, __global const float *b, uint n) {
    size_t i = gid();
    if (i < n) c[i] = a[i] + b[i];
}

/* Deliberately has no host twin: dispatching it must fail loudly. */
__kernel void aqueduct_untwinned(__global int *p) { p[gid()] = 1; }

/* Writes through its pointer argument: given a bad address it is a GPU memory fault. */
__kernel void aqueduct_poke(__global uint *p, uint v) { if (gid() == 0) *p = v; }

/* Arguments only the metadata places: a char, a short, a pointer, a uchar2 and a uint (offsets
 * 0, 2, 8, 16, 20), followed by the hidden arguments. */
__kernel void aqueduct_mixed(char c, short s, __global int *p, uchar2 v, uint n) {
    size_t i = gid();
    if (i < n) p[i] = c + s + v.x + v.y + (int)i;
}

/* Has no twin in aqueduct: its twin comes from a user library named in AQUEDUCT_TWINS
 * (tests/c/scale_twin.c). x[i] = a * x[i] + i. */
__kernel void aqueduct_scale(__global float *x, float a, uint n) {
    size_t i = gid();
    if (i < n) x[i] = a * x[i] + (float)i;
}
