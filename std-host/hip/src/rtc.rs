//! `hiprtc`: run-time compilation of HIP device code with the installed `clang-15` (Debian's
//! `clang-15` and `lld-15`), for the current device's ISA; the code object loads with
//! `hipModuleLoadData` (docs/hip-semantics.md §10).
//!
//! A program is its source, its headers (written beside it, under their include names) and its
//! name expressions. `hiprtcCompileProgram` compiles the device half only
//! (`--cuda-device-only --no-gpu-bundle-output`, `-nogpulib -nogpuinc`: Debian has no HIP device
//! library for clang-15) with the device's target id as `--offload-arch` unless the options name
//! one (`--gpu-architecture=` or `--offload-arch=`), and `-O3` before the caller's options. The
//! source sees `hip/hip_runtime.h` as a small header of this library: the function and variable
//! attributes, `threadIdx`/`blockIdx`/`blockDim`/`gridDim` from the work-item builtins and the
//! dispatch packet, `__syncthreads`, as hiprtc pre-includes its runtime header. Each name
//! expression is referenced from a host variable, which instantiates the template it names, and
//! its lowered name is the kernel symbol that demangles to it (`llvm-cxxfilt-15`, Debian's
//! `llvm-15`). A missing compiler or demangler is a compilation failure whose log names the
//! package.
//!
//! Results are `hiprtcResult` values, not `hipError_t`: these functions leave the thread's last
//! HIP error alone.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, CStr, CString};
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use crate::global::{global, lock};

/// `hiprtcResult`.
type Rtc = c_int;
const SUCCESS: Rtc = 0;
const OUT_OF_MEMORY: Rtc = 1;
const INVALID_INPUT: Rtc = 3;
const INVALID_PROGRAM: Rtc = 4;
const INVALID_OPTION: Rtc = 5;
const COMPILATION: Rtc = 6;
const NO_NAME_EXPRESSIONS_AFTER_COMPILATION: Rtc = 8;
const NO_LOWERED_NAMES_BEFORE_COMPILATION: Rtc = 9;
const NAME_EXPRESSION_NOT_VALID: Rtc = 10;
const INTERNAL_ERROR: Rtc = 11;

/// The names `hiprtcGetErrorString` gives, by value.
const NAMES: [&CStr; 12] = [
    c"HIPRTC_SUCCESS",
    c"HIPRTC_ERROR_OUT_OF_MEMORY",
    c"HIPRTC_ERROR_PROGRAM_CREATION_FAILURE",
    c"HIPRTC_ERROR_INVALID_INPUT",
    c"HIPRTC_ERROR_INVALID_PROGRAM",
    c"HIPRTC_ERROR_INVALID_OPTION",
    c"HIPRTC_ERROR_COMPILATION",
    c"HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE",
    c"HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
    c"HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
    c"HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
    c"HIPRTC_ERROR_INTERNAL_ERROR",
];

/// The `hip/hip_runtime.h` a program sees.
const RUNTIME_HEADER: &str = r#"/* hip/hip_runtime.h of aqueduct's hiprtc: what device code needs without HIP's device library. */
#ifndef AQUEDUCT_HIPRTC_RUNTIME_H
#define AQUEDUCT_HIPRTC_RUNTIME_H
#define __HIPCC_RTC__ 1
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(n, ...) __attribute__((amdgpu_flat_work_group_size(1, n)))
struct __hiprtc_dim3 { unsigned x, y, z; };
static __device__ inline const unsigned short *__hiprtc_dispatch16(void) {
    return (const unsigned short *)__builtin_amdgcn_dispatch_ptr();
}
static __device__ inline const unsigned *__hiprtc_dispatch32(void) {
    return (const unsigned *)__builtin_amdgcn_dispatch_ptr();
}
#define threadIdx (__hiprtc_dim3{__builtin_amdgcn_workitem_id_x(), __builtin_amdgcn_workitem_id_y(), __builtin_amdgcn_workitem_id_z()})
#define blockIdx (__hiprtc_dim3{__builtin_amdgcn_workgroup_id_x(), __builtin_amdgcn_workgroup_id_y(), __builtin_amdgcn_workgroup_id_z()})
#define blockDim (__hiprtc_dim3{__hiprtc_dispatch16()[2], __hiprtc_dispatch16()[3], __hiprtc_dispatch16()[4]})
#define gridDim (__hiprtc_dim3{__hiprtc_dispatch32()[3] / __hiprtc_dispatch16()[2], __hiprtc_dispatch32()[4] / __hiprtc_dispatch16()[3], __hiprtc_dispatch32()[5] / __hiprtc_dispatch16()[4]})
#define __syncthreads() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
#endif
"#;

