//! Target ids (docs/code-objects.md §2): the processor and the `sramecc` / `xnack` settings a
//! code object was built for, read from `e_flags` or from a bundle entry id, and matched against
//! a device as clr matches them.
//!
//! A target id reads `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`: the triple, the processor, then
//! each stated feature with `+` (on) or `-` (off). A feature left out means *any*: the code runs
//! in either mode. A code object runs on a device when the processors agree and every feature the
//! code states equals the device's setting; among several that run, the one stating the most
//! features is the better match (an `xnack-` image before an `xnack`-any one on an `xnack-`
//! device).

use core::fmt;

/// The triple of every AMDHSA target id.
pub const TRIPLE: &str = "amdgcn-amd-amdhsa";

/// A feature's setting in a code object or on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Setting {
    /// The processor has no such feature.
    Unsupported,
    /// Built to run in either mode (the feature is left out of the id).
    Any,
    /// Built for, or running in, the mode without the feature.
    Off,
    /// Built for, or running in, the mode with the feature.
    On,
}

impl Setting {
    /// The `e_flags` encoding of code objects v4 and later (two bits: 0 unsupported, 1 any,
    /// 2 off, 3 on).
    const fn from_v4_bits(bits: u32) -> Setting {
        match bits & 3 {
            0 => Setting::Unsupported,
            1 => Setting::Any,
            2 => Setting::Off,
            _ => Setting::On,
        }
    }

    /// Whether code built with this setting runs on a device whose setting is `device`.
    const fn runs_on(self, device: Setting) -> bool {
        matches!(
            (self, device),
            (Setting::Unsupported | Setting::Any, _) | (Setting::Off, Setting::Off) | (Setting::On, Setting::On)
        )
    }

    const fn is_stated(self) -> bool {
        matches!(self, Setting::Off | Setting::On)
    }
}

/// One AMDGCN processor: its `EF_AMDGPU_MACH` value, name and which target features it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Processor {
    /// `e_flags & EF_AMDGPU_MACH` (bits 7:0).
    pub mach: u32,
    /// `gfx90a`, `gfx1100`, …
    pub name: &'static str,
    /// Whether the processor has the SRAM ECC mode.
    pub sramecc: bool,
    /// Whether the processor has the XNACK (page-fault retry) mode.
    pub xnack: bool,
}

const fn p(mach: u32, name: &'static str, sramecc: bool, xnack: bool) -> Processor {
    Processor { mach, name, sramecc, xnack }
}

/// The AMDGCN processors, by `EF_AMDGPU_MACH` (LLVM's AMDGPUUsage; the values clang-15 writes
/// are checked against it by this crate's tests).
pub const PROCESSORS: &[Processor] = &[
    p(0x020, "gfx600", false, false),
    p(0x021, "gfx601", false, false),
    p(0x03a, "gfx602", false, false),
    p(0x022, "gfx700", false, false),
    p(0x023, "gfx701", false, false),
    p(0x024, "gfx702", false, false),
    p(0x025, "gfx703", false, false),
    p(0x026, "gfx704", false, false),
    p(0x03b, "gfx705", false, false),
    p(0x028, "gfx801", false, true),
    p(0x029, "gfx802", false, false),
    p(0x02a, "gfx803", false, false),
    p(0x03c, "gfx805", false, false),
    p(0x02b, "gfx810", false, true),
    p(0x02c, "gfx900", false, true),
    p(0x02d, "gfx902", false, true),
    p(0x02e, "gfx904", false, true),
    p(0x02f, "gfx906", true, true),
    p(0x030, "gfx908", true, true),
    p(0x031, "gfx909", false, true),
    p(0x032, "gfx90c", false, true),
    p(0x03f, "gfx90a", true, true),
    p(0x040, "gfx940", true, true),
    p(0x04b, "gfx941", true, true),
    p(0x04c, "gfx942", true, true),
    p(0x033, "gfx1010", false, true),
    p(0x034, "gfx1011", false, true),
    p(0x035, "gfx1012", false, true),
    p(0x042, "gfx1013", false, true),
    p(0x036, "gfx1030", false, false),
    p(0x037, "gfx1031", false, false),
    p(0x038, "gfx1032", false, false),
    p(0x039, "gfx1033", false, false),
    p(0x03e, "gfx1034", false, false),
    p(0x03d, "gfx1035", false, false),
    p(0x045, "gfx1036", false, false),
    p(0x041, "gfx1100", false, false),
    p(0x046, "gfx1101", false, false),
    p(0x047, "gfx1102", false, false),
    p(0x044, "gfx1103", false, false),
];

impl Processor {
    /// The processor of an `EF_AMDGPU_MACH` value.
    pub fn from_mach(mach: u32) -> Option<Processor> {
        PROCESSORS.iter().copied().find(|p| p.mach == mach)
    }

