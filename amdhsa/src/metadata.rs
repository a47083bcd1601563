//! The `NT_AMDGPU_METADATA` note (docs/code-objects.md §6): a MessagePack map whose
//! `amdhsa.kernels` array describes each kernel — name, descriptor symbol, kernel-argument size
//! and alignment, segment sizes, register counts, and every argument with its offset, size and
//! value kind (explicit ones, then the `hidden_*` ones the runtime fills).
//!
//! MessagePack is decoded with `rmp`; the whole note is walked and checked once in
//! [`Metadata::parse`], after which the iterators here cannot fail. Nothing is copied: names
//! borrow the note's bytes.

use rmp::decode::{
    read_array_len, read_bin_len, read_ext_meta, read_int, read_map_len, read_marker, read_str_len, Bytes,
};
use rmp::Marker;

use crate::error::{Error, Result};

/// Nesting deeper than this is refused (the metadata nests four levels).
const MAX_DEPTH: u32 = 16;

/// A MessagePack cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reader<'a> {
    rest: &'a [u8],
}

const BAD: Error = Error::Metadata("truncated or mistyped MessagePack");

impl<'a> Reader<'a> {
    fn marker(&self) -> Result<Marker> {
        read_marker(&mut Bytes::new(self.rest)).map_err(|_| BAD)
    }

    fn advance(&mut self, n: usize) -> Result<()> {
        self.rest = self.rest.get(n..).ok_or(BAD)?;
        Ok(())
    }

    fn str(&mut self) -> Result<&'a str> {
        let mut b = Bytes::new(self.rest);
        let len = read_str_len(&mut b).map_err(|_| BAD)? as usize;
        let rest = b.remaining_slice();
        let s = rest.get(..len).ok_or(BAD)?;
        self.rest = rest.get(len..).ok_or(BAD)?;
        core::str::from_utf8(s).map_err(|_| Error::Metadata("a string is not UTF-8"))
    }

    fn uint(&mut self) -> Result<u64> {
        let mut b = Bytes::new(self.rest);
        let v: u64 = read_int(&mut b).map_err(|_| Error::Metadata("a number is not a non-negative integer"))?;
        self.rest = b.remaining_slice();
        Ok(v)
    }

    fn u32(&mut self) -> Result<u32> {
        u32::try_from(self.uint()?).map_err(|_| Error::Metadata("a number does not fit 32 bits"))
    }

    fn bool(&mut self) -> Result<bool> {
        match self.marker()? {
            Marker::True => self.advance(1).map(|()| true),
            Marker::False => self.advance(1).map(|()| false),
            _ => Err(Error::Metadata("a flag is not a boolean")),
        }
    }

    fn array(&mut self) -> Result<u32> {
        let mut b = Bytes::new(self.rest);
        let n = read_array_len(&mut b).map_err(|_| Error::Metadata("an array was expected"))?;
        self.rest = b.remaining_slice();
        Ok(n)
    }

    fn map(&mut self) -> Result<u32> {
        let mut b = Bytes::new(self.rest);
        let n = read_map_len(&mut b).map_err(|_| Error::Metadata("a map was expected"))?;
        self.rest = b.remaining_slice();
        Ok(n)
    }

    /// Skips one value of any type.
    fn skip(&mut self, depth: u32) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(Error::Metadata("nested too deeply"));
        }
        let m = self.marker()?;
        let fixed = |n: usize| Some(n);
        let size = match m {
            Marker::Null | Marker::True | Marker::False | Marker::FixPos(_) | Marker::FixNeg(_) => fixed(1),
            Marker::U8 | Marker::I8 => fixed(2),
            Marker::U16 | Marker::I16 => fixed(3),
            Marker::U32 | Marker::I32 | Marker::F32 => fixed(5),
            Marker::U64 | Marker::I64 | Marker::F64 => fixed(9),
            Marker::FixExt1 => fixed(3),
            Marker::FixExt2 => fixed(4),
            Marker::FixExt4 => fixed(6),
            Marker::FixExt8 => fixed(10),
            Marker::FixExt16 => fixed(18),
            _ => None,
        };
        if let Some(n) = size {
            return self.advance(n);
        }
        match m {
            Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
                let mut b = Bytes::new(self.rest);
                let len = read_str_len(&mut b).map_err(|_| BAD)? as usize;
                self.rest = b.remaining_slice();
                self.advance(len)
            }
            Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
                let mut b = Bytes::new(self.rest);
                let len = read_bin_len(&mut b).map_err(|_| BAD)? as usize;
                self.rest = b.remaining_slice();
                self.advance(len)
            }
            Marker::Ext8 | Marker::Ext16 | Marker::Ext32 => {
                let mut b = Bytes::new(self.rest);
                let meta = read_ext_meta(&mut b).map_err(|_| BAD)?;
                self.rest = b.remaining_slice();
                self.advance(meta.size as usize)
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                for _ in 0..self.array()? {
                    self.skip(depth + 1)?;
                }
                Ok(())
            }
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                for _ in 0..self.map()? {
                    self.skip(depth + 1)?;
                    self.skip(depth + 1)?;
                }
                Ok(())
            }
            _ => Err(Error::Metadata("a reserved MessagePack marker")),
        }
    }

    /// Walks a map with string keys, calling `f(key, reader)`; `f` consumes the value or
    /// answers `false` to have it skipped.
    fn fields(&mut self, depth: u32, mut f: impl FnMut(&str, &mut Reader<'a>) -> Result<bool>) -> Result<()> {
        for _ in 0..self.map()? {
            let key = self.str()?;
            if !f(key, self)? {
                self.skip(depth + 1)?;
            }
        }
        Ok(())
    }
}

