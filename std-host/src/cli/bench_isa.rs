//! `aqueduct bench`'s executor figures (docs/executor.md): how fast the gfx90a interpreter runs
//! hipcc -O3 machine code on one host thread, beside the same loop compiled for the host on one
//! thread, measured in the same run.
//!
//! - `isa_saxpy_16m`: the grid-stride `saxpy` of `kfd-direct/emu/fixtures/isa/kernels.hip` over
//!   16 Mi floats (1 Mi with `--short`), 1024 work-groups of 256, every work-group run in turn
//!   by `aqueduct_isa::exec::run_work_group_counted` over a software memory; ns per element.
//!   Floor `host_saxpy`: `y[i] = a * x[i] + y[i]` over the same arrays; ns per element.
//! - `isa_sgemm_256`: `sgemm_tiled` of `fixtures/isa/sgemm.hip` (16 × 16 LDS tiles, work-groups
//!   of 256 with barriers) for 256 × 256 matrices (64 × 64 with `--short`); ns per
//!   multiply-add. Floor `host_sgemm`: the same blocking on the host; ns per multiply-add.
//! - `isa_wave_instruction`: the interpreter's time per wave instruction over both kernels (the
//!   reciprocal of its wave instructions per second); no floor.
//! - `isa_axpy_2_workers`: the demo code object's `axpy_u32` as machine code on an emulated
//!   gfx90a with two compute-unit workers, dispatched through the runtime (4 Mi elements in
//!   work-groups of 256; 256 Ki with `--short`), from launch to synchronize; ns per element.
//!   Floor `isa_axpy_1_worker`: the same on a device with one worker. The ratio is how the
//!   work-groups spread over the workers (1 / scaling; the target, scaling >= 1.7, is a ratio
//!   <= 0.59). Both devices are opened here whatever backend the rest of the run uses.
//!
//! Inputs are small integers, so the fused and the unfused products agree and the results are
//! exact: each run is checked against the host's, and a mismatch or an executor error ends the
//! run with an error.

use std::hint::black_box;
use std::time::Instant;

use aqueduct_isa::exec::{self, Code, Dispatch, Kernel, Limits, VecMemory};

use super::bench::{median, Figure, Floor};
use super::demo::{demo_code_object, AxpyArgs};
use crate::api::{Device, Dim3, Kernel as DeviceKernel};
use crate::{BackendKind, OpenOptions};

const SAXPY_BUNDLE: &[u8] = include_bytes!("../../../kfd-direct/emu/fixtures/isa/kernels-gfx90a.bundle");
const SGEMM_BUNDLE: &[u8] = include_bytes!("../../../kfd-direct/emu/fixtures/isa/sgemm-gfx90a.bundle");

/// Where the code object's image goes in the software memory.
const BASE: u64 = 0x1_0000_0000;

/// A kernel of a bundle placed at [`BASE`] in a memory of `extra` bytes after the image; the
/// memory's first free address.
fn load(bundle: &[u8], name: &str, extra: usize) -> Result<(Kernel, VecMemory, u64), String> {
    let b = amdhsa::Bundle::parse(bundle).map_err(|e| format!("bench fixture bundle: {e:?}"))?;
    let e = b
        .entries()
        .find(|e| e.target().is_some_and(|t| t.processor.name == "gfx90a"))
        .ok_or("bench fixture: no gfx90a entry")?;
    let co = amdhsa::CodeObject::parse(e.code).map_err(|e| format!("bench fixture: {e:?}"))?;
    let size = co.image_size() as usize;
    let mut image = vec![0u8; size];
    co.place(&mut image, BASE).map_err(|e| format!("bench fixture: {e:?}"))?;
    let k = co.kernel(name).map_err(|e| format!("{name}: {e:?}"))?.ok_or_else(|| format!("no kernel {name}"))?;
    let object = BASE + k.descriptor_address;
    let entry = object.wrapping_add_signed(k.descriptor.kernel_code_entry_byte_offset);
    let from = usize::try_from(entry - BASE).map_err(|_| "entry")?;
    let words: Vec<u32> = image
        .get(from..)
        .ok_or("entry outside the image")?
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let kernel = Kernel { code: Code::decode(entry, &words), descriptor: k.descriptor, entry };
    let free = (BASE + size as u64).next_multiple_of(0x1000);
    let mem = VecMemory::new(BASE, (free - BASE) as usize + extra);
    mem.bytes.borrow_mut()[..size].copy_from_slice(&image);
    Ok((kernel, mem, free))
}