/// A program (`hiprtcProgram` points at one).
#[derive(Default)]
pub struct Program {
    source: String,
    name: String,
    headers: Vec<(String, String)>,
    expressions: Vec<String>,
    compiled: bool,
    log: CString,
    code: Vec<u8>,
    lowered: HashMap<String, CString>,
}

/// Live programs, by handle.
static PROGRAMS: LazyLock<Mutex<HashSet<usize>>> = LazyLock::new(Default::default);

/// Runs one hiprtc call: a panic is `HIPRTC_ERROR_INTERNAL_ERROR`.
fn rtc(f: impl FnOnce() -> Result<(), Rtc>) -> Rtc {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => INTERNAL_ERROR,
    }
}

/// The program behind a handle this library created.
///
/// # Safety
/// The caller does not let the reference outlive the handle's destruction.
unsafe fn program<'a>(p: *mut Program) -> Result<&'a mut Program, Rtc> {
    if p.is_null() || !lock(&PROGRAMS).contains(&(p as usize)) {
        return Err(INVALID_PROGRAM);
    }
    // SAFETY: a live handle from `Box::into_raw` in `hiprtcCreateProgram`; hiprtc programs are
    // not used from two threads at once (as in HIP).
    Ok(unsafe { &mut *p })
}

/// A C string argument; NULL is `HIPRTC_ERROR_INVALID_INPUT`.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn text(s: *const c_char) -> Result<String, Rtc> {
    if s.is_null() {
        return Err(INVALID_INPUT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
}

/// `hiprtcGetErrorString`.
#[no_mangle]
pub extern "C" fn hiprtcGetErrorString(result: c_int) -> *const c_char {
    usize::try_from(result)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or(c"Invalid HIPRTC error code".as_ptr(), |s| s.as_ptr())
}

/// `hiprtcVersion`: 5.2, the HIP this library serves.
///
/// # Safety
/// `major` and `minor` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hiprtcVersion(major: *mut c_int, minor: *mut c_int) -> Rtc {
    rtc(|| {
        if major.is_null() || minor.is_null() {
            return Err(INVALID_INPUT);
        }
        // SAFETY: the caller's contract; both non-null.
        unsafe {
            major.write(5);
            minor.write(2);
        }
        Ok(())
    })
}

/// `hiprtcCreateProgram`: the source, its name (`default_program` when NULL) and
/// `count` headers under their include names.
///
/// # Safety
/// `prog` is NULL or valid for writes; the strings are NULL or NUL-terminated; `headers` and
/// `include_names` are NULL or hold `count` strings.
#[no_mangle]
pub unsafe extern "C" fn hiprtcCreateProgram(
    prog: *mut *mut Program,
    src: *const c_char,
    name: *const c_char,
    count: c_int,
    headers: *const *const c_char,
    include_names: *const *const c_char,
) -> Rtc {
    rtc(|| {
        if prog.is_null() {
            return Err(INVALID_PROGRAM);
        }
        if count < 0 || (count > 0 && (headers.is_null() || include_names.is_null())) {
            return Err(INVALID_INPUT);
        }
        // SAFETY: the caller's contract.
        let source = unsafe { text(src) }?;
        let name = if name.is_null() {
            "default_program".to_owned()
        } else {
            // SAFETY: the caller's contract.
            unsafe { text(name) }?
        };
        let mut list = Vec::new();
        for i in 0..count as usize {
            // SAFETY: the caller's contract: `count` entries each.
            let (h, n) = unsafe { (*headers.add(i), *include_names.add(i)) };
            // SAFETY: the caller's contract.
            list.push(unsafe { (text(n)?, text(h)?) });
        }
        let p = Box::into_raw(Box::new(Program { source, name, headers: list, ..Program::default() }));
        lock(&PROGRAMS).insert(p as usize);
        // SAFETY: the caller's contract; non-null.
        unsafe { prog.write(p) };
        Ok(())
    })
}

