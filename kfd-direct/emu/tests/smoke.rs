//! End-to-end: a built-in write-value dispatch through the whole emulated stack.

mod common;

use aqueduct::backend::WriteValueArgs;
use aqueduct::BuiltinKernel;
use common::*;

#[test]
fn write_value_dispatch_completes_and_retires() {
    let h = Harness::new();
    let q = h.create_queue();
    let sigs = h.signals();
    let data = h.alloc(4096, GTT);
    let karg = h.alloc(4096, GTT);
    let args = WriteValueArgs { dst: data.va + 8, value: 0xdead_beef_cafe, width: 8, reserved: 0 };
    // SAFETY: the kernarg page is CPU-mapped.
    unsafe { *karg.ptr::<WriteValueArgs>() = args };
    let s = signal(&sigs, 0);
    s.reset(1);
    let obj = h.emu.builtin_kernel(BuiltinKernel::WriteValue);
    q.submit(&[dispatch(obj, karg.va, 1, 1, signal_handle(&sigs, 0), true)]);
    assert!(wait_signal(s, 0), "signal never completed");
    // SAFETY: the data page is CPU-mapped.
    assert_eq!(unsafe { *data.ptr::<u64>().add(1) }, 0xdead_beef_cafe);
    assert!(wait_until(std::time::Duration::from_secs(2), || q.read_index() == 1));
    h.destroy_queue(&q).unwrap();
}