fn put(mem: &VecMemory, addr: u64, b: &[u8]) {
    let o = (addr - mem.base) as usize;
    mem.bytes.borrow_mut()[o..o + b.len()].copy_from_slice(b);
}

fn put_f32s(mem: &VecMemory, addr: u64, v: &[f32]) {
    let o = (addr - mem.base) as usize;
    let mut m = mem.bytes.borrow_mut();
    for (i, x) in v.iter().enumerate() {
        m[o + 4 * i..o + 4 * i + 4].copy_from_slice(&x.to_le_bytes());
    }
}

fn get_f32s(mem: &VecMemory, addr: u64, n: usize) -> Vec<f32> {
    let o = (addr - mem.base) as usize;
    let m = mem.bytes.borrow();
    (0..n).map(|i| f32::from_le_bytes([m[o + 4 * i], m[o + 4 * i + 1], m[o + 4 * i + 2], m[o + 4 * i + 3]])).collect()
}

/// Places an AQL packet (work-group size, grid size: what the kernels read through the dispatch
/// ptr) at `at` and returns the dispatch.
fn dispatch(mem: &VecMemory, at: u64, kernarg: u64, grid: u32, wg: u16, lds: u32) -> Dispatch {
    put(mem, at + 4, &wg.to_le_bytes());
    put(mem, at + 6, &1u16.to_le_bytes());
    put(mem, at + 8, &1u16.to_le_bytes());
    put(mem, at + 12, &grid.to_le_bytes());
    put(mem, at + 16, &1u32.to_le_bytes());
    put(mem, at + 20, &1u32.to_le_bytes());
    put(mem, at + 24, &0u32.to_le_bytes());
    put(mem, at + 28, &lds.to_le_bytes());
    Dispatch {
        packet_address: at,
        kernarg_address: kernarg,
        grid: [grid, 1, 1],
        workgroup_size: [u32::from(wg), 1, 1],
        group_segment_size: lds,
        ..Default::default()
    }
}

/// Runs every work-group of `d` in turn; the wave instructions run.
fn run_all(kernel: &Kernel, d: &Dispatch, mem: &VecMemory, what: &str) -> Result<u64, String> {
    let groups = d.grid[0].div_ceil(d.workgroup_size[0]);
    let mut n = 0;
    for g in 0..groups {
        n += exec::run_work_group_counted(kernel, d, [g, 0, 0], 0, mem, &Limits::default())
            .map_err(|e| format!("{what}: work-group {g}: {e}"))?;
    }
    Ok(n)
}

struct Sample {
    isa_ns: f64,
    host_ns: f64,
    instructions: u64,
    isa_total_ns: f64,
}

fn saxpy_sample(n: usize) -> Result<Sample, String> {
    let bytes = 4 * n;
    let (kernel, mem, free) = load(SAXPY_BUNDLE, "saxpy", 0x2000 + 2 * bytes)?;
    let (packet, kernarg, x, y) = (free, free + 0x100, free + 0x2000, free + 0x2000 + bytes as u64);
    let a = 2.0f32;
    let xs: Vec<f32> = (0..n).map(|i| (i % 1024) as f32).collect();
    let ys: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    put_f32s(&mem, x, &xs);
    put_f32s(&mem, y, &ys);
    put(&mem, kernarg, &(n as i32).to_le_bytes());
    put(&mem, kernarg + 4, &a.to_le_bytes());
    put(&mem, kernarg + 8, &x.to_le_bytes());
    put(&mem, kernarg + 16, &y.to_le_bytes());
    let d = dispatch(&mem, packet, kernarg, 1024 * 256, 256, 0);
    let t = Instant::now();
    let instructions = run_all(&kernel, &d, &mem, "isa_saxpy")?;
    let isa = t.elapsed();
    // The host loop, one thread.
    let mut hy = ys.clone();
    let t = Instant::now();
    let hx = black_box(&xs);
    let ha = black_box(a);
    for (yv, xv) in hy.iter_mut().zip(hx.iter()) {
        *yv += ha * *xv;
    }
    black_box(&mut hy);
    let host = t.elapsed();
    let got = get_f32s(&mem, y, n);
    if let Some(i) = (0..n).find(|&i| got[i].to_bits() != hy[i].to_bits()) {
        return Err(format!("isa_saxpy: y[{i}] = {} want {}", got[i], hy[i]));
    }
    Ok(Sample {
        isa_ns: isa.as_secs_f64() * 1e9 / n as f64,
        host_ns: host.as_secs_f64() * 1e9 / n as f64,
        instructions,
        isa_total_ns: isa.as_secs_f64() * 1e9,
    })
}

