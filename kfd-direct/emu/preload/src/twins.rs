//! Host twins for user kernels that programs run under the preload (the test programs' kernels
//! in `tests/c/user_kernels.cl`). They are registered by symbol name; the emulator binds them
//! when it names a dispatched kernel object by its `.kd` symbol. Arguments are read at the
//! offsets the AMDGPU ABI gives explicit arguments (natural alignment, in order), which is what
//! the code object's `amdhsa.kernels` metadata lists for these signatures.

use aqueduct_kfd_emu::Twin;

/// The user twins.
pub fn user_twins() -> Vec<Twin> {
    vec![
        // aqueduct_vadd(float *c, const float *a, const float *b, uint n)
        Twin::new("aqueduct_vadd", 28, |ctx, wg| {
            let (c, a, b, n) = (ctx.arg_u64(0), ctx.arg_u64(8), ctx.arg_u64(16), ctx.arg_u32(24));
            let r = ctx.items_x(wg);
            let (lo, hi) = (r.start.min(n), r.end.min(n));
            if lo == hi {
                return Ok(());
            }
            let len = u64::from(hi - lo) * 4;
            let off = u64::from(lo) * 4;
            let mut av = vec![0u8; len as usize];
            let mut bv = vec![0u8; len as usize];
            ctx.mem.read(a + off, &mut av)?;
            ctx.mem.read(b + off, &mut bv)?;
            let out: Vec<u8> = av
                .chunks_exact(4)
                .zip(bv.chunks_exact(4))
                .flat_map(|(x, y)| {
                    let s = f32::from_le_bytes([x[0], x[1], x[2], x[3]]) + f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
                    s.to_le_bytes()
                })
                .collect();
            ctx.mem.write(c + off, &out)
        }),
        // aqueduct_poke(uint *p, uint v): work-item 0 stores v.
        Twin::new("aqueduct_poke", 12, |ctx, wg| {
            if wg != [0, 0, 0] {
                return Ok(());
            }
            ctx.mem.write_u32(ctx.arg_u64(0), ctx.arg_u32(8))
        }),
    ]
}
