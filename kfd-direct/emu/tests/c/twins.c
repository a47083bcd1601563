/* Host twins in C for the emulator's fixture kernels (fixtures/kernels.cl), loaded from a shared
 * library through AQUEDUCT_TWINS / EmuConfig::twin_libraries. Arguments are read by position
 * from the code object's metadata; memory goes through the checked map. */
#include <aqueduct_emu.h>
#include <stddef.h>

_Static_assert(sizeof(aqd_emu_arg) == 16, "aqd_emu_arg");
_Static_assert(offsetof(aqd_emu_ctx, workgroup_id) == 8, "aqd_emu_ctx.workgroup_id");
_Static_assert(offsetof(aqd_emu_ctx, arg_count) == 56, "aqd_emu_ctx.arg_count");
_Static_assert(offsetof(aqd_emu_ctx, kernarg) == 64, "aqd_emu_ctx.kernarg");
_Static_assert(offsetof(aqd_emu_ctx, args) == 80, "aqd_emu_ctx.args");
_Static_assert(offsetof(aqd_emu_ctx, map) == 88, "aqd_emu_ctx.map");
_Static_assert(offsetof(aqd_emu_ctx, impl) == 96, "aqd_emu_ctx.impl");
_Static_assert(offsetof(aqd_emu_registrar, add) == 8, "aqd_emu_registrar.add");

/* The work-items [lo, hi) of this work-group below `count`. */
static void items(const aqd_emu_ctx *ctx, uint32_t count, uint32_t *lo, uint32_t *hi) {
    *lo = ctx->workgroup_id[0] * ctx->workgroup_size[0];
    *hi = *lo + ctx->workgroup_size[0];
    if (*hi > count) *hi = count;
    if (*lo > *hi) *lo = *hi;
}

/* vector_add(const uint *a, const uint *b, uint *c, uint count) */
static int vector_add(const aqd_emu_ctx *ctx, void *user) {
    (void)user;
    uint32_t lo, hi;
    items(ctx, (uint32_t)aqd_emu_arg_u64(ctx, 3), &lo, &hi);
    if (lo == hi) return AQD_EMU_OK;
    uint64_t off = 4ull * lo, bytes = 4ull * (hi - lo);
    const uint32_t *a = aqd_emu_map(ctx, aqd_emu_arg_u64(ctx, 0) + off, bytes);
    const uint32_t *b = aqd_emu_map(ctx, aqd_emu_arg_u64(ctx, 1) + off, bytes);
    uint32_t *c = aqd_emu_map(ctx, aqd_emu_arg_u64(ctx, 2) + off, bytes);
    if (!a || !b || !c) return AQD_EMU_FAULT;
    for (uint32_t i = 0; i < hi - lo; i++) c[i] = a[i] + b[i];
    return AQD_EMU_OK;
}

/* fill_u32(uint *dst, uint value, uint count) */
static int fill_u32(const aqd_emu_ctx *ctx, void *user) {
    (void)user;
    uint32_t lo, hi;
    items(ctx, (uint32_t)aqd_emu_arg_u64(ctx, 2), &lo, &hi);
    if (lo == hi) return AQD_EMU_OK;
    uint32_t *d = aqd_emu_map(ctx, aqd_emu_arg_u64(ctx, 0) + 4ull * lo, 4ull * (hi - lo));
    if (!d) return AQD_EMU_FAULT;
    uint32_t v = (uint32_t)aqd_emu_arg_u64(ctx, 1);
    for (uint32_t i = 0; i < hi - lo; i++) d[i] = v;
    return AQD_EMU_OK;
}

int aqd_emu_twins_init(aqd_emu_registrar *r) {
    if (r->abi_version != AQD_EMU_ABI_VERSION) return 1;
    if (aqd_emu_add_twin(r, "vector_add", vector_add, NULL) != 0) return 2;
    if (aqd_emu_add_twin(r, "fill_u32", fill_u32, NULL) != 0) return 3;
    return 0;
}
