//! AMDGPU code-object metadata (docs/kfd-aql.md §6; docs/rocm-on-emu.md §4.2): the
//! `NT_AMDGPU_METADATA` note (owner `AMDGPU`, type 32) of code objects v3 and later is a
//! MessagePack map whose `amdhsa.kernels` array describes each kernel: `.name`, `.symbol`,
//! `.kernarg_segment_size` and `.args`, every argument with its `.offset`, `.size` and
//! `.value_kind` (`by_value`, `global_buffer`, …, and the `hidden_*` kinds the runtime fills in).
//!
//! The note is found through the program headers with the `object` crate, so the same code
//! reads an ELF file and an image a loader copied into device memory (whose first `PT_LOAD`
//! segment holds the headers and the note). The MessagePack reader is the small subset the
//! metadata uses: nil, booleans, integers, floats, strings, binaries, arrays, maps and
//! extensions (skipped), with a nesting limit.

use object::elf::{FileHeader64, PT_NOTE};
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;

/// `NT_AMDGPU_METADATA`.
pub const NT_AMDGPU_METADATA: u32 = 32;

/// One kernel argument, explicit or hidden.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelArg {
    /// Byte offset in the kernel-argument segment.
    pub offset: u32,
    /// Bytes.
    pub size: u32,
    /// `.value_kind` (`by_value`, `global_buffer`, `hidden_global_offset_x`, …).
    pub value_kind: String,
    /// `.name`, when the compiler kept it.
    pub name: Option<String>,
}

impl KernelArg {
    /// Whether the runtime, not the caller, supplies this argument.
    pub fn is_hidden(&self) -> bool {
        self.value_kind.starts_with("hidden_")
    }
}

/// One entry of `amdhsa.kernels`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelMeta {
    /// `.name`.
    pub name: String,
    /// `.symbol` (`<name>.kd`).
    pub symbol: String,
    /// `.kernarg_segment_size`.
    pub kernarg_segment_size: u32,
    /// `.args`, in declaration order (explicit first, then hidden).
    pub args: Vec<KernelArg>,
}

/// A decoded MessagePack value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// nil.
    Nil,
    /// true / false.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer that does not fit `i64`.
    UInt(u64),
    /// float 32 or 64.
    Float(f64),
    /// A UTF-8 string (invalid UTF-8 is replaced).
    Str(String),
    /// Binary data.
    Bin(Vec<u8>),
    /// An array.
    Array(Vec<Value>),
    /// A map, in encoded order.
    Map(Vec<(Value, Value)>),
}

impl Value {
    /// The value under string key `key` of a map.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(m) => m.iter().find(|(k, _)| matches!(k, Value::Str(s) if s == key)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// A non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::Int(i) => u64::try_from(i).ok(),
            Value::UInt(u) => Some(u),
            _ => None,
        }
    }

    /// A string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

