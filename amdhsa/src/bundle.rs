//! Clang offload bundles (docs/code-objects.md §3): the container hipcc puts a translation
//! unit's device code objects in, one per target, next to an empty host entry.
//!
//! Layout (little-endian): the 24-byte magic `__CLANG_OFFLOAD_BUNDLE__`, a u64 entry count, then
//! per entry a u64 offset (from the bundle's start), a u64 size, a u64 id length and the id
//! (`host-x86_64-unknown-linux-gnu`, `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`). A linked
//! program's `.hip_fatbin` section holds one bundle per translation unit, back to back, each
//! starting at its section alignment (zero padding in between): [`Bundles`] walks them.

use crate::elf::CodeObject;
use crate::error::{Error, Result};
use crate::target::TargetId;

/// The uncompressed bundle magic.
pub const MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// The compressed bundle magic (clang 17+), refused with [`Error::Compressed`].
pub const COMPRESSED_MAGIC: &[u8; 4] = b"CCOB";

const HEADER: usize = 32;
const ENTRY_HEADER: usize = 24;

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// One entry's header: where its code lies and its id's bytes.
struct RawEntry {
    offset: usize,
    size: usize,
    id_at: usize,
    id_len: usize,
}

/// Walks entry headers through `read(offset, len)` (which answers `None` past the bytes it
/// knows), calling `f` for each; returns the end of the header table.
fn walk<'a>(
    read: &impl Fn(usize, usize) -> Option<&'a [u8]>,
    mut f: impl FnMut(RawEntry) -> Result<()>,
) -> Result<usize> {
    let head = read(0, HEADER).ok_or(Error::Truncated("bundle header"))?;
    if head.starts_with(COMPRESSED_MAGIC) {
        return Err(Error::Compressed);
    }
    if head.get(..24) != Some(&MAGIC[..]) {
        return Err(Error::Bundle("no __CLANG_OFFLOAD_BUNDLE__ magic"));
    }
    let count = u64_at(head, 24).ok_or(Error::Truncated("bundle header"))?;
    let mut at = HEADER;
    for _ in 0..count {
        let e = read(at, ENTRY_HEADER).ok_or(Error::Truncated("bundle entry header"))?;
        let (offset, size, id_len) = match (u64_at(e, 0), u64_at(e, 8), u64_at(e, 16)) {
            (Some(o), Some(s), Some(l)) => (o, s, l),
            _ => return Err(Error::Truncated("bundle entry header")),
        };
        let too_big = |_| Error::Bundle("an offset or size does not fit the address space");
        let (offset, size, id_len) = (
            usize::try_from(offset).map_err(too_big)?,
            usize::try_from(size).map_err(too_big)?,
            usize::try_from(id_len).map_err(too_big)?,
        );
        offset.checked_add(size).ok_or(Error::Bundle("entry end overflows"))?;
        let id_at = at + ENTRY_HEADER;
        at = id_at.checked_add(id_len).ok_or(Error::Bundle("entry id overflows"))?;
        f(RawEntry { offset, size, id_at, id_len })?;
    }
    Ok(at)
}

/// The bytes a bundle spans — its header table and every entry's code — read through
/// `read(offset, len)`, which answers `None` past what it knows. For a bundle known only by
/// its address (a registered fat binary): read the header incrementally, then view the extent.
pub fn extent<'a>(read: impl Fn(usize, usize) -> Option<&'a [u8]>) -> Result<usize> {
    let mut end = 0usize;
    let header_end = walk(&read, |e| {
        end = end.max(e.offset + e.size);
        Ok(())
    })?;
    Ok(end.max(header_end))
}

/// A parsed bundle over its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Bundle<'a> {
    data: &'a [u8],
    count: usize,
    size: usize,
}

/// One entry of a bundle.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The id, e.g. `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`.
    pub id: &'a str,
    /// The entry's bytes (a code object; empty for the host entry).
    pub code: &'a [u8],
    /// Where they start, from the bundle's start.
    pub offset: usize,
}