/// What an argument is, by `.value_kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)] // the variants are the metadata's value kinds, named alike
pub enum ValueKind {
    ByValue,
    GlobalBuffer,
    DynamicSharedPointer,
    Sampler,
    Image,
    Pipe,
    Queue,
    HiddenGlobalOffsetX,
    HiddenGlobalOffsetY,
    HiddenGlobalOffsetZ,
    HiddenNone,
    HiddenPrintfBuffer,
    HiddenHostcallBuffer,
    HiddenDefaultQueue,
    HiddenCompletionAction,
    HiddenMultigridSyncArg,
    HiddenHeapV1,
    HiddenBlockCountX,
    HiddenBlockCountY,
    HiddenBlockCountZ,
    HiddenGroupSizeX,
    HiddenGroupSizeY,
    HiddenGroupSizeZ,
    HiddenRemainderX,
    HiddenRemainderY,
    HiddenRemainderZ,
    HiddenGridDims,
    HiddenPrivateBase,
    HiddenSharedBase,
    HiddenQueuePtr,
    HiddenDynamicLdsSize,
    /// A hidden kind this crate does not know (filled with zeros).
    HiddenOther,
    /// An explicit kind this crate does not know.
    Other,
}

impl ValueKind {
    /// The kind a `.value_kind` string names.
    pub fn from_name(s: &str) -> ValueKind {
        use ValueKind::*;
        match s {
            "by_value" => ByValue,
            "global_buffer" => GlobalBuffer,
            "dynamic_shared_pointer" => DynamicSharedPointer,
            "sampler" => Sampler,
            "image" => Image,
            "pipe" => Pipe,
            "queue" => Queue,
            "hidden_global_offset_x" => HiddenGlobalOffsetX,
            "hidden_global_offset_y" => HiddenGlobalOffsetY,
            "hidden_global_offset_z" => HiddenGlobalOffsetZ,
            "hidden_none" => HiddenNone,
            "hidden_printf_buffer" => HiddenPrintfBuffer,
            "hidden_hostcall_buffer" => HiddenHostcallBuffer,
            "hidden_default_queue" => HiddenDefaultQueue,
            "hidden_completion_action" => HiddenCompletionAction,
            "hidden_multigrid_sync_arg" => HiddenMultigridSyncArg,
            "hidden_heap_v1" => HiddenHeapV1,
            "hidden_block_count_x" => HiddenBlockCountX,
            "hidden_block_count_y" => HiddenBlockCountY,
            "hidden_block_count_z" => HiddenBlockCountZ,
            "hidden_group_size_x" => HiddenGroupSizeX,
            "hidden_group_size_y" => HiddenGroupSizeY,
            "hidden_group_size_z" => HiddenGroupSizeZ,
            "hidden_remainder_x" => HiddenRemainderX,
            "hidden_remainder_y" => HiddenRemainderY,
            "hidden_remainder_z" => HiddenRemainderZ,
            "hidden_grid_dims" => HiddenGridDims,
            "hidden_private_base" => HiddenPrivateBase,
            "hidden_shared_base" => HiddenSharedBase,
            "hidden_queue_ptr" => HiddenQueuePtr,
            "hidden_dynamic_lds_size" => HiddenDynamicLdsSize,
            s if s.starts_with("hidden_") => HiddenOther,
            _ => Other,
        }
    }

    /// Whether the runtime, not the caller, supplies the argument.
    pub fn is_hidden(&self) -> bool {
        !matches!(
            self,
            ValueKind::ByValue
                | ValueKind::GlobalBuffer
                | ValueKind::DynamicSharedPointer
                | ValueKind::Sampler
                | ValueKind::Image
                | ValueKind::Pipe
                | ValueKind::Queue
                | ValueKind::Other
        )
    }
}