    /// The processor named `name` (`gfx90a`).
    pub fn from_name(name: &str) -> Option<Processor> {
        PROCESSORS.iter().copied().find(|p| p.name == name)
    }

    /// The processor of a device's `gfx_target_version` (major·10000 + minor·100 + stepping:
    /// 90010 is gfx90a, 110000 gfx1100).
    pub fn from_gfx_target_version(v: u32) -> Option<Processor> {
        let (major, minor, stepping) = (v / 10000, v / 100 % 100, v % 100);
        PROCESSORS.iter().copied().find(|p| {
            let digits = p.name.as_bytes().get(3..).unwrap_or(&[]);
            let [head @ .., m, s] = digits else { return false };
            let stepping_ok = char::from(*s).to_digit(16) == Some(stepping);
            let minor_ok = char::from(*m).to_digit(10) == Some(minor);
            let major_ok = core::str::from_utf8(head).ok().and_then(|h| h.parse::<u32>().ok()) == Some(major);
            stepping_ok && minor_ok && major_ok
        })
    }

    /// The `gfx_target_version` of this processor.
    pub fn gfx_target_version(&self) -> u32 {
        let digits = self.name.as_bytes().get(3..).unwrap_or(&[]);
        let [head @ .., m, s] = digits else { return 0 };
        let major = core::str::from_utf8(head).ok().and_then(|h| h.parse::<u32>().ok()).unwrap_or(0);
        let minor = char::from(*m).to_digit(10).unwrap_or(0);
        let stepping = char::from(*s).to_digit(16).unwrap_or(0);
        major * 10000 + minor * 100 + stepping
    }

    /// Whether a device of this processor runs code built for `code`. The processors must be
    /// the same, with one substitution of aqueduct's own: a gfx942 device runs gfx940 code,
    /// clang-15's only name for the MI300 family (docs/code-objects.md §2).
    pub fn runs(&self, code: &Processor) -> bool {
        self.mach == code.mach || (self.name == "gfx942" && code.name == "gfx940")
    }
}

/// A processor with its two feature settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TargetId {
    /// The processor.
    pub processor: Processor,
    /// SRAM ECC.
    pub sramecc: Setting,
    /// XNACK.
    pub xnack: Setting,
}

impl TargetId {
    /// The target id an AMDGPU ELF header states: processor from `EF_AMDGPU_MACH`, features
    /// from the v3 bits (one bit each, on; clear means any) or the v4+ two-bit fields.
    /// `abi_version` is the header's `EI_ABIVERSION` (1 = v3, 2 = v4, …).
    pub fn from_e_flags(e_flags: u32, abi_version: u8) -> Option<TargetId> {
        let processor = Processor::from_mach(e_flags & 0xff)?;
        let (sramecc, xnack) = match abi_version {
            0 | 1 => {
                let bit = |b: u32| if e_flags & b != 0 { Setting::On } else { Setting::Any };
                (bit(0x200), bit(0x100))
            }
            _ => (Setting::from_v4_bits(e_flags >> 10), Setting::from_v4_bits(e_flags >> 8)),
        };
        Some(TargetId::with(processor, sramecc, xnack))
    }

    /// What a device of `processor` runs as: SRAM ECC on where the processor has it (as every
    /// MI-series board ships), XNACK on or off as asked.
    pub fn device(processor: Processor, xnack_on: bool) -> TargetId {
        let xnack = if xnack_on { Setting::On } else { Setting::Off };
        TargetId::with(processor, Setting::On, xnack)
    }

    /// Settings clamped to what the processor has.
    fn with(processor: Processor, sramecc: Setting, xnack: Setting) -> TargetId {
        let keep = |has: bool, s: Setting| if has { s } else { Setting::Unsupported };
        let any = |s: Setting| if s == Setting::Unsupported { Setting::Any } else { s };
        TargetId { processor, sramecc: keep(processor.sramecc, any(sramecc)), xnack: keep(processor.xnack, any(xnack)) }
    }

    /// Parses `amdgcn-amd-amdhsa--gfx90a:xnack-`, `amdgcn-amd-amdhsa-gfx90a` (the old bundle
    /// naming) or a bare `gfx90a:sramecc+`. `None` for another triple, an unknown processor or
    /// feature, or a feature without its sign.
    pub fn parse(id: &str) -> Option<TargetId> {
        let rest = match id.strip_prefix(TRIPLE) {
            Some(r) => r.strip_prefix("--").or_else(|| r.strip_prefix('-'))?,
            None if id.starts_with("gfx") => id,
            None => return None,
        };
        let mut parts = rest.split(':');
        let processor = Processor::from_name(parts.next()?)?;
        let (mut sramecc, mut xnack) = (Setting::Any, Setting::Any);
        for f in parts {
            let (name, sign) = f.split_at(f.len().checked_sub(1)?);
            let s = match sign {
                "+" => Setting::On,
                "-" => Setting::Off,
                _ => return None,
            };
            match name {
                "sramecc" if processor.sramecc => sramecc = s,
                "xnack" if processor.xnack => xnack = s,
                _ => return None,
            }
        }
        Some(TargetId::with(processor, sramecc, xnack))
    }

