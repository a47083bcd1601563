/* The C twin of bench.hip's kernel for the emulated GPU (loaded through AQUEDUCT_TWINS). */
#include <aqueduct_emu.h>

static int empty(const aqd_emu_ctx *ctx, void *user) {
    (void)ctx;
    (void)user;
    return AQD_EMU_OK;
}

int aqd_emu_twins_init(aqd_emu_registrar *r) { return aqd_emu_add_twin(r, "side_by_side_empty", empty, NULL); }
