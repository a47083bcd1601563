/* aqueduct_emu.h: host twins for the aqueduct emulated AMD GPU, written in C.
 *
 * The emulated GPU cannot run GPU machine code. When a program dispatches a kernel of a real
 * AMDHSA code object, the emulator names the kernel by its symbol (`foo` for `foo.kd`) and runs
 * the host function registered under that name once per work-group: the kernel's "twin".
 *
 * A twin comes from one of two places:
 *   - a shared library named in AQUEDUCT_TWINS (a colon-separated list of paths), loaded by the
 *     preload library under `aqueduct run` and by every program that runs the emulator in-process.
 *     The library exports aqd_emu_twins_init(), which registers its twins through the registrar.
 *   - a program linked to aqueduct (the HIP library libaqueduct_hip, or a Rust program using the
 *     emulator) calls aqd_emu_register_twin() itself.
 *
 * Work-groups of one dispatch run on several compute-unit workers at once, and work-groups of
 * other dispatches too: a twin must be reentrant and must not assume any order among work-groups.
 *
 * Example (a twin for `__kernel void scale(__global float *x, float a, uint n)`):
 *
 *     #include <aqueduct_emu.h>
 *
 *     static int scale(const aqd_emu_ctx *ctx, void *user) {
 *         uint64_t x = aqd_emu_arg_u64(ctx, 0);
 *         float a = aqd_emu_arg_f32(ctx, 1);
 *         uint32_t n = (uint32_t)aqd_emu_arg_u64(ctx, 2);
 *         uint32_t lo = ctx->workgroup_id[0] * ctx->workgroup_size[0];
 *         uint32_t hi = lo + ctx->workgroup_size[0];
 *         if (hi > n) hi = n;
 *         if (lo >= hi) return AQD_EMU_OK;
 *         float *p = aqd_emu_map(ctx, x + 4ull * lo, 4ull * (hi - lo));
 *         if (!p) return AQD_EMU_FAULT;   // the work-group fails with a GPU memory fault
 *         for (uint32_t i = 0; i < hi - lo; i++) p[i] *= a;
 *         return AQD_EMU_OK;
 *     }
 *
 *     int aqd_emu_twins_init(aqd_emu_registrar *r) {
 *         return aqd_emu_add_twin(r, "scale", scale, NULL);
 *     }
 *
 * Build it with `cc -shared -fPIC -I kfd-direct/emu/include -o libmytwins.so mytwins.c` and run
 * `AQUEDUCT_TWINS=./libmytwins.so aqueduct run -- ./program`.
 */
#ifndef AQUEDUCT_EMU_H
#define AQUEDUCT_EMU_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the structures below; the emulator fills it in, a library may check it. */
#define AQD_EMU_ABI_VERSION 1u

/* What a twin body returns. */
#define AQD_EMU_OK 0    /* the work-group finished */
#define AQD_EMU_FAULT 1 /* a memory access failed (aqd_emu_map returned NULL) */
#define AQD_EMU_TRAP 2  /* an illegal instruction: the queue stops with a wave error */
#define AQD_EMU_HANG 3  /* the kernel never finishes: its queue hangs */

/* One kernel argument, from the code object's metadata (`.args`), in declaration order:
 * the explicit arguments first, then the hidden ones the runtime fills in. */
typedef struct aqd_emu_arg {
    uint32_t offset; /* byte offset in the kernel-argument segment */
    uint32_t size;   /* bytes */
    uint32_t hidden; /* 1 for a `hidden_*` argument */
    uint32_t reserved;
} aqd_emu_arg;

typedef struct aqd_emu_ctx aqd_emu_ctx;