impl<'a> Entry<'a> {
    /// The offload kind before the first `-`: `host`, `hipv4`, `hip`, `hcc`, `openmp`, …
    pub fn kind(&self) -> &'a str {
        self.id.split_once('-').map_or(self.id, |(k, _)| k)
    }

    /// The target the entry's code is built for: from the id for `hipv4` (code object v4+
    /// naming), from the code object's header for `hip` and `hcc` (v2/v3 naming, whose ids
    /// carry no features); `None` for host entries and unknown targets.
    pub fn target(&self) -> Option<TargetId> {
        let (kind, rest) = self.id.split_once('-')?;
        match kind {
            "hipv4" => TargetId::parse(rest),
            "hip" | "hcc" if !self.code.is_empty() => CodeObject::parse(self.code).ok().map(|c| c.target()),
            _ => None,
        }
    }
}

impl<'a> Bundle<'a> {
    /// Parses and checks a bundle: every entry's header and code lie inside `data` and every id
    /// is UTF-8. Bytes past the extent are ignored.
    pub fn parse(data: &'a [u8]) -> Result<Bundle<'a>> {
        let read = |o: usize, l: usize| data.get(o..o.checked_add(l)?);
        let mut count = 0usize;
        let mut end = 0usize;
        let header_end = walk(&read, |e| {
            if data.get(e.offset..e.offset + e.size).is_none() {
                return Err(Error::Truncated("bundle entry"));
            }
            let id = read(e.id_at, e.id_len).ok_or(Error::Truncated("bundle entry id"))?;
            core::str::from_utf8(id).map_err(|_| Error::Bundle("an entry id is not UTF-8"))?;
            end = end.max(e.offset + e.size);
            count += 1;
            Ok(())
        })?;
        Ok(Bundle { data, count, size: end.max(header_end) })
    }

    /// Bytes the bundle spans.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the bundle has no entries.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The entries, in bundle order.
    pub fn entries(&self) -> impl Iterator<Item = Entry<'a>> + 'a {
        let data = self.data;
        let mut at = HEADER;
        (0..self.count).filter_map(move |_| {
            // Checked by `parse`: every header, id and code range is inside `data`.
            let (offset, size, id_len) = (u64_at(data, at)?, u64_at(data, at + 8)?, u64_at(data, at + 16)?);
            let (offset, size, id_len) = (offset as usize, size as usize, id_len as usize);
            let id = core::str::from_utf8(data.get(at + ENTRY_HEADER..at + ENTRY_HEADER + id_len)?).ok()?;
            at += ENTRY_HEADER + id_len;
            Some(Entry { id, code: data.get(offset..offset + size)?, offset })
        })
    }

    /// The entry whose code runs on `device`, the most specific one first (clr's choice among
    /// an `xnack-` and an `xnack`-any image); `None` when no entry does.
    pub fn best_for(&self, device: &TargetId) -> Option<Entry<'a>> {
        let mut best: Option<(u32, Entry<'a>)> = None;
        for e in self.entries() {
            let Some(t) = e.target().filter(|t| t.runs_on(device)) else { continue };
            if best.as_ref().is_none_or(|(s, _)| t.specificity() > *s) {
                best = Some((t.specificity(), e));
            }
        }
        best.map(|(_, e)| e)
    }
}

/// The bundles of a `.hip_fatbin` section, in order: each starts where the zero padding after
/// the previous one ends.
#[derive(Debug, Clone)]
pub struct Bundles<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Bundles<'a> {
    /// Walks `section`.
    pub fn new(section: &'a [u8]) -> Bundles<'a> {
        Bundles { rest: section, failed: false }
    }
}

impl<'a> Iterator for Bundles<'a> {
    type Item = Result<Bundle<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let skip = self.rest.iter().position(|&b| b != 0)?;
        self.rest = self.rest.get(skip..)?;
        match Bundle::parse(self.rest) {
            Ok(b) => {
                self.rest = self.rest.get(b.size()..).unwrap_or(&[]);
                Some(Ok(b))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bundle of `(id, code)` entries with code at 4 KiB offsets, as clang lays it out.
    fn bundle(entries: &[(&str, &[u8])], out: &mut [u8]) -> usize {
        let header: usize = HEADER + entries.iter().map(|(id, _)| ENTRY_HEADER + id.len()).sum::<usize>();
        let mut code_at = header.div_ceil(4096) * 4096;
        out[..24].copy_from_slice(MAGIC);
        out[24..32].copy_from_slice(&(entries.len() as u64).to_le_bytes());
        let mut at = HEADER;
        let mut end = header;
        for (id, code) in entries {
            out[at..at + 8].copy_from_slice(&(code_at as u64).to_le_bytes());
            out[at + 8..at + 16].copy_from_slice(&(code.len() as u64).to_le_bytes());
            out[at + 16..at + 24].copy_from_slice(&(id.len() as u64).to_le_bytes());
            out[at + 24..at + 24 + id.len()].copy_from_slice(id.as_bytes());
            at += ENTRY_HEADER + id.len();
            out[code_at..code_at + code.len()].copy_from_slice(code);
            end = code_at + code.len();
            code_at += code.len().div_ceil(4096) * 4096;
        }
        end
    }

    #[test]
    fn entries_targets_and_choice() {
        let mut buf = [0u8; 4 * 4096];
        let n = bundle(
            &[
                ("host-x86_64-unknown-linux-gnu", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"any"),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", b"off"),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", b"on"),
            ],
            &mut buf,
        );
        let b = Bundle::parse(&buf).unwrap();
        assert_eq!((b.len(), b.size()), (4, n));
        assert_eq!(extent(|o, l| buf.get(o..o + l)), Ok(n));
        let kinds: [&str; 4] = core::array::from_fn(|i| b.entries().nth(i).unwrap().kind());
        assert_eq!(kinds, ["host", "hipv4", "hipv4", "hipv4"]);
        let dev = |xnack| TargetId::device(crate::target::Processor::from_name("gfx90a").unwrap(), xnack);
        assert_eq!(b.best_for(&dev(false)).unwrap().code, b"off");
        assert_eq!(b.best_for(&dev(true)).unwrap().code, b"on");
        let gfx1100 = TargetId::device(crate::target::Processor::from_name("gfx1100").unwrap(), false);
        assert!(b.best_for(&gfx1100).is_none());

        // Two bundles back to back with zero padding, as a linked .hip_fatbin holds them.
        let mut section = [0u8; 12 * 4096];
        section[..buf.len()].copy_from_slice(&buf);
        section[5 * 4096..9 * 4096].copy_from_slice(&buf);
        let all: [usize; 2] = core::array::from_fn(|i| Bundles::new(&section).nth(i).unwrap().unwrap().len());
        assert_eq!(all, [4, 4]);
        assert_eq!(Bundles::new(&section).count(), 2);
    }

    #[test]
    fn hostile_headers_are_errors() {
        let mut buf = [0u8; 2 * 4096];
        bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", b"abc")], &mut buf);
        assert_eq!(Bundle::parse(&buf[..40]).unwrap_err(), Error::Truncated("bundle entry header"));
        assert_eq!(Bundle::parse(&buf[..4097]).unwrap_err(), Error::Truncated("bundle entry"));
        let mut huge = buf;
        huge[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Bundle::parse(&huge).is_err());
        let mut wrap = buf;
        wrap[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Bundle::parse(&wrap).is_err());
        let mut ccob = buf;
        ccob[..4].copy_from_slice(COMPRESSED_MAGIC);
        assert_eq!(Bundle::parse(&ccob).unwrap_err(), Error::Compressed);
        assert!(Bundle::parse(b"short").is_err());
    }
}