/// The host SGEMM with `sgemm_tiled`'s blocking: 16 × 16 tiles of C, 16-wide k tiles.
fn host_sgemm(n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    let mut acc = [[0.0f32; 16]; 16];
    for tr in (0..n).step_by(16) {
        for tc in (0..n).step_by(16) {
            acc.iter_mut().for_each(|r| r.fill(0.0));
            for t in (0..n).step_by(16) {
                for ty in 0..16 {
                    for k in 0..16 {
                        let av = a[(tr + ty) * n + t + k];
                        let brow = &b[(t + k) * n + tc..(t + k) * n + tc + 16];
                        for tx in 0..16 {
                            acc[ty][tx] += av * brow[tx];
                        }
                    }
                }
            }
            for ty in 0..16 {
                c[(tr + ty) * n + tc..(tr + ty) * n + tc + 16].copy_from_slice(&acc[ty]);
            }
        }
    }
}

fn sgemm_sample(n: usize) -> Result<Sample, String> {
    let bytes = 4 * n * n;
    let (kernel, mem, free) = load(SGEMM_BUNDLE, "sgemm_tiled", 0x2000 + 3 * bytes)?;
    let (packet, kernarg) = (free, free + 0x100);
    let (a, b, c) = (free + 0x2000, free + 0x2000 + bytes as u64, free + 0x2000 + 2 * bytes as u64);
    let av: Vec<f32> = (0..n * n).map(|i| ((i * 7) % 9) as f32 - 4.0).collect();
    let bv: Vec<f32> = (0..n * n).map(|i| ((i * 5) % 7) as f32 - 3.0).collect();
    put_f32s(&mem, a, &av);
    put_f32s(&mem, b, &bv);
    put(&mem, kernarg, &(n as i32).to_le_bytes());
    put(&mem, kernarg + 8, &a.to_le_bytes());
    put(&mem, kernarg + 16, &b.to_le_bytes());
    put(&mem, kernarg + 24, &c.to_le_bytes());
    let tiles = (n / 16) as u32;
    let d = dispatch(&mem, packet, kernarg, tiles * tiles * 256, 256, 2 * 16 * 16 * 4);
    let t = Instant::now();
    let instructions = run_all(&kernel, &d, &mem, "isa_sgemm")?;
    let isa = t.elapsed();
    let mut hc = vec![0.0f32; n * n];
    let t = Instant::now();
    host_sgemm(n, black_box(&av), black_box(&bv), &mut hc);
    black_box(&mut hc);
    let host = t.elapsed();
    let got = get_f32s(&mem, c, n * n);
    if let Some(i) = (0..n * n).find(|&i| got[i].to_bits() != hc[i].to_bits()) {
        return Err(format!("isa_sgemm: C[{}][{}] = {} want {}", i / n, i % n, got[i], hc[i]));
    }
    let fmas = (n * n * n) as f64;
    Ok(Sample {
        isa_ns: isa.as_secs_f64() * 1e9 / fmas,
        host_ns: host.as_secs_f64() * 1e9 / fmas,
        instructions,
        isa_total_ns: isa.as_secs_f64() * 1e9,
    })
}

/// The executor's figures and their floors.
pub(super) fn figures(samples: usize, short: bool) -> Result<(Vec<Figure>, Vec<Floor>), String> {
    // Each sample runs millions of wave instructions: a few are enough for a median.
    let samples = samples.clamp(1, 3);
    let (sn, gn) = if short { (1 << 20, 64) } else { (16 << 20, 256) };
    let mut sax = Vec::new();
    let mut gemm = Vec::new();
    for _ in 0..samples {
        sax.push(saxpy_sample(sn)?);
        gemm.push(sgemm_sample(gn)?);
    }
    let instructions: u64 = sax.iter().chain(&gemm).map(|s| s.instructions).sum();
    let total: f64 = sax.iter().chain(&gemm).map(|s| s.isa_total_ns).sum();
    let host_saxpy = median(sax.iter().map(|s| s.host_ns).collect());
    let host_sgemm = median(gemm.iter().map(|s| s.host_ns).collect());
    let figures = vec![
        Figure {
            name: "isa_saxpy_16m",
            ns: median(sax.iter().map(|s| s.isa_ns).collect()),
            floor: Some("host_saxpy"),
            floor_ns: Some(host_saxpy),
            target: "<= 50x host loop",
        },
        Figure {
            name: "isa_sgemm_256",
            ns: median(gemm.iter().map(|s| s.isa_ns).collect()),
            floor: Some("host_sgemm"),
            floor_ns: Some(host_sgemm),
            target: "<= 50x host loop",
        },
        Figure {
            name: "isa_wave_instruction",
            ns: total / instructions.max(1) as f64,
            floor: None,
            floor_ns: None,
            target: "wave instructions per second = 1e9 / ns",
        },
    ];
    let floors = vec![
        Floor { name: "host_saxpy", ns: host_saxpy, what: "y = a * x + y on one host thread, ns per element" },
        Floor {
            name: "host_sgemm",
            ns: host_sgemm,
            what: "SGEMM with 16 x 16 tiles on one host thread, ns per multiply-add",
        },
    ];
    Ok((figures, floors))
}

