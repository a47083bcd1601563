/* A user's host twin for `aqueduct_scale` (user_kernels.cl), built as a shared library against
 * aqueduct_emu.h and named in AQUEDUCT_TWINS. */
#include <aqueduct_emu.h>

/* aqueduct_scale(float *x, float a, uint n): x[i] = a * x[i] + i. */
static int scale(const aqd_emu_ctx *ctx, void *user) {
    (void)user;
    uint64_t x = aqd_emu_arg_u64(ctx, 0);
    float a = aqd_emu_arg_f32(ctx, 1);
    uint32_t n = (uint32_t)aqd_emu_arg_u64(ctx, 2);
    uint32_t lo = ctx->workgroup_id[0] * ctx->workgroup_size[0];
    uint32_t hi = lo + ctx->workgroup_size[0];
    if (hi > n) hi = n;
    if (lo >= hi) return AQD_EMU_OK;
    float *p = aqd_emu_map(ctx, x + 4ull * lo, 4ull * (hi - lo));
    if (!p) return AQD_EMU_FAULT;
    for (uint32_t i = lo; i < hi; i++) p[i - lo] = a * p[i - lo] + (float)i;
    return AQD_EMU_OK;
}

int aqd_emu_twins_init(aqd_emu_registrar *r) {
    return aqd_emu_add_twin(r, "aqueduct_scale", scale, NULL);
}
