//! [`Errno`]: a Linux error number as the failing system call reports it, shared by the
//! kfd-direct backend (which receives it) and the emulator (which returns it).

use core::fmt;

/// A Linux error number.
///
/// A newtype with constants, never an enum: the kernel may return any value, and an unknown one
/// must survive unchanged. `Debug` and `Display` print the symbolic name and the number
/// (`EINVAL(22)`), or `Errno(N)` for a number without a name here.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// Operation not permitted.
    pub const EPERM: Errno = Errno(1);
    /// No such file or directory.
    pub const ENOENT: Errno = Errno(2);
    /// No such process (KFD: process not bound to the device).
    pub const ESRCH: Errno = Errno(3);
    /// I/O error.
    pub const EIO: Errno = Errno(5);
    /// No such device or address.
    pub const ENXIO: Errno = Errno(6);
    /// Bad file descriptor (also: the kfd fd used from another process).
    pub const EBADF: Errno = Errno(9);
    /// Resource temporarily unavailable.
    pub const EAGAIN: Errno = Errno(11);
    /// Out of memory.
    pub const ENOMEM: Errno = Errno(12);
    /// Permission denied.
    pub const EACCES: Errno = Errno(13);
    /// Bad address (a user pointer the kernel could not copy).
    pub const EFAULT: Errno = Errno(14);
    /// Device or resource busy.
    pub const EBUSY: Errno = Errno(16);
    /// File exists.
    pub const EEXIST: Errno = Errno(17);
    /// No such device.
    pub const ENODEV: Errno = Errno(19);
    /// Not a directory.
    pub const ENOTDIR: Errno = Errno(20);
    /// Is a directory.
    pub const EISDIR: Errno = Errno(21);
    /// Invalid argument.
    pub const EINVAL: Errno = Errno(22);
    /// Too many open files.
    pub const EMFILE: Errno = Errno(24);
    /// Inappropriate ioctl for device.
    pub const ENOTTY: Errno = Errno(25);
    /// No space left (KFD: no free event slot).
    pub const ENOSPC: Errno = Errno(28);
    /// Timer expired.
    pub const ETIME: Errno = Errno(62);
    /// Operation not supported.
    pub const EOPNOTSUPP: Errno = Errno(95);
    /// Address already in use.
    pub const EADDRINUSE: Errno = Errno(98);
    /// Kernel-internal "operation not supported" (`ENOTSUPP`, 524), which amdkfd returns for an
    /// unknown queue type.
    pub const ENOTSUPP: Errno = Errno(524);

    /// The raw number.
    pub const fn raw(self) -> i32 {
        self.0
    }

    /// The symbolic name, for the numbers this type has a constant for.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self {
            Errno::EPERM => "EPERM",
            Errno::ENOENT => "ENOENT",
            Errno::ESRCH => "ESRCH",
            Errno::EIO => "EIO",
            Errno::ENXIO => "ENXIO",
            Errno::EBADF => "EBADF",
            Errno::EAGAIN => "EAGAIN",
            Errno::ENOMEM => "ENOMEM",
            Errno::EACCES => "EACCES",
            Errno::EFAULT => "EFAULT",
            Errno::EBUSY => "EBUSY",
            Errno::EEXIST => "EEXIST",
            Errno::ENODEV => "ENODEV",
            Errno::ENOTDIR => "ENOTDIR",
            Errno::EISDIR => "EISDIR",
            Errno::EINVAL => "EINVAL",
            Errno::EMFILE => "EMFILE",
            Errno::ENOTTY => "ENOTTY",
            Errno::ENOSPC => "ENOSPC",
            Errno::ETIME => "ETIME",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
            Errno::EADDRINUSE => "EADDRINUSE",
            Errno::ENOTSUPP => "ENOTSUPP",
            _ => return None,
        })
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({})", self.0),
            None => write!(f, "Errno({})", self.0),
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl core::error::Error for Errno {}

#[cfg(feature = "defmt")]
impl defmt::Format for Errno {
    fn format(&self, f: defmt::Formatter<'_>) {
        match self.name() {
            Some(n) => defmt::write!(f, "{=str}({=i32})", n, self.0),
            None => defmt::write!(f, "Errno({=i32})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Errno;

    extern crate std;
    use std::format;

    #[test]
    fn debug_names_known_numbers_and_keeps_unknown_ones() {
        assert_eq!(format!("{:?}", Errno::EINVAL), "EINVAL(22)");
        assert_eq!(format!("{}", Errno::ENOTSUPP), "ENOTSUPP(524)");
        assert_eq!(format!("{:?}", Errno(4095)), "Errno(4095)");
    }
}
