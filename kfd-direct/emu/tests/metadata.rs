//! Kernel-argument layout from the AMDGPU metadata note (`amdhsa.kernels[].args`).

use std::path::Path;

use aqueduct_kfd_emu::codeobj::CodeObject;
use aqueduct_kfd_emu::metadata::{self, KernelArg};

fn fixture() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/kernels-gfx90a.co")).unwrap()
}

fn arg(offset: u32, size: u32, kind: &str, name: Option<&str>) -> KernelArg {
    KernelArg { offset, size, value_kind: kind.into(), name: name.map(Into::into) }
}

#[test]
fn fixture_metadata_lists_explicit_then_hidden_arguments() {
    let elf = fixture();
    let ks = metadata::kernels_from_elf(&elf).expect("metadata note");
    let fill = metadata::find(&ks, "fill_u32").expect("fill_u32");
    assert_eq!(fill.symbol, "fill_u32.kd");
    let explicit: Vec<_> = fill.args.iter().filter(|a| !a.is_hidden()).cloned().collect();
    assert_eq!(
        explicit,
        [
            // The fixtures are built without -cl-kernel-arg-info: no names.
            arg(0, 8, "global_buffer", None),
            arg(8, 4, "by_value", None),
            arg(12, 4, "by_value", None)
        ]
    );
    // Hidden arguments, if the compiler emitted any, follow the explicit ones.
    let first_hidden = fill.args.iter().position(KernelArg::is_hidden).unwrap_or(fill.args.len());
    assert!(fill.args[first_hidden..].iter().all(KernelArg::is_hidden));
    let last = fill.args.last().unwrap();
    assert!(fill.kernarg_segment_size >= last.offset + last.size);
    // The code-object parser attaches the same entry to each kernel.
    let co = CodeObject::parse(&elf).unwrap();
    assert_eq!(co.kernel("fill_u32").unwrap().meta.as_ref(), Some(fill));
    let va = metadata::find(&ks, "vector_add").unwrap();
    assert_eq!(va.args.iter().filter(|a| !a.is_hidden()).map(|a| a.offset).collect::<Vec<_>>(), [0, 8, 16, 24]);
}

#[test]
fn files_without_a_note_have_no_metadata() {
    assert_eq!(metadata::kernels_from_elf(b"not an elf"), None);
    let mut elf = fixture();
    // Renaming the note's owner hides it.
    let at = elf.windows(7).position(|w| w == b"AMDGPU\0").unwrap();
    elf[at] = b'X';
    assert_eq!(metadata::kernels_from_elf(&elf), None);
}