/// One kernel argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg<'a> {
    /// Byte offset in the kernel-argument segment.
    pub offset: u32,
    /// Bytes.
    pub size: u32,
    /// `.value_kind`, decoded.
    pub kind: ValueKind,
    /// `.value_kind` as written.
    pub value_kind: &'a str,
    /// `.name`, when the compiler kept it.
    pub name: Option<&'a str>,
    /// `.type_name`, when present.
    pub type_name: Option<&'a str>,
    /// `.address_space` of a pointer argument (`global`, `local`, …).
    pub address_space: Option<&'a str>,
}

impl Arg<'_> {
    fn parse<'a>(r: &mut Reader<'a>, depth: u32) -> Result<Arg<'a>> {
        let mut a = Arg {
            offset: u32::MAX,
            size: u32::MAX,
            kind: ValueKind::Other,
            value_kind: "",
            name: None,
            type_name: None,
            address_space: None,
        };
        r.fields(depth, |k, r| {
            match k {
                ".offset" => a.offset = r.u32()?,
                ".size" => a.size = r.u32()?,
                ".value_kind" => {
                    a.value_kind = r.str()?;
                    a.kind = ValueKind::from_name(a.value_kind);
                }
                ".name" => a.name = Some(r.str()?),
                ".type_name" => a.type_name = Some(r.str()?),
                ".address_space" => a.address_space = Some(r.str()?),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        if a.offset == u32::MAX || a.size == u32::MAX || a.value_kind.is_empty() {
            return Err(Error::Metadata("an argument lacks .offset, .size or .value_kind"));
        }
        if a.offset.checked_add(a.size).is_none() {
            return Err(Error::Metadata("an argument's end overflows"));
        }
        Ok(a)
    }

    /// The end of the argument in the segment.
    pub fn end(&self) -> u32 {
        self.offset + self.size
    }
}

/// One entry of `amdhsa.kernels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelMeta<'a> {
    /// `.name`.
    pub name: &'a str,
    /// `.symbol` (`<name>.kd`).
    pub symbol: &'a str,
    /// `.kernarg_segment_size`.
    pub kernarg_segment_size: u32,
    /// `.kernarg_segment_align` (at least 16 is what runtimes provide).
    pub kernarg_segment_align: u32,
    /// `.group_segment_fixed_size`.
    pub group_segment_fixed_size: u32,
    /// `.private_segment_fixed_size`.
    pub private_segment_fixed_size: u32,
    /// `.wavefront_size`.
    pub wavefront_size: u32,
    /// `.sgpr_count`.
    pub sgpr_count: u32,
    /// `.vgpr_count`.
    pub vgpr_count: u32,
    /// `.agpr_count` (gfx90a+; 0 when absent).
    pub agpr_count: u32,
    /// `.sgpr_spill_count`.
    pub sgpr_spill_count: u32,
    /// `.vgpr_spill_count`.
    pub vgpr_spill_count: u32,
    /// `.max_flat_workgroup_size`.
    pub max_flat_workgroup_size: u32,
    /// `.uses_dynamic_stack`.
    pub uses_dynamic_stack: bool,
    /// `.reqd_workgroup_size`, when the kernel requires one.
    pub reqd_workgroup_size: Option<[u32; 3]>,
    args: Reader<'a>,
    arg_count: u32,
}