/// `hiprtcDestroyProgram`: the program and everything it handed out (log, code, lowered names).
///
/// # Safety
/// `prog` is NULL or valid for reads and writes.
#[no_mangle]
pub unsafe extern "C" fn hiprtcDestroyProgram(prog: *mut *mut Program) -> Rtc {
    rtc(|| {
        if prog.is_null() {
            return Err(INVALID_PROGRAM);
        }
        // SAFETY: the caller's contract; non-null.
        let p = unsafe { prog.read() };
        if !lock(&PROGRAMS).remove(&(p as usize)) {
            return Err(INVALID_PROGRAM);
        }
        // SAFETY: created by `Box::into_raw` and just removed from the live set: freed once.
        drop(unsafe { Box::from_raw(p) });
        // SAFETY: as above.
        unsafe { prog.write(std::ptr::null_mut()) };
        Ok(())
    })
}

/// `hiprtcAddNameExpression`: before compilation only.
///
/// # Safety
/// `expression` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hiprtcAddNameExpression(prog: *mut Program, expression: *const c_char) -> Rtc {
    rtc(|| {
        // SAFETY: the handle is checked; the reference ends with the call.
        let p = unsafe { program(prog) }?;
        // SAFETY: the caller's contract.
        let e = unsafe { text(expression) }?;
        if p.compiled {
            return Err(NO_NAME_EXPRESSIONS_AFTER_COMPILATION);
        }
        if e.trim().is_empty() {
            return Err(INVALID_INPUT);
        }
        p.expressions.push(e);
        Ok(())
    })
}

/// This call's scratch folder for a compilation.
fn scratch() -> std::io::Result<PathBuf> {
    static N: AtomicU64 = AtomicU64::new(0);
    // Ordering: Relaxed; only uniqueness matters.
    let n = N.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("aqueduct-hiprtc-{}-{n}", std::process::id()));
    std::fs::create_dir_all(d.join("include/hip"))?;
    Ok(d)
}

/// Removes a folder when dropped.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An expression as the demangler prints a name: no spaces, no leading `&` or `::`.
fn normalized(e: &str) -> String {
    let s: String = e.chars().filter(|c| !c.is_whitespace()).collect();
    let s = s.trim_start_matches('&');
    s.trim_start_matches("::").to_owned()
}

/// The function name a demangled symbol names: without its parameter list and, for a template,
/// its return type (`void scale<float>(float*, float)` → `scale<float>`).
fn function_name(demangled: &str) -> String {
    let mut depth = 0i32;
    let mut end = demangled.len();
    for (i, c) in demangled.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let head = &demangled[..end];
    // The return type ends at the last space outside angle brackets.
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in head.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ' ' if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    normalized(&head[start..])
}

/// Demangles `names` with `llvm-cxxfilt-15`.
fn demangle(names: &[String]) -> Result<Vec<String>, String> {
    let tool = "llvm-cxxfilt-15";
    let mut child = Command::new(tool)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{tool} could not be run ({e}): install Debian's package llvm-15"))?;
    let input = names.join("\n") + "\n";
    child.stdin.take().ok_or("no stdin")?.write_all(input.as_bytes()).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect())
}