/// ns per element of `axpy_u32` over `n` elements on an emulated gfx90a with `workers`
/// compute-unit workers: the median of `samples` launches, each checked.
fn axpy_on_workers(workers: u32, n: u32, samples: usize) -> Result<f64, String> {
    let e = |what: &'static str| move |err: aqueduct::Error| format!("isa_axpy ({workers} workers): {what}: {err}");
    let opts = OpenOptions { emu_cus: Some(workers), ..OpenOptions::new(BackendKind::Emu) };
    let dev = Device::open(&opts).map_err(|err| format!("isa_axpy: {err}"))?;
    let elf = demo_code_object(90010).ok_or("isa_axpy: no gfx90a demo code object")?;
    let module = dev.load_module(elf).map_err(e("load code object"))?;
    let axpy: DeviceKernel<AxpyArgs> = module.kernel("axpy_u32").map_err(e("kernel"))?;
    let s = dev.stream().map_err(e("stream"))?;
    let len = n as usize;
    let xs: Vec<u32> = (0..n).map(|i| i % 977).collect();
    let x = dev.alloc::<u32>(len).map_err(e("alloc"))?;
    let y = dev.alloc::<u32>(len).map_err(e("alloc"))?;
    let hx = dev.host_from(&xs).map_err(e("host alloc"))?;
    x.copy_from(&s, &hx).map_err(e("copy"))?;
    y.fill(&s, 1).map_err(e("fill"))?;
    s.synchronize().map_err(e("synchronize"))?;
    let args = AxpyArgs { x: x.address(), y: y.address(), a: 3, n };
    let mut ns = Vec::with_capacity(samples);
    // One launch to warm the workers and the decoded code, then the timed ones.
    for round in 0..=samples {
        let t = Instant::now();
        s.launch(&axpy, Dim3::x(n), Dim3::x(256), &args).map_err(e("launch"))?;
        s.synchronize().map_err(e("synchronize"))?;
        if round > 0 {
            ns.push(t.elapsed().as_secs_f64() * 1e9 / f64::from(n));
        }
    }
    let out = dev.alloc_host::<u32>(len).map_err(e("host alloc"))?;
    out.copy_from(&s, &y).map_err(e("copy"))?;
    s.synchronize().map_err(e("synchronize"))?;
    let launches = samples as u32 + 1;
    if let Some((i, v)) = out.to_vec().iter().enumerate().find(|&(i, &v)| v != 1 + launches * 3 * xs[i]) {
        return Err(format!("isa_axpy ({workers} workers): y[{i}] = {v}, want {}", 1 + launches * 3 * xs[i]));
    }
    Ok(median(ns))
}

/// `isa_axpy_2_workers` beside `isa_axpy_1_worker`.
pub(super) fn scaling_figures(samples: usize, short: bool) -> Result<(Figure, Floor), String> {
    let samples = samples.clamp(1, 5);
    let n = if short { 1 << 18 } else { 1 << 22 };
    let one = axpy_on_workers(1, n, samples)?;
    let two = axpy_on_workers(2, n, samples)?;
    Ok((
        Figure {
            name: "isa_axpy_2_workers",
            ns: two,
            floor: Some("isa_axpy_1_worker"),
            floor_ns: Some(one),
            target: "<= 0.59x one worker (scaling >= 1.7x)",
        },
        Floor {
            name: "isa_axpy_1_worker",
            ns: one,
            what: "axpy_u32 machine code on an emulated gfx90a with one CU worker, ns per element",
        },
    ))
}