/* What one work-group sees. Valid only during the call. */
struct aqd_emu_ctx {
    uint32_t abi_version;       /* AQD_EMU_ABI_VERSION */
    uint32_t worker;            /* the compute-unit worker running this work-group */
    uint32_t workgroup_id[3];   /* this work-group */
    uint32_t workgroup_size[3]; /* work-items per work-group */
    uint32_t grid_size[3];      /* work-items in the grid */
    uint32_t workgroup_count[3];/* ceil(grid_size / workgroup_size) */
    uint32_t arg_count;         /* entries of `args` (0 when the kernel has no metadata) */
    uint32_t reserved;
    const uint8_t *kernarg;     /* the kernel-argument segment */
    uint64_t kernarg_size;      /* its bytes */
    const aqd_emu_arg *args;    /* the argument layout */
    /* Checked device-memory access: a host pointer to `bytes` bytes at GPU address `va`, valid
     * until the twin returns, or NULL when the range is not inside one buffer mapped on this
     * device (the work-group then fails with a GPU memory fault at that address). */
    void *(*map)(const aqd_emu_ctx *ctx, uint64_t va, uint64_t bytes);
    void *impl; /* the emulator's */
};

/* The body of a twin: runs one work-group; returns an AQD_EMU_* value. `user` is the pointer
 * given at registration. */
typedef int (*aqd_emu_twin_fn)(const aqd_emu_ctx *ctx, void *user);

/* Checked device memory (see aqd_emu_ctx.map). */
static inline void *aqd_emu_map(const aqd_emu_ctx *ctx, uint64_t va, uint64_t bytes) {
    return ctx->map(ctx, va, bytes);
}

/* A pointer to the bytes of argument `i` inside the kernel-argument segment, or NULL when the
 * kernel has no such argument. */
static inline const void *aqd_emu_arg_ptr(const aqd_emu_ctx *ctx, uint32_t i) {
    if (i >= ctx->arg_count) return NULL;
    const aqd_emu_arg *a = &ctx->args[i];
    if ((uint64_t)a->offset + a->size > ctx->kernarg_size) return NULL;
    return ctx->kernarg + a->offset;
}

/* Argument `i` as a little-endian integer of its size, zero-extended (a pointer reads 8 bytes,
 * a `char` one); 0 when the kernel has no such argument. */
static inline uint64_t aqd_emu_arg_u64(const aqd_emu_ctx *ctx, uint32_t i) {
    const uint8_t *p = (const uint8_t *)aqd_emu_arg_ptr(ctx, i);
    if (!p) return 0;
    uint32_t n = ctx->args[i].size < 8 ? ctx->args[i].size : 8;
    uint64_t v = 0;
    for (uint32_t k = 0; k < n; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
}

/* Argument `i` as a `float` (0 when absent or not 4 bytes). */
static inline float aqd_emu_arg_f32(const aqd_emu_ctx *ctx, uint32_t i) {
    const void *p = aqd_emu_arg_ptr(ctx, i);
    float f = 0.0f;
    if (p && ctx->args[i].size == 4) memcpy(&f, p, 4);
    return f;
}

typedef struct aqd_emu_registrar aqd_emu_registrar;

/* Handed to aqd_emu_twins_init of a library named in AQUEDUCT_TWINS. */
struct aqd_emu_registrar {
    uint32_t abi_version; /* AQD_EMU_ABI_VERSION */
    uint32_t reserved;
    /* Registers `body` as the twin of the kernel named `symbol` (without `.kd`); 0 on success,
     * -1 for a NULL or non-UTF-8 symbol or a NULL body. */
    int (*add)(aqd_emu_registrar *r, const char *symbol, aqd_emu_twin_fn body, void *user);
    void *impl; /* the emulator's */
};

static inline int aqd_emu_add_twin(aqd_emu_registrar *r, const char *symbol, aqd_emu_twin_fn body, void *user) {
    return r->add(r, symbol, body, user);
}

/* Exported by every library named in AQUEDUCT_TWINS; called once when the library is loaded.
 * A non-zero return fails the emulator's start with an error naming the library. */
int aqd_emu_twins_init(aqd_emu_registrar *r);

/* In-process registration, exported by aqueduct (libaqueduct_hip, the preload library): binds
 * `body` to `symbol` for every emulated GPU of the process, present and future. Registering a
 * symbol again replaces its body. 0 on success, -1 for a NULL or non-UTF-8 symbol or NULL body. */
int aqd_emu_register_twin(const char *symbol, aqd_emu_twin_fn body, void *user);

#ifdef __cplusplus
}
#endif

#endif /* AQUEDUCT_EMU_H */
