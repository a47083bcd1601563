//! `hipError_t`: the codes, their names and descriptions, the calling thread's last error, and
//! [`api`], the boundary every exported function goes through (panics caught, last error set).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A `hipError_t` value other than `hipSuccess`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hip(pub(crate) i32);

/// What the API functions compute before [`api`] turns it into a `hipError_t`.
pub(crate) type HipResult<T = ()> = Result<T, Hip>;

impl From<aqueduct::Error> for Hip {
    fn from(e: aqueduct::Error) -> Self {
        // Core numbers its errors as HIP does.
        Hip(e.code())
    }
}

/// `hipSuccess`.
pub(crate) const SUCCESS: i32 = 0;
/// `hipErrorInvalidValue`.
pub(crate) const INVALID_VALUE: Hip = Hip(1);
/// `hipErrorOutOfMemory`.
pub(crate) const OUT_OF_MEMORY: Hip = Hip(2);
/// `hipErrorInvalidConfiguration`.
pub(crate) const INVALID_CONFIGURATION: Hip = Hip(9);
/// `hipErrorInvalidPitchValue`.
pub(crate) const INVALID_PITCH: Hip = Hip(12);
/// `hipErrorInvalidSymbol`.
pub(crate) const INVALID_SYMBOL: Hip = Hip(13);
/// `hipErrorInvalidDevicePointer`.
pub(crate) const INVALID_DEVICE_POINTER: Hip = Hip(17);
/// `hipErrorInvalidMemcpyDirection`.
pub(crate) const INVALID_MEMCPY_DIRECTION: Hip = Hip(21);
/// `hipErrorMissingConfiguration`.
pub(crate) const MISSING_CONFIGURATION: Hip = Hip(52);
/// `hipErrorInvalidDeviceFunction`.
pub(crate) const INVALID_DEVICE_FUNCTION: Hip = Hip(98);
/// `hipErrorNoDevice`.
pub(crate) const NO_DEVICE: Hip = Hip(100);
/// `hipErrorInvalidDevice`.
pub(crate) const INVALID_DEVICE: Hip = Hip(101);
/// `hipErrorInvalidImage`.
pub(crate) const INVALID_IMAGE: Hip = Hip(200);
/// `hipErrorInvalidContext`.
pub(crate) const INVALID_CONTEXT: Hip = Hip(201);
/// `hipErrorNoBinaryForGpu`.
pub(crate) const NO_BINARY_FOR_GPU: Hip = Hip(209);
/// `hipErrorContextAlreadyInUse`.
pub(crate) const CONTEXT_ALREADY_IN_USE: Hip = Hip(216);
/// `hipErrorInvalidKernelFile`.
pub(crate) const INVALID_KERNEL_FILE: Hip = Hip(218);
/// `hipErrorFileNotFound`.
pub(crate) const FILE_NOT_FOUND: Hip = Hip(301);
/// `hipErrorInvalidHandle` (`hipErrorInvalidResourceHandle`).
pub(crate) const INVALID_HANDLE: Hip = Hip(400);
/// `hipErrorIllegalState`.
pub(crate) const ILLEGAL_STATE: Hip = Hip(401);
/// `hipErrorNotFound`.
pub(crate) const NOT_FOUND: Hip = Hip(500);
/// `hipErrorNotReady`.
pub(crate) const NOT_READY: i32 = 600;
/// `hipErrorNotSupported`.
pub(crate) const NOT_SUPPORTED: Hip = Hip(801);
/// `hipErrorStreamCaptureInvalidated`.
pub(crate) const CAPTURE_INVALIDATED: Hip = Hip(901);
/// `hipErrorStreamCaptureUnjoined`.
pub(crate) const CAPTURE_UNJOINED: Hip = Hip(904);
/// `hipErrorUnknown`.
pub(crate) const UNKNOWN: Hip = Hip(999);

std::thread_local! {
    /// The calling thread's last error (`hip::tls.last_error_`).
    static LAST_ERROR: Cell<i32> = const { Cell::new(SUCCESS) };
}