/// Compiles `p` with `options`; returns the compiler's messages or the reason it could not run.
fn compile(p: &mut Program, options: &[String], target: String) -> Result<String, (Rtc, String)> {
    let dir = scratch().map_err(|e| (INTERNAL_ERROR, format!("scratch folder: {e}")))?;
    let _cleanup = Cleanup(dir.clone());
    let io = |e: std::io::Error| (INTERNAL_ERROR, format!("scratch folder: {e}"));
    std::fs::write(dir.join("include/hip/hip_runtime.h"), RUNTIME_HEADER).map_err(io)?;
    for (name, text) in &p.headers {
        let rel = Path::new(name);
        if rel.is_absolute() || rel.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
            return Err((INVALID_INPUT, format!("header name {name:?} leaves the include folder")));
        }
        let path = dir.join("include").join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(path, text).map_err(io)?;
    }
    let mut source = p.source.clone();
    for (i, e) in p.expressions.iter().enumerate() {
        source.push_str(&format!(
            "\n__attribute__((used)) static const void *__hiprtc_name_expression_{i} = (const void *)&{e};\n"
        ));
    }
    let src = dir.join("program.hip");
    std::fs::write(&src, source).map_err(io)?;
    let out = dir.join("program.co");
    let mut args: Vec<String> = ["-x", "hip", "-nogpulib", "-nogpuinc", "--cuda-device-only", "--no-gpu-bundle-output"]
        .map(str::to_owned)
        .to_vec();
    args.push("-O3".into());
    let mut arch = None;
    let mut rest = Vec::new();
    for o in options {
        if let Some(a) = o.strip_prefix("--gpu-architecture=").or_else(|| o.strip_prefix("--offload-arch=")) {
            arch = Some(a.to_owned());
        } else if !o.starts_with('-') {
            return Err((INVALID_OPTION, format!("option {o:?} is not an option")));
        } else {
            rest.push(o.clone());
        }
    }
    args.push(format!("--offload-arch={}", arch.unwrap_or(target)));
    args.push(format!("-I{}", dir.join("include").display()));
    args.extend(["-include".to_owned(), "hip/hip_runtime.h".to_owned()]);
    args.extend(rest);
    args.extend(["-c".to_owned(), src.display().to_string(), "-o".to_owned(), out.display().to_string()]);
    let run = Command::new("clang-15").args(&args).output().map_err(|e| {
        (COMPILATION, format!("clang-15 could not be run ({e}): install Debian's packages clang-15 and lld-15\n"))
    })?;
    let messages = String::from_utf8_lossy(&run.stderr).replace("program.hip", &p.name);
    if !run.status.success() {
        return Err((COMPILATION, messages));
    }
    p.code = std::fs::read(&out).map_err(io)?;
    Ok(messages)
}

/// Finds the lowered name of each name expression among the code object's kernels.
fn lower(p: &mut Program) -> Result<(), String> {
    if p.expressions.is_empty() {
        return Ok(());
    }
    let co = amdhsa::CodeObject::parse(&p.code).map_err(|e| format!("code object: {e:?}"))?;
    let kernels: Vec<String> = co
        .kernels()
        .map_err(|e| format!("code object: {e:?}"))?
        .filter_map(Result::ok)
        .map(|k| k.name.to_owned())
        .collect();
    let demangled = demangle(&kernels)?;
    for e in &p.expressions {
        let want = normalized(e);
        let found = kernels.iter().zip(&demangled).find(|(_, d)| function_name(d) == want || normalized(d) == want);
        if let Some((mangled, _)) = found {
            if let Ok(c) = CString::new(mangled.as_str()) {
                p.lowered.insert(e.clone(), c);
            }
        }
    }
    Ok(())
}

/// `hiprtcCompileProgram`: compiles the program for the current device (see the module
/// documentation); a failed compilation is `HIPRTC_ERROR_COMPILATION` with the compiler's
/// messages in the log.
///
/// # Safety
/// `options` is NULL or holds `count` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn hiprtcCompileProgram(prog: *mut Program, count: c_int, options: *const *const c_char) -> Rtc {
    rtc(|| {
        // SAFETY: the handle is checked; the reference ends with the call.
        let p = unsafe { program(prog) }?;
        if count < 0 || (count > 0 && options.is_null()) {
            return Err(INVALID_INPUT);
        }
        let mut opts = Vec::new();
        for i in 0..count as usize {
            // SAFETY: the caller's contract: `count` strings.
            opts.push(unsafe { text(*options.add(i)) }?);
        }
        let target = global()
            .ok()
            .and_then(|g| g.rt.device().ok().and_then(|d| crate::module::device_target(g, d).ok()))
            // `--offload-arch` takes the processor and features, without the triple.
            .map_or_else(
                || "gfx90a".to_owned(),
                |t| t.to_string().trim_start_matches("amdgcn-amd-amdhsa--").to_owned(),
            );
        let (result, log) = match compile(p, &opts, target) {
            Ok(messages) => match lower(p) {
                Ok(()) => (SUCCESS, messages),
                Err(why) => (SUCCESS, format!("{messages}lowered names: {why}\n")),
            },
            Err((code, messages)) => (code, messages),
        };
        p.compiled = result == SUCCESS;
        p.log = CString::new(log.replace('\0', "")).map_err(|_| OUT_OF_MEMORY)?;
        if result == SUCCESS {
            Ok(())
        } else {
            Err(result)
        }
    })
}

