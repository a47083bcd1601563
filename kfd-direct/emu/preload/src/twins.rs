//! Host twins for user kernels that programs run under the preload (the test programs' kernels
//! in `tests/c/user_kernels.cl`). They are registered by symbol name; the emulator binds them
//! when it names a dispatched kernel object by its `.kd` symbol, and gives them the argument
//! layout of the code object's metadata note (`amdhsa.kernels[].args`): twins read their
//! arguments by position ([`aqueduct_kfd_emu::KernelCtx::arg`]), never at assumed offsets.

use std::sync::Arc;

use aqueduct::BuiltinKernel;
use aqueduct_kfd_emu::kernels::builtin_twins;
use aqueduct_kfd_emu::{KernelError, Twin};

/// The user twins.
pub fn user_twins() -> Vec<Twin> {
    vec![
        // aqueduct_vadd(float *c, const float *a, const float *b, uint n)
        Twin::new("aqueduct_vadd", 0, |ctx, wg| {
            let (c, a, b, n) = (ctx.arg(0), ctx.arg(1), ctx.arg(2), ctx.arg(3) as u32);
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
        Twin::new("aqueduct_poke", 0, |ctx, wg| {
            if wg != [0, 0, 0] {
                return Ok(());
            }
            ctx.mem.write_u32(ctx.arg(0), ctx.arg(1) as u32)
        }),
        // aqueduct_mixed(char c, short s, int *p, uchar2 v, uint n): p[i] = c + s + v.x + v.y + i.
        // Offsets 0, 2, 8, 16, 20 come from the metadata (a uchar2 is 2 bytes, 2-aligned).
        Twin::new("aqueduct_mixed", 0, |ctx, wg| {
            let (c, s, p, n) = (ctx.arg_signed(0), ctx.arg_signed(1), ctx.arg(2), ctx.arg(4) as u32);
            let v = ctx.arg_bytes(3).ok_or(KernelError::Trap)?;
            let base = c + s + i64::from(v[0]) + i64::from(v[1]);
            let r = ctx.items_x(wg);
            for i in r.start.min(n)..r.end.min(n) {
                ctx.mem.write_u32(p + u64::from(i) * 4, (base + i64::from(i)) as i32 as u32)?;
            }
            Ok(())
        }),
    ]
}

/// The emulator's built-in copy, fill and write-value twins under the symbol names of
/// aqueduct's blit kernels (`kfd-direct/blit/blit.cl`), so aqueduct's own backends (ROCr under
/// this preload) run their loaded blit code objects unchanged.
pub fn blit_twins() -> Vec<Twin> {
    builtin_twins()
        .into_iter()
        .map(|(kernel, twin)| {
            let name = match kernel {
                BuiltinKernel::Copy => "aqueduct_copy",
                BuiltinKernel::Fill => "aqueduct_fill",
                BuiltinKernel::WriteValue => "aqueduct_write_value",
                BuiltinKernel::GraphScheduler => "aqueduct_graph_scheduler",
            };
            Twin { name: Arc::from(name), ..twin }
        })
        .collect()
}
