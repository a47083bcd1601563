//! Sizes, offsets and constants compared with the system's `hsa.h` / `hsa_ext_amd.h` /
//! `amd_hsa_queue.h` (Debian's `libhsa-runtime-dev`), compiled with the C compiler.

use std::path::Path;
use std::process::Command;

use hsa_sys::*;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stddef.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/amd_hsa_queue.h>
#define P(name, v) printf("%s %lld\n", name, (long long)(v))
int main(void) {
  P("sizeof_hsa_queue_t", sizeof(hsa_queue_t));
  P("off_base_address", offsetof(hsa_queue_t, base_address));
  P("off_doorbell_signal", offsetof(hsa_queue_t, doorbell_signal));
  P("off_size", offsetof(hsa_queue_t, size));
  P("off_id", offsetof(hsa_queue_t, id));
  P("sizeof_amd_queue_t", sizeof(amd_queue_t));
  P("off_write_dispatch_id", offsetof(amd_queue_t, write_dispatch_id));
  P("off_read_dispatch_id", offsetof(amd_queue_t, read_dispatch_id));
  P("sizeof_fault_info", sizeof(hsa_amd_gpu_memory_fault_info_t));
  P("sizeof_event", sizeof(hsa_amd_event_t));
  P("off_event_memory_fault", offsetof(hsa_amd_event_t, memory_fault));
  P("sizeof_status", sizeof(hsa_status_t));
  P("ERROR_OUT_OF_RESOURCES", HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  P("ERROR_EXCEPTION", HSA_STATUS_ERROR_EXCEPTION);
  P("ERROR_INCOMPATIBLE_ARGUMENTS", HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  P("ERROR_MEMORY_FAULT", HSA_STATUS_ERROR_MEMORY_FAULT);
  P("ERROR_ILLEGAL_INSTRUCTION", HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION);
  P("AGENT_INFO_DEVICE", HSA_AGENT_INFO_DEVICE);
  P("AMD_AGENT_INFO_COMPUTE_UNIT_COUNT", HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT);
  P("AMD_AGENT_INFO_PRODUCT_NAME", HSA_AMD_AGENT_INFO_PRODUCT_NAME);
  P("SYSTEM_INFO_TIMESTAMP_FREQUENCY", HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY);
  P("SYMBOL_INFO_KERNEL_OBJECT", HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT);
  P("SYMBOL_INFO_KERNARG_SEGMENT_SIZE", HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE);
  P("POOL_INFO_RUNTIME_ALLOC_ALLOWED", HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED);
  P("GLOBAL_FLAG_COARSE_GRAINED", HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED);
  P("QUEUE_PRIORITY_HIGH", HSA_AMD_QUEUE_PRIORITY_HIGH);
  return 0;
}
"#;

#[test]
fn layouts_and_constants_match_the_system_headers() {
    // A missing header fails the test and names its package (scripts/test installs it).
    assert!(
        Path::new("/usr/include/hsa/hsa.h").exists(),
        "Debian package `libhsa-runtime-dev` is missing (/usr/include/hsa/hsa.h not found): \
         apt-get install -y libhsa-runtime-dev"
    );
    let dir = std::env::temp_dir().join(format!("hsa-sys-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, PROGRAM).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-D__HIP_PLATFORM_AMD__", "-DAMD_INTERNAL_BUILD", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("C compiler `{cc}` ({e}): apt-get install -y gcc"));
    assert!(st.success(), "compiling the layout probe failed");
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let get = |k: &str| -> i64 {
        text.lines()
            .find_map(|l| l.strip_prefix(k).and_then(|r| r.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("{k} missing in\n{text}"))
            .parse()
            .unwrap()
    };
    let want: &[(&str, i64)] = &[
        ("sizeof_hsa_queue_t", std::mem::size_of::<hsa_queue_t>() as i64),
        ("off_base_address", std::mem::offset_of!(hsa_queue_t, base_address) as i64),
        ("off_doorbell_signal", std::mem::offset_of!(hsa_queue_t, doorbell_signal) as i64),
        ("off_size", std::mem::offset_of!(hsa_queue_t, size) as i64),
        ("off_id", std::mem::offset_of!(hsa_queue_t, id) as i64),
        ("sizeof_amd_queue_t", amd_queue::SIZE as i64),
        ("off_write_dispatch_id", amd_queue::WRITE_DISPATCH_ID as i64),
        ("off_read_dispatch_id", amd_queue::READ_DISPATCH_ID as i64),
        ("sizeof_fault_info", std::mem::size_of::<hsa_amd_gpu_memory_fault_info_t>() as i64),
        ("sizeof_event", std::mem::size_of::<hsa_amd_event_t>() as i64),
        ("off_event_memory_fault", std::mem::offset_of!(hsa_amd_event_t, memory_fault) as i64),
        ("sizeof_status", std::mem::size_of::<Status>() as i64),
        ("ERROR_OUT_OF_RESOURCES", i64::from(Status::ERROR_OUT_OF_RESOURCES.0)),
        ("ERROR_EXCEPTION", i64::from(Status::ERROR_EXCEPTION.0)),
        ("ERROR_INCOMPATIBLE_ARGUMENTS", i64::from(Status::ERROR_INCOMPATIBLE_ARGUMENTS.0)),
        ("ERROR_MEMORY_FAULT", i64::from(Status::ERROR_MEMORY_FAULT.0)),
        ("ERROR_ILLEGAL_INSTRUCTION", i64::from(Status::ERROR_ILLEGAL_INSTRUCTION.0)),
        ("AGENT_INFO_DEVICE", i64::from(consts::AGENT_INFO_DEVICE)),
        ("AMD_AGENT_INFO_COMPUTE_UNIT_COUNT", i64::from(consts::AMD_AGENT_INFO_COMPUTE_UNIT_COUNT)),
        ("AMD_AGENT_INFO_PRODUCT_NAME", i64::from(consts::AMD_AGENT_INFO_PRODUCT_NAME)),
        ("SYSTEM_INFO_TIMESTAMP_FREQUENCY", i64::from(consts::SYSTEM_INFO_TIMESTAMP_FREQUENCY)),
        ("SYMBOL_INFO_KERNEL_OBJECT", i64::from(consts::SYMBOL_INFO_KERNEL_OBJECT)),
        ("SYMBOL_INFO_KERNARG_SEGMENT_SIZE", i64::from(consts::SYMBOL_INFO_KERNARG_SEGMENT_SIZE)),
        ("POOL_INFO_RUNTIME_ALLOC_ALLOWED", i64::from(consts::POOL_INFO_RUNTIME_ALLOC_ALLOWED)),
        ("GLOBAL_FLAG_COARSE_GRAINED", i64::from(consts::GLOBAL_FLAG_COARSE_GRAINED)),
        ("QUEUE_PRIORITY_HIGH", i64::from(consts::QUEUE_PRIORITY_HIGH)),
    ];
    for (k, v) in want {
        assert_eq!(get(k), *v, "{k}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_installed_runtime_loads_and_has_every_entry_point() {
    // Debian's libhsa-runtime64-1 is installed on this project's machines; without it the
    // load error must name the library.
    match Hsa::load(None) {
        Ok(h) => assert!(h.path().to_string_lossy().contains("libhsa-runtime64")),
        Err(e) => assert!(e.to_string().contains("libhsa-runtime64.so.1"), "{e}"),
    }
}