/// `hiprtcGetLoweredName`: the kernel symbol a name expression became; valid until the
/// program is destroyed.
///
/// # Safety
/// `expression` is NULL or a NUL-terminated string; `lowered` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hiprtcGetLoweredName(
    prog: *mut Program,
    expression: *const c_char,
    lowered: *mut *const c_char,
) -> Rtc {
    rtc(|| {
        // SAFETY: the handle is checked; the reference ends with the call.
        let p = unsafe { program(prog) }?;
        // SAFETY: the caller's contract.
        let e = unsafe { text(expression) }?;
        if lowered.is_null() {
            return Err(INVALID_INPUT);
        }
        if !p.compiled {
            return Err(NO_LOWERED_NAMES_BEFORE_COMPILATION);
        }
        let name = p.lowered.get(&e).ok_or(NAME_EXPRESSION_NOT_VALID)?;
        // SAFETY: the caller's contract; non-null.
        unsafe { lowered.write(name.as_ptr()) };
        Ok(())
    })
}

/// `hiprtcGetProgramLogSize`: the log's bytes with its terminating NUL.
///
/// # Safety
/// `size` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hiprtcGetProgramLogSize(prog: *mut Program, size: *mut usize) -> Rtc {
    rtc(|| {
        // SAFETY: the handle is checked; the reference ends with the call.
        let p = unsafe { program(prog) }?;
        if size.is_null() {
            return Err(INVALID_INPUT);
        }
        // SAFETY: the caller's contract; non-null.
        unsafe { size.write(p.log.as_bytes_with_nul().len()) };
        Ok(())
    })
}

/// `hiprtcGetProgramLog`: the log, NUL-terminated.
///
/// # Safety
/// `log` is NULL or valid for writing the size `hiprtcGetProgramLogSize` answers.
#[no_mangle]
pub unsafe extern "C" fn hiprtcGetProgramLog(prog: *mut Program, log: *mut c_char) -> Rtc {
    rtc(|| {
        // SAFETY: the handle is checked; the reference ends with the call.
        let p = unsafe { program(prog) }?;
        if log.is_null() {
            return Err(INVALID_INPUT);
        }
        let bytes = p.log.as_bytes_with_nul();
        // SAFETY: the caller's contract: room for the whole log.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), log, bytes.len()) };
        Ok(())
    })
}

/// `hiprtcGetCodeSize`: the code object's bytes (0 before a successful compilation).
///
/// # Safety
/// `size` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hiprtcGetCodeSize(prog: *mut Program, size: *mut usize) -> Rtc {
    rtc(|| {
        // SAFETY: the handle is checked; the reference ends with the call.
        let p = unsafe { program(prog) }?;
        if size.is_null() {
            return Err(INVALID_INPUT);
        }
        // SAFETY: the caller's contract; non-null.
        unsafe { size.write(p.code.len()) };
        Ok(())
    })
}

/// `hiprtcGetCode`: the code object, an AMDHSA ELF `hipModuleLoadData` takes.
///
/// # Safety
/// `code` is NULL or valid for writing the size `hiprtcGetCodeSize` answers.
#[no_mangle]
pub unsafe extern "C" fn hiprtcGetCode(prog: *mut Program, code: *mut c_char) -> Rtc {
    rtc(|| {
        // SAFETY: the handle is checked; the reference ends with the call.
        let p = unsafe { program(prog) }?;
        if code.is_null() {
            return Err(INVALID_INPUT);
        }
        // SAFETY: the caller's contract: room for the whole code object.
        unsafe { std::ptr::copy_nonoverlapping(p.code.as_ptr().cast::<c_char>(), code, p.code.len()) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangled_names_compare_as_expressions() {
        assert_eq!(function_name("void scale<float>(float*, float)"), "scale<float>");
        assert_eq!(function_name("ns::add(int*, int)"), "ns::add");
        assert_eq!(function_name("fill_u32"), "fill_u32");
        assert_eq!(function_name("void f<int, pair<int, int> >(int)"), "f<int,pair<int,int>>");
        assert_eq!(normalized(" &::scale< float >"), "scale<float>");
    }
}
