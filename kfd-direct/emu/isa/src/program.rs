//! A decoded code stream: the instruction array an interpreter runs, with the word offset each
//! instruction starts at, so branch targets resolve to array indices once, at load time.

use alloc::vec::Vec;

use crate::{decode_for, DecodeError, Encoding, Inst, Operand, Target};

/// The pre-decoded instructions of one code stream (a code object's `.text`).
#[derive(Clone, Debug, Default)]
pub struct Program {
    insts: Vec<Inst>,
    /// `starts[i]`: word offset of `insts[i]`; strictly increasing.
    starts: Vec<u32>,
}

impl Program {
    /// Decodes gfx90a `words` from the start, stopping at the first error.
    pub fn decode(words: &[u32]) -> Result<Program, DecodeError> {
        Program::decode_for(Target::Gfx90a, words)
    }

    /// Decodes `words` of `target`'s instruction set from the start, stopping at the first error.
    pub fn decode_for(target: Target, words: &[u32]) -> Result<Program, DecodeError> {
        let mut p = Program::default();
        let mut at = 0;
        while at < words.len() {
            let inst = decode_for(target, words, at)?;
            p.starts.push(at as u32);
            p.insts.push(inst);
            at += usize::from(inst.len);
        }
        Ok(p)
    }

    /// The instructions in stream order.
    pub fn insts(&self) -> &[Inst] {
        &self.insts
    }

    /// Word offset of instruction `index`.
    pub fn start(&self, index: usize) -> Option<usize> {
        self.starts.get(index).map(|&s| s as usize)
    }

    /// Index of the instruction that starts at word offset `word` (None inside an instruction).
    pub fn index_at(&self, word: usize) -> Option<usize> {
        let w = u32::try_from(word).ok()?;
        self.starts.binary_search(&w).ok()
    }

    /// For a SOPP branch (`s_branch`, `s_cbranch_*`) at `index`: the index of its target,
    /// PC + 4 + 4 × simm16 (docs/isa.md §3). None for other instructions or a target outside the
    /// stream or inside an instruction.
    pub fn branch_target(&self, index: usize) -> Option<usize> {
        let inst = self.insts.get(index)?;
        let spec = inst.op.spec();
        if spec.enc != Encoding::Sopp || !(spec.name.starts_with("s_branch") || spec.name.starts_with("s_cbranch")) {
            return None;
        }
        let Some(Operand::Imm(imm)) = inst.operands().first().copied() else { return None };
        let next = self.start(index)? as i64 + i64::from(inst.len);
        let target = next + i64::from(imm as u16 as i16);
        self.index_at(usize::try_from(target).ok()?)
    }
}