impl<'a> KernelMeta<'a> {
    fn parse(r: &mut Reader<'a>, depth: u32) -> Result<KernelMeta<'a>> {
        let mut k = KernelMeta {
            name: "",
            symbol: "",
            kernarg_segment_size: 0,
            kernarg_segment_align: 0,
            group_segment_fixed_size: 0,
            private_segment_fixed_size: 0,
            wavefront_size: 64,
            sgpr_count: 0,
            vgpr_count: 0,
            agpr_count: 0,
            sgpr_spill_count: 0,
            vgpr_spill_count: 0,
            max_flat_workgroup_size: 0,
            uses_dynamic_stack: false,
            reqd_workgroup_size: None,
            args: Reader { rest: &[] },
            arg_count: 0,
        };
        r.fields(depth, |key, r| {
            match key {
                ".name" => k.name = r.str()?,
                ".symbol" => k.symbol = r.str()?,
                ".kernarg_segment_size" => k.kernarg_segment_size = r.u32()?,
                ".kernarg_segment_align" => k.kernarg_segment_align = r.u32()?,
                ".group_segment_fixed_size" => k.group_segment_fixed_size = r.u32()?,
                ".private_segment_fixed_size" => k.private_segment_fixed_size = r.u32()?,
                ".wavefront_size" => k.wavefront_size = r.u32()?,
                ".sgpr_count" => k.sgpr_count = r.u32()?,
                ".vgpr_count" => k.vgpr_count = r.u32()?,
                ".agpr_count" => k.agpr_count = r.u32()?,
                ".sgpr_spill_count" => k.sgpr_spill_count = r.u32()?,
                ".vgpr_spill_count" => k.vgpr_spill_count = r.u32()?,
                ".max_flat_workgroup_size" => k.max_flat_workgroup_size = r.u32()?,
                ".uses_dynamic_stack" => k.uses_dynamic_stack = r.bool()?,
                ".reqd_workgroup_size" => {
                    if r.array()? != 3 {
                        return Err(Error::Metadata(".reqd_workgroup_size is not three numbers"));
                    }
                    k.reqd_workgroup_size = Some([r.u32()?, r.u32()?, r.u32()?]);
                }
                ".args" => {
                    k.arg_count = r.array()?;
                    k.args = *r;
                    for _ in 0..k.arg_count {
                        Arg::parse(r, depth + 2)?;
                    }
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        if k.name.is_empty() {
            return Err(Error::Metadata("a kernel has no .name"));
        }
        Ok(k)
    }

    /// The arguments in declaration order (explicit first, then hidden).
    pub fn args(&self) -> impl Iterator<Item = Arg<'a>> + 'a {
        let mut r = self.args;
        // Checked by `Metadata::parse`.
        (0..self.arg_count).map_while(move |_| Arg::parse(&mut r, 2).ok())
    }

    /// The explicit (caller-supplied) arguments.
    pub fn explicit_args(&self) -> impl Iterator<Item = Arg<'a>> + 'a {
        self.args().filter(|a| !a.kind.is_hidden())
    }

    /// The hidden arguments the runtime fills.
    pub fn hidden_args(&self) -> impl Iterator<Item = Arg<'a>> + 'a {
        self.args().filter(|a| a.kind.is_hidden())
    }

    /// Kernel-argument bytes a launch provides: the metadata's size, or the end of the last
    /// argument if that is larger.
    pub fn kernarg_bytes(&self) -> u32 {
        self.args().map(|a| a.end()).max().unwrap_or(0).max(self.kernarg_segment_size)
    }
}

/// A checked metadata note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata<'a> {
    /// `amdhsa.version`, `[major, minor]` (`[1, 1]` for v4, `[1, 2]` for v5).
    pub version: [u32; 2],
    /// `amdhsa.target`, when present.
    pub target: Option<&'a str>,
    kernels: Reader<'a>,
    kernel_count: u32,
}

impl<'a> Metadata<'a> {
    /// Parses and checks a note's MessagePack.
    pub fn parse(note: &'a [u8]) -> Result<Metadata<'a>> {
        let mut r = Reader { rest: note };
        let mut m = Metadata { version: [0, 0], target: None, kernels: Reader { rest: &[] }, kernel_count: 0 };
        let mut seen_kernels = false;
        r.fields(0, |key, r| {
            match key {
                "amdhsa.version" => {
                    if r.array()? < 2 {
                        return Err(Error::Metadata("amdhsa.version is not [major, minor]"));
                    }
                    m.version = [r.u32()?, r.u32()?];
                    // Any further elements were counted by `array`; a version has two.
                }
                "amdhsa.target" => m.target = Some(r.str()?),
                "amdhsa.kernels" => {
                    m.kernel_count = r.array()?;
                    m.kernels = *r;
                    for _ in 0..m.kernel_count {
                        KernelMeta::parse(r, 1)?;
                    }
                    seen_kernels = true;
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        if !seen_kernels {
            return Err(Error::Metadata("no amdhsa.kernels"));
        }
        Ok(m)
    }

    /// Number of kernels described.
    pub fn len(&self) -> usize {
        self.kernel_count as usize
    }

    /// Whether no kernel is described.
    pub fn is_empty(&self) -> bool {
        self.kernel_count == 0
    }

    /// The kernels, in note order.
    pub fn kernels(&self) -> impl Iterator<Item = KernelMeta<'a>> + 'a {
        let mut r = self.kernels;
        // Checked by `parse`.
        (0..self.kernel_count).map_while(move |_| KernelMeta::parse(&mut r, 1).ok())
    }

    /// The kernel named `name` (`.name`, or `.symbol` without `.kd`).
    pub fn kernel(&self, name: &str) -> Option<KernelMeta<'a>> {
        self.kernels().find(|k| k.name == name || k.symbol.strip_suffix(".kd") == Some(name))
    }
}