const MAX_DEPTH: u32 = 32;

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn uint(&mut self, n: usize) -> Option<u64> {
        Some(self.take(n)?.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    }

    fn int(&mut self, n: usize) -> Option<i64> {
        let u = self.uint(n)?;
        let shift = 64 - 8 * n as u32;
        Some(((u << shift) as i64) >> shift)
    }

    fn str(&mut self, n: usize) -> Option<Value> {
        Some(Value::Str(String::from_utf8_lossy(self.take(n)?).into_owned()))
    }

    fn array(&mut self, n: usize, depth: u32) -> Option<Value> {
        // Every element takes at least one byte: refuse counts the input cannot hold.
        if n > self.b.len() - self.at {
            return None;
        }
        (0..n).map(|_| self.value(depth + 1)).collect::<Option<Vec<_>>>().map(Value::Array)
    }

    fn map(&mut self, n: usize, depth: u32) -> Option<Value> {
        if n > (self.b.len() - self.at) / 2 {
            return None;
        }
        (0..n)
            .map(|_| Some((self.value(depth + 1)?, self.value(depth + 1)?)))
            .collect::<Option<Vec<_>>>()
            .map(Value::Map)
    }

    fn value(&mut self, depth: u32) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let t = *self.take(1)?.first()?;
        Some(match t {
            0x00..=0x7f => Value::Int(i64::from(t)),
            0x80..=0x8f => self.map(usize::from(t & 0x0f), depth)?,
            0x90..=0x9f => self.array(usize::from(t & 0x0f), depth)?,
            0xa0..=0xbf => self.str(usize::from(t & 0x1f))?,
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = self.uint(1 << (t - 0xc4))? as usize;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xc7..=0xc9 => {
                // ext 8/16/32: length, type, data (skipped).
                let n = self.uint(1 << (t - 0xc7))? as usize;
                self.take(1 + n)?;
                Value::Nil
            }
            0xca => Value::Float(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => Value::Float(f64::from_bits(self.uint(8)?)),
            0xcc..=0xcf => {
                let u = self.uint(1 << (t - 0xcc))?;
                i64::try_from(u).map_or(Value::UInt(u), Value::Int)
            }
            0xd0..=0xd3 => Value::Int(self.int(1 << (t - 0xd0))?),
            0xd4..=0xd8 => {
                // fixext 1/2/4/8/16: type, data (skipped).
                self.take(1 + (1 << (t - 0xd4)))?;
                Value::Nil
            }
            0xd9..=0xdb => {
                let n = self.uint(1 << (t - 0xd9))? as usize;
                self.str(n)?
            }
            0xdc | 0xdd => {
                let n = self.uint(if t == 0xdc { 2 } else { 4 })? as usize;
                self.array(n, depth)?
            }
            0xde | 0xdf => {
                let n = self.uint(if t == 0xde { 2 } else { 4 })? as usize;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::Int(i64::from(t as i8)),
            0xc1 => return None,
        })
    }
}

/// Decodes one MessagePack value from the start of `b`.
pub fn decode(b: &[u8]) -> Option<Value> {
    Reader { b, at: 0 }.value(0)
}

/// The kernels of a metadata note's descriptor (`amdhsa.kernels`).
pub fn kernels_from_note(desc: &[u8]) -> Option<Vec<KernelMeta>> {
    let root = decode(desc)?;
    let Value::Array(kernels) = root.get("amdhsa.kernels")? else { return None };
    let u32_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).and_then(|x| u32::try_from(x).ok());
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    kernels
        .iter()
        .map(|k| {
            let args = match k.get(".args") {
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|a| {
                        Some(KernelArg {
                            offset: u32_of(a, ".offset")?,
                            size: u32_of(a, ".size")?,
                            value_kind: str_of(a, ".value_kind")?,
                            name: str_of(a, ".name"),
                        })
                    })
                    .collect::<Option<Vec<_>>>()?,
                _ => Vec::new(),
            };
            Some(KernelMeta {
                name: str_of(k, ".name")?,
                symbol: str_of(k, ".symbol").unwrap_or_default(),
                kernarg_segment_size: u32_of(k, ".kernarg_segment_size").unwrap_or(0),
                args,
            })
        })
        .collect()
}

/// The kernels described by the metadata note of an ELF image: a file, or a loaded image
/// whose bytes start at the ELF header (`data[off]` is the byte at file offset `off`).
pub fn kernels_from_elf(data: &[u8]) -> Option<Vec<KernelMeta>> {
    let hdr = FileHeader64::<Endianness>::parse(data).ok()?;
    let endian = hdr.endian().ok()?;
    for ph in hdr.program_headers(endian, data).ok()? {
        if ph.p_type(endian) != PT_NOTE {
            continue;
        }
        let Ok(Some(mut notes)) = ph.notes(endian, data) else { continue };
        while let Ok(Some(note)) = notes.next() {
            if note.name() == b"AMDGPU" && note.n_type(endian) == NT_AMDGPU_METADATA {
                return kernels_from_note(note.desc());
            }
        }
    }
    None
}

/// The entry for kernel `name` (matched by `.name`, or by `.symbol` = `name.kd`).
pub fn find<'a>(kernels: &'a [KernelMeta], name: &str) -> Option<&'a KernelMeta> {
    kernels.iter().find(|k| k.name == name || k.symbol.strip_suffix(".kd") == Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msgpack_subset_round_trips_the_shapes_metadata_uses() {
        // {"a": [1, -1, 300, "x"], "b": {"c": true}, "d": 4294967296, "e": nil}
        let b = [
            0x84, 0xa1, b'a', 0x94, 0x01, 0xff, 0xcd, 0x01, 0x2c, 0xa1, b'x', 0xa1, b'b', 0x81, 0xa1, b'c', 0xc3, 0xa1,
            b'd', 0xcf, 0, 0, 0, 1, 0, 0, 0, 0, 0xa1, b'e', 0xc0,
        ];
        let v = decode(&b).unwrap();
        assert_eq!(
            v.get("a"),
            Some(&Value::Array(vec![Value::Int(1), Value::Int(-1), Value::Int(300), Value::Str("x".into())]))
        );
        assert_eq!(v.get("b").and_then(|b| b.get("c")), Some(&Value::Bool(true)));
        assert_eq!(v.get("d").and_then(Value::as_u64), Some(1 << 32));
        assert_eq!(v.get("e"), Some(&Value::Nil));
        // Truncated input and absurd counts are refused, not trusted.
        assert_eq!(decode(&b[..10]), None);
        assert_eq!(decode(&[0xdd, 0xff, 0xff, 0xff, 0xff]), None);
        let mut deep = vec![0x91; 100];
        deep.push(0xc0);
        assert_eq!(decode(&deep), None);
    }
}
