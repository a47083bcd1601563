//! The conformance scenarios (`aqueduct_tests::conformance`) over every backend available:
//! core's loopback, kfd-direct on the emulated GPU, and kfd-direct on the emulator's adversarial
//! command processor (barrier-less dispatches overlap and finish out of order).

use aqueduct_tests::conformance::{self as c, KfdEmuTarget, LoopbackTarget};

macro_rules! scenario {
    ($name:ident) => {
        mod $name {
            use super::*;

            #[test]
            fn loopback() {
                c::$name(&LoopbackTarget);
            }

            #[test]
            fn kfd_direct_on_the_emulator() {
                c::$name(&KfdEmuTarget::new());
            }

            #[test]
            fn kfd_direct_on_the_adversarial_emulator() {
                c::$name(&KfdEmuTarget::adversarial(0x5eed));
            }
        }
    };
}

scenario!(stream_fifo_order);
scenario!(copies_and_fills);
scenario!(events_order_streams);
scenario!(null_stream_implicit_sync);
scenario!(host_function_in_order);
scenario!(capture_and_graph_launch);
scenario!(detach_on_context_destroy);
scenario!(wait_value_then_host_write);
scenario!(fault_is_sticky_and_isolated);
scenario!(many_streams_priorities_and_masks);