    /// Whether code built for this target runs on `device`.
    pub fn runs_on(&self, device: &TargetId) -> bool {
        device.processor.runs(&self.processor)
            && self.sramecc.runs_on(device.sramecc)
            && self.xnack.runs_on(device.xnack)
    }

    /// How specific the id is: the number of stated features (the better of two matches states
    /// more).
    pub fn specificity(&self) -> u32 {
        u32::from(self.sramecc.is_stated()) + u32::from(self.xnack.is_stated())
    }
}

impl fmt::Display for TargetId {
    /// The full id, features in clr's order: `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{TRIPLE}--{}", self.processor.name)?;
        for (name, s) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            match s {
                Setting::On => write!(f, ":{name}+")?,
                Setting::Off => write!(f, ":{name}-")?,
                Setting::Any | Setting::Unsupported => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> TargetId {
        TargetId::parse(s).unwrap_or_else(|| panic!("{s} parses"))
    }

    #[test]
    fn ids_parse_and_print() {
        let t = id("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-");
        assert_eq!((t.processor.name, t.sramecc, t.xnack), ("gfx90a", Setting::On, Setting::Off));
        let mut s = [0u8; 64];
        let n = {
            use core::fmt::Write;
            struct W<'a>(&'a mut [u8], usize);
            impl Write for W<'_> {
                fn write_str(&mut self, x: &str) -> fmt::Result {
                    self.0[self.1..self.1 + x.len()].copy_from_slice(x.as_bytes());
                    self.1 += x.len();
                    Ok(())
                }
            }
            let mut w = W(&mut s, 0);
            write!(w, "{t}").unwrap();
            w.1
        };
        assert_eq!(&s[..n], b"amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-");
        assert_eq!(id("amdgcn-amd-amdhsa-gfx90a").xnack, Setting::Any);
        assert_eq!(id("gfx1100").xnack, Setting::Unsupported);
        assert_eq!(TargetId::parse("gfx1100:xnack+"), None);
        assert_eq!(TargetId::parse("gfx90a:xnack"), None);
        assert_eq!(TargetId::parse("gfx90a:foo+"), None);
        assert_eq!(TargetId::parse("spirv64-amd-amdhsa--amdgcnspirv"), None);
        assert_eq!(TargetId::parse(""), None);
    }

    #[test]
    fn matching_follows_stated_features() {
        let dev = TargetId::device(Processor::from_name("gfx90a").unwrap(), false);
        assert!(id("gfx90a").runs_on(&dev));
        assert!(id("gfx90a:xnack-").runs_on(&dev));
        assert!(id("gfx90a:sramecc+:xnack-").runs_on(&dev));
        assert!(!id("gfx90a:xnack+").runs_on(&dev));
        assert!(!id("gfx90a:sramecc-").runs_on(&dev));
        assert!(!id("gfx908").runs_on(&dev));
        assert!(id("gfx90a:xnack-").specificity() > id("gfx90a").specificity());
        let mi300 = TargetId::device(Processor::from_name("gfx942").unwrap(), false);
        assert!(id("gfx940").runs_on(&mi300));
        assert!(!id("gfx942").runs_on(&TargetId::device(Processor::from_name("gfx940").unwrap(), false)));
    }

    #[test]
    fn e_flags_and_versions() {
        // hipcc --offload-arch=gfx90a (both any), Debian's xnack- and xnack+ images.
        let f = |flags| TargetId::from_e_flags(flags, 2).unwrap();
        assert_eq!((f(0x53f).sramecc, f(0x53f).xnack), (Setting::Any, Setting::Any));
        assert_eq!((f(0x63f).sramecc, f(0x63f).xnack), (Setting::Any, Setting::Off));
        assert_eq!(f(0x73f).xnack, Setting::On);
        assert_eq!(TargetId::from_e_flags(0x13f, 1).unwrap().xnack, Setting::On);
        assert_eq!(TargetId::from_e_flags(0xff, 2), None);
        for (v, name) in
            [(90010, "gfx90a"), (90402, "gfx942"), (110000, "gfx1100"), (100300, "gfx1030"), (90012, "gfx90c")]
        {
            let p = Processor::from_gfx_target_version(v).unwrap();
            assert_eq!(p.name, name);
            assert_eq!(p.gfx_target_version(), v);
        }
        assert_eq!(Processor::from_gfx_target_version(12345), None);
    }
}