/// The result of another exported function called from this layer, as a [`HipResult`].
pub(crate) fn status(code: i32) -> HipResult {
    if code == SUCCESS {
        Ok(())
    } else {
        Err(Hip(code))
    }
}

/// Records `code` as the calling thread's last error the way HIP's `HIP_RETURN` does: failures
/// other than `hipErrorNotReady` (a query answer) overwrite it; successes leave it alone.
fn record(code: i32) {
    if code != SUCCESS && code != NOT_READY {
        let _ = LAST_ERROR.try_with(|c| c.set(code));
    }
}

/// The calling thread's last error; `reset` clears it (`hipGetLastError`).
pub(crate) fn last_error(reset: bool) -> i32 {
    LAST_ERROR.try_with(|c| if reset { c.replace(SUCCESS) } else { c.get() }).unwrap_or(SUCCESS)
}

/// Runs one API call: a panic becomes `hipErrorUnknown` (nothing unwinds into C), and the result
/// updates the calling thread's last error.
pub(crate) fn api(f: impl FnOnce() -> HipResult) -> i32 {
    let code = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(Hip(code))) => code,
        Err(_) => UNKNOWN.0,
    };
    record(code);
    code
}

/// `hipGetErrorName` and `hipGetErrorString` of every code HIP names (newest HIP's tables, plus
/// the execution-context codes 914–916).
pub(crate) const CODES: &[(i32, &str, &str)] = &[
    (0, "hipSuccess", "no error"),
    (1, "hipErrorInvalidValue", "invalid argument"),
    (2, "hipErrorOutOfMemory", "out of memory"),
    (3, "hipErrorNotInitialized", "initialization error"),
    (4, "hipErrorDeinitialized", "driver shutting down"),
    (5, "hipErrorProfilerDisabled", "profiler disabled while using external profiling tool"),
    (6, "hipErrorProfilerNotInitialized", "profiler is not initialized"),
    (7, "hipErrorProfilerAlreadyStarted", "profiler already started"),
    (8, "hipErrorProfilerAlreadyStopped", "profiler already stopped"),
    (9, "hipErrorInvalidConfiguration", "invalid configuration argument"),
    (12, "hipErrorInvalidPitchValue", "invalid pitch argument"),
    (13, "hipErrorInvalidSymbol", "invalid device symbol"),
    (17, "hipErrorInvalidDevicePointer", "invalid device pointer"),
    (21, "hipErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"),
    (35, "hipErrorInsufficientDriver", "driver version is insufficient for runtime version"),
    (52, "hipErrorMissingConfiguration", "__global__ function call is not configured"),
    (53, "hipErrorPriorLaunchFailure", "unspecified launch failure in prior launch"),
    (98, "hipErrorInvalidDeviceFunction", "invalid device function"),
    (100, "hipErrorNoDevice", "no ROCm-capable device is detected"),
    (101, "hipErrorInvalidDevice", "invalid device ordinal"),
    (200, "hipErrorInvalidImage", "device kernel image is invalid"),
    (201, "hipErrorInvalidContext", "invalid device context"),
    (202, "hipErrorContextAlreadyCurrent", "context is already current context"),
    (205, "hipErrorMapFailed", "mapping of buffer object failed"),
    (206, "hipErrorUnmapFailed", "unmapping of buffer object failed"),
    (207, "hipErrorArrayIsMapped", "array is mapped"),
    (208, "hipErrorAlreadyMapped", "resource already mapped"),
    (209, "hipErrorNoBinaryForGpu", "no kernel image is available for execution on the device"),
    (210, "hipErrorAlreadyAcquired", "resource already acquired"),
    (211, "hipErrorNotMapped", "resource not mapped"),
    (212, "hipErrorNotMappedAsArray", "resource not mapped as array"),
    (213, "hipErrorNotMappedAsPointer", "resource not mapped as pointer"),
    (214, "hipErrorECCNotCorrectable", "uncorrectable ECC error encountered"),
    (215, "hipErrorUnsupportedLimit", "limit is not supported on this architecture"),
    (216, "hipErrorContextAlreadyInUse", "exclusive-thread device already in use by a different thread"),
    (217, "hipErrorPeerAccessUnsupported", "peer access is not supported between these two devices"),
    (218, "hipErrorInvalidKernelFile", "invalid kernel file"),
    (219, "hipErrorInvalidGraphicsContext", "invalid OpenGL or DirectX context"),
    (300, "hipErrorInvalidSource", "device kernel image is invalid"),
    (301, "hipErrorFileNotFound", "file not found"),
    (302, "hipErrorSharedObjectSymbolNotFound", "shared object symbol not found"),
    (303, "hipErrorSharedObjectInitFailed", "shared object initialization failed"),
    (304, "hipErrorOperatingSystem", "OS call failed or operation not supported on this OS"),
    (400, "hipErrorInvalidHandle", "invalid resource handle"),
    (401, "hipErrorIllegalState", "the operation cannot be performed in the present state"),
    (500, "hipErrorNotFound", "named symbol not found"),
    (600, "hipErrorNotReady", "device not ready"),
    (700, "hipErrorIllegalAddress", "an illegal memory access was encountered"),
    (701, "hipErrorLaunchOutOfResources", "too many resources requested for launch"),
    (702, "hipErrorLaunchTimeOut", "the launch timed out and was terminated"),
    (704, "hipErrorPeerAccessAlreadyEnabled", "peer access is already enabled"),
    (705, "hipErrorPeerAccessNotEnabled", "peer access has not been enabled"),
    (708, "hipErrorSetOnActiveProcess", "cannot set while device is active in this process"),
    (709, "hipErrorContextIsDestroyed", "context is destroyed"),
    (710, "hipErrorAssert", "device-side assert triggered"),
    (712, "hipErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"),
    (713, "hipErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"),
    (719, "hipErrorLaunchFailure", "unspecified launch failure"),
    (720, "hipErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch"),
    (801, "hipErrorNotSupported", "operation not supported"),
    (900, "hipErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"),
    (901, "hipErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"),
    (902, "hipErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"),
    (903, "hipErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"),
    (904, "hipErrorStreamCaptureUnjoined", "capturing stream has unjoined work"),
    (905, "hipErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"),
    (906, "hipErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"),
    (907, "hipErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"),
    (908, "hipErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"),
    (910, "hipErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"),
    (911, "hipErrorInvalidChannelDescriptor", "invalid resource description of texture passed to the api"),
    (912, "hipErrorInvalidTexture", "invalid texture object passed to the api"),
    (914, "hipErrorInvalidResourceType", "invalid resource type"),
    (915, "hipErrorInvalidResourceConfiguration", "invalid resource configuration"),
    (916, "hipErrorStreamDetached", "the stream is detached"),
    (999, "hipErrorUnknown", "unknown error"),
    (1052, "hipErrorRuntimeMemory", "runtime memory call returned error"),
    (1053, "hipErrorRuntimeOther", "runtime call other than memory returned error"),
    (1054, "hipErrorInvalidClusterSize", "a kernel launch error has occurred due to cluster misconfiguration"),
];

/// The name and description of `code`; `None` for codes HIP does not name.
#[cfg(test)]
pub(crate) fn describe(code: i32) -> Option<(&'static str, &'static str)> {
    CODES.iter().find(|(c, _, _)| *c == code).map(|&(_, n, d)| (n, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_are_named_as_core_names_them() {
        for e in aqueduct::Error::ALL {
            let (name, _) = describe(e.code()).expect("every core error has a name");
            assert_eq!(name, e.name(), "{e:?}");
        }
        assert_eq!(describe(909), None);
    }

    #[test]
    fn last_error_is_per_thread_and_sticky() {
        assert_eq!(api(|| Err(INVALID_VALUE)), 1);
        assert_eq!(api(|| Ok(())), 0);
        assert_eq!(api(|| Err(Hip(NOT_READY))), 600);
        assert_eq!(last_error(false), 1);
        std::thread::spawn(|| assert_eq!(last_error(true), 0)).join().unwrap();
        assert_eq!(last_error(true), 1);
        assert_eq!(last_error(true), 0);
        assert_eq!(api(|| panic!("boom")), 999);
    }
}
