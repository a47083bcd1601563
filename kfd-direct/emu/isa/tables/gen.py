"""Turn the llvm-mc-15 probe sweep (db.json, from sweep.py) into Rust opcode tables.

Each row is a fact measured from the disassembler: mnemonic, which encoding fields are operands,
their register widths and how inline constants print for them."""
import json, re, sys
db90 = json.load(open(sys.argv[1]))
# The gfx940 sweep (tables/sweep.py gfx940), when given: its rows that differ from gfx90a's are
# appended after them, and each encoding gets a second opcode map (docs/isa.md §4).
db940 = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else None

def split_ops(rest):
    out, depth, cur = [], 0, ''
    for ch in rest:
        if ch in '([': depth += 1
        if ch in ')]': depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip()); cur = ''
        else: cur += ch
    if cur.strip(): out.append(cur.strip())
    return out

def parse(text):
    text = re.sub(r'/\*.*?\*/', '', text).strip()
    if ' ' not in text: return text, []
    name, rest = text.split(' ', 1)
    ops = split_ops(rest)
    if ops:
        # trailing modifiers follow the last operand after a space (not inside parens)
        last = ops[-1]
        if not last.startswith(('hwreg', 'sendmsg', 'gpr_idx', 'vmcnt', 'expcnt', 'lgkmcnt')):
            ops[-1] = last.split(' ')[0]
    return name, ops

REG = re.compile(r'^(-?\|?)([vsa])(?:(\d+)|\[(\d+):(\d+)\])\|?$')
def reg(tok):
    m = REG.match(tok)
    if not m: return None
    cls = m.group(2)
    if m.group(3) is not None: return cls, int(m.group(3)), 1
    lo, hi = int(m.group(4)), int(m.group(5))
    return cls, lo, hi - lo + 1

def slot(field, width, cls, ty): return (field, width, cls, ty)

def pick(d, names):
    for n in names:
        if n in d: return n, d[n]
    return None, None

def const_ty(ctok, width, lit_ok, name):
    if width == 2: return 'F64' if 'f64' in name else 'B64'
    if width != 1: return 'B32'
    if ctok == '0x3c00': return 'I16'
    if ctok == '1.0' and not lit_ok: return 'F16'
    if ctok is None and not lit_ok:
        # No constant probe: the source type is the last type suffix (v_cvt_<dst>_<src>).
        sufs = re.findall(r'_([fiub])(16|32|64)', name)
        if sufs and sufs[-1][1] == '16': return 'F16' if sufs[-1][0] == 'f' else 'I16'
    return 'B32'

def vop(enc, code, d):
    fmap = {10: 'D', 20: 'S0', 30: 'S1', 40: 'S2', 50: 'SD'}
    if enc in ('VOP3', 'VOP3P'):
        k, t = None, None
        for n in (3, 2, 1, 0):
            k, t = pick(d, ['b%d' % n, 'r%d' % n, 's%d' % n])
            if t: 
                # prefer the b probe only to learn about SD; fields come from r or s
                rk, rt = pick(d, ['r%d' % n, 's%d' % n])
                bt = d.get('b%d' % n)
                break
        if not t:
            k, t = pick(d, ['z']); rt = t; bt = None; n = 0
        if not t: return None
        name, ops = parse(rt)
        ctext = d.get('c%d' % n); cops = parse(ctext)[1] if ctext else []
        bops = parse(bt)[1] if bt else []
        is_b = any(reg(o) and reg(o)[1] == 50 for o in bops)
        slots = []
        srcs = ['S0', 'S1', 'S2']
        si = 0
        for i, o in enumerate(ops):
            r = reg(o)
            if r is None:
                if o == 'vcc': slots.append(slot('VCC', 2, 'S', 'B64')); continue
                raise Exception((enc, code, rt))
            cls, n_, w = r
            if i == 0 and not (name.startswith('v_cmp') and cls == 's' and False):
                slots.append(slot('D', w, cls.upper(), 'B32')); continue
            if is_b and i == 1:
                slots.append(slot('SD', w, 'S', 'B64')); continue
            f = srcs[si]; si += 1
            ci = len(slots)
            ctok = cops[ci] if ci < len(cops) else None
            ty = const_ty(ctok, w, True, name)
            if enc == 'VOP3P' and w == 2: ty = 'B32'  # packed f32: constants are per 32-bit half
            cls_ = 'A' if cls == 'a' and name.startswith('v_accvgpr') else 'X'
            slots.append(slot(f, w, cls_, ty))
        flags = []
        for i in range(n):
            nt = d.get('n%d_%d' % (n, i)) or ''
            at = d.get('a%d_%d' % (n, i)) or ''
            if '|' in at or '-' in nt or 'neg(' in nt or 'sext(' in nt:
                flags.append('MODS_SRC%d' % i)
        if any(f.startswith('MODS_SRC') for f in flags): flags.append('SRC_MODS')
        ot = d.get('o%d' % n)
        if ot and 'op_sel' in ot: flags.append('OPSEL')
        return name, slots, flags
    # VOP1 / VOP2 / VOPC (e32)
    k, t = pick(d, ['r', 'k', 'z', 's'])
    if not t: return None
    name, ops = parse(t)
    cops = parse(d['c'])[1] if 'c' in d else []
    lit_ok = 'l' in d
    slots = []
    for i, o in enumerate(ops):
        r = reg(o)
        if o == 'vcc': slots.append(slot('VCC', 2, 'S', 'B64')); continue
        if o.startswith('0x'): slots.append(slot('K', 1, 'K', 'B32')); continue
        cls, n_, w = r
        f = {'VOP1': {10: 'D', 20: 'S0', 0: 'S0'}, 'VOP2': {10: 'D', 20: 'S0', 30: 'S1', 0: 'S0'},
             'VOPC': {20: 'S0', 30: 'S1'}}[enc].get(n_)
        if k == 'z': f = ['D', 'S0'][i]
        if f is None: raise Exception((enc, code, t))
        if f == 'D': slots.append(slot('D', w, cls.upper(), 'B32')); continue
        if f == 'S1': slots.append(slot('S1', w, 'A' if cls == 'a' else 'V', 'B32')); continue
        ctok = cops[i] if i < len(cops) else None
        sops = parse(d['s'])[1] if 's' in d else []
        vgpr_only = i < len(sops) and sops[i].startswith('v')
        slots.append(slot('S0', w, 'A' if cls == 'a' else ('V' if vgpr_only else 'X'), const_ty(ctok, w, lit_ok, name)))
    flags = []
    if 'dpp' in d: flags.append('DPP')
    if 'sdwa' in d: flags.append('SDWA')
    return name, slots, flags

def scalar(enc, code, d):
    if enc == 'SOP2' and code >= 0x60: return None
    if enc == 'SOPK' and code >= 0x1c: return None
    if enc == 'SOPP':
        k, t = pick(d, ['r', 'z'])
        if not t: return None
        name = parse(d.get('z') or t)[0]
        zt = d.get('z'); rt = d.get('r')
        if name == 's_waitcnt': ty = 'WAITCNT'
        elif name.startswith('s_sendmsg'): ty = 'SENDMSG'
        elif name == 's_set_gpr_idx_mode': ty = 'GPRIDX'
        elif name == 's_endpgm': ty = 'OPT16'
        elif name.startswith('s_branch') or name.startswith('s_cbranch'): ty = 'BRANCH'
        elif rt is None and name != 's_nop': ty = None
        else: ty = 'IMM16'
        slots = [slot('SIMM16', 1, 'K', ty)] if ty else []
        return name, slots, []
    if enc == 'SOPK':
        k, t = pick(d, ['r'])
        if code == 0x14: t = d.get('l') or d.get('l0')
        if not t: return None
        name, ops = parse(t)
        slots = []
        for o in ops:
            r = reg(o)
            if r: slots.append(slot('D', r[2], 'S', 'B32')); continue
            if o.startswith('hwreg'): slots.append(slot('SIMM16', 1, 'K', 'HWREG')); continue
            if o == '0x5678': slots.append(slot('K', 1, 'K', 'B32')); continue
            if o == '0x1234': slots.append(slot('SIMM16', 1, 'K', 'HEX16')); continue
            if o == '4660': slots.append(slot('SIMM16', 1, 'K', 'BRANCH')); continue
            raise Exception((enc, code, t))
        return name, slots, []
    k, t = pick(d, ['r'])
    if enc == 'SOP1' and code not in (0x1c,) : k, t = pick(d, ['r'])
    if enc == 'SOP1' and code == 0x1c: t = d.get('r')
    if not t: return None
    name, ops = parse(t)
    fm = {'SOP2': {10: 'D', 20: 'S0', 30: 'S1'}, 'SOP1': {10: 'D', 20: 'S0'}, 'SOPC': {20: 'S0', 30: 'S1'}}[enc]
    slots = []
    for o in ops:
        r = reg(o)
        if r is None:
            if o == '0x1e': slots.append(slot('S1', 1, 'K', 'IMM8')); continue
            raise Exception((enc, code, t))
        f = fm[r[1]]
        slots.append(slot(f, r[2], 'S' if f == 'D' else 'X', 'B64' if r[2] == 2 else 'B32'))
    return name, slots, []

def smem(code, d):
    k, t = pick(d, ['i11', 's11', 'i10', 's10', 'z', 's00'])
    if not t: return None
    name, ops = parse(t)
    slots = []
    fl = []
    regs = [reg(o) for o in ops]
    if len(ops) == 1: slots.append(slot('D', regs[0][2], 'S', 'B32'))
    elif len(ops) == 2: slots += [slot('SBASE', regs[0][2], 'S', 'B32'), slot('OFFSET', 1, 'K', 'B32')]
    elif len(ops) == 3:
        slots.append(slot('D', regs[0][2], 'S', 'B32') if regs[0] else slot('D', 1, 'K', 'IMM7'))
        slots += [slot('SBASE', regs[1][2], 'S', 'B32'), slot('OFFSET', 1, 'K', 'B32')]
    if 'i11' not in d and 'i10' not in d and 'i01' not in d: fl.append('NO_IMM')
    return name, slots, fl

def ds(code, d):
    best = None
    for a in (1, 0):
      for d0 in (1, 0):
        for d1 in (1, 0):
          for v in (1, 0):
            key = 'r%d%d%d%d' % (a, d0, d1, v)
            if key in d:
                cnt = a + d0 + d1 + v
                if best is None or cnt > best[0]: best = (cnt, key)
    if not best: return None
    t = d[best[1]]
    name, ops = parse(t)
    ot = d.get('o' + best[1][1:]) or ''
    two = 'offset0' in ot
    slots = []
    m = {10: 'ADDR', 20: 'DATA0', 30: 'DATA1', 40: 'D'}
    for o in ops:
        r = reg(o)
        if r is None: raise Exception(('DS', code, t))
        f = m.get(r[1])
        if f is None: raise Exception(('DS', code, t))
        slots.append(slot(f, r[2], 'V', 'B32'))
    fl = ['TWO_OFFSETS'] if two else []
    if 'gds' in t: fl.append('GDS_ONLY')
    return name, slots, fl

def flat(seg, code, d):
    pref = {0: 'f', 1: 'r', 2: 'r'}[seg]
    best = None
    for key, t in d.items():
        if key[0] != pref: continue
        cnt = sum(int(c) for c in key[1:])
        if best is None or cnt > best[0]: best = (cnt, key)
    if not best: return None
    t = d[best[1]]
    name, ops = parse(t)
    slots = []
    for o in ops:
        r = reg(o)
        if o == 'off': continue
        f = {10: 'ADDR', 20: 'DATA', 30: 'D', 0: None}.get(r[1])
        if f is None: continue
        slots.append(slot(f, r[2], 'V', 'B32'))
    fl = []
    if seg == 2 and not any(k.startswith('s') for k in d): fl.append('NO_SADDR')
    return name, slots, fl

def mubuf(enc, code, d):
    k, t = pick(d, ['r1', 'r0', 'r', 'z'])
    if not t: return None
    name, ops = parse(t)
    slots = []
    for o in ops:
        r = reg(o)
        if r is None: continue
        if r[0] == 'v' and r[1] == 20: slots.append(slot('VDATA', r[2], 'V', 'B32'))
    fl = [] if k != 'r0' else []
    if len(ops) == 0: fl.append('NO_ADDR')
    return name, slots, fl

def mimg(code, d):
    t = d.get('sf') or d.get('nf')
    if not t: return None
    name, ops = parse(t)
    fl = []
    if 'sf' in d: fl.append('MIMG_SAMPLER')
    if 'atomic' in name: fl.append('MIMG_ATOMIC')
    return name, [slot('DATA0', 4, 'V', 'B32'), slot('ADDR', 1, 'V', 'B32')], fl

order = ['SOP2', 'SOPK', 'SOP1', 'SOPC', 'SOPP', 'SMEM', 'VOP1', 'VOP2', 'VOPC', 'VOP3', 'VOP3P', 'DS', 'FLAT0', 'FLAT1', 'FLAT2', 'MUBUF', 'MTBUF', 'MIMG']
def build(db):
    rows = []
    for enc in order:
        for code in sorted(db.get(enc, {}), key=int):
            d = db[enc][code]; c = int(code)
            if enc in ('SOP2', 'SOPK', 'SOP1', 'SOPC', 'SOPP'): r = scalar(enc, c, d)
            elif enc == 'SMEM': r = smem(c, d)
            elif enc in ('VOP1', 'VOP2', 'VOPC', 'VOP3', 'VOP3P'): r = vop(enc, c, d)
            elif enc == 'DS': r = ds(c, d)
            elif enc.startswith('FLAT'): r = flat(int(enc[4]), c, d)
            elif enc == 'MIMG': r = mimg(c, d)
            else: r = mubuf(enc, c, d)
            if r is None: continue
            name, slots, flags = r
            if enc == 'VOP3P' and name.startswith(('v_mfma', 'v_smfmac')):
                t = d.get('a')
                n2, ops = parse(t)
                slots = []
                for f, o in zip(['D', 'S0', 'S1', 'S2'], ops):
                    rr = reg(o); slots.append(slot(f, rr[2], 'X' if f != 'D' else 'V', 'B32'))
                flags = flags + ['MAI']
            rows.append((enc, c, name, slots, flags))
    return rows

encname = {'FLAT0': 'Flat', 'FLAT1': 'Scratch', 'FLAT2': 'Global', 'SOP2': 'Sop2', 'SOPK': 'Sopk', 'SOP1': 'Sop1', 'SOPC': 'Sopc', 'SOPP': 'Sopp', 'SMEM': 'Smem', 'VOP1': 'Vop1', 'VOP2': 'Vop2', 'VOPC': 'Vopc', 'VOP3': 'Vop3', 'VOP3P': 'Vop3p', 'DS': 'Ds', 'MUBUF': 'Mubuf', 'MTBUF': 'Mtbuf', 'MIMG': 'Mimg'}
fieldname = {'D': 'Dst', 'SD': 'Sdst', 'S0': 'Src0', 'S1': 'Src1', 'S2': 'Src2', 'VCC': 'Vcc', 'K': 'Literal', 'SIMM16': 'Simm16', 'SBASE': 'Sbase', 'OFFSET': 'Offset', 'ADDR': 'Addr', 'DATA0': 'Data0', 'DATA1': 'Data1', 'DATA': 'Data0', 'VDATA': 'Data0'}
clsname = {'V': 'Vgpr', 'S': 'Scalar', 'A': 'Agpr', 'X': 'Any', 'K': 'Imm'}
tyname = {'B32': 'B32', 'B64': 'B64', 'F64': 'F64', 'F16': 'F16', 'I16': 'I16', 'WAITCNT': 'Waitcnt', 'SENDMSG': 'Sendmsg', 'GPRIDX': 'GprIdxMode', 'OPT16': 'Optional16', 'BRANCH': 'Branch', 'IMM16': 'Imm16', 'HWREG': 'Hwreg', 'IMM8': 'Imm8', 'IMM7': 'Imm7', 'HEX16': 'Hex16'}
sizes = {'SOP2': 128, 'SOPK': 32, 'SOP1': 256, 'SOPC': 128, 'SOPP': 128, 'SMEM': 256, 'VOP1': 256, 'VOP2': 64, 'VOPC': 256, 'VOP3': 1024, 'VOP3P': 128, 'DS': 256, 'FLAT0': 128, 'FLAT1': 128, 'FLAT2': 128, 'MUBUF': 128, 'MTBUF': 16, 'MIMG': 128}
rows = build(db90)
key90 = {(r[0], r[1]): i for i, r in enumerate(rows)}
map940 = None
if db940 is not None:
    map940 = {}
    for r in build(db940):
        k = (r[0], r[1])
        i = key90.get(k)
        same = i is not None and rows[i] == r
        # gfx940's scratch rows print no vaddr without the SVE bit, which the decoder reads; the
        # slots are gfx90a's (docs/isa.md §2 "CDNA3").
        if i is not None and r[0] == 'FLAT1' and rows[i][2] == r[2]: same = True
        if r[0] == 'FLAT1' and not any(sl[0] == 'ADDR' for sl in r[3]):
            at = 1 if r[3] and r[3][0][0] == 'D' else 0
            r = (r[0], r[1], r[2], r[3][:at] + [slot('ADDR', 1, 'V', 'B32')] + r[3][at:], r[4])
        if not same:
            rows.append(r); i = len(rows) - 1
        map940[k] = i
o = []
o.append('// @generated by tables/gen.py from llvm-mc-15 sweeps (tables/sweep.py); see docs/isa.md §4.')
o.append('// Do not edit by hand: rerun tables/sweep.py and tables/gen.py as docs/isa.md §4 says.')
o.append('')
o.append('use crate::spec::{Class::*, Field::*, OpSpec, Slot, Ty::*};')
o.append('use crate::Encoding;')
o.append('')
o.append('const fn s(field: crate::spec::Field, width: u8, class: crate::spec::Class, ty: crate::spec::Ty) -> Slot {')
o.append('    Slot { field, width, class, ty }')
o.append('}')
o.append('')
o.append('/// Every opcode the tables know, in encoding order: gfx90a\'s rows, then the gfx940 rows that differ')
o.append('/// from them; an [`crate::Op`] indexes this array.')
o.append('pub(crate) static OPS: [OpSpec; %d] = [' % len(rows))
for i, (enc, c, name, slots, flags) in enumerate(rows):
    sl = ', '.join('s(%s, %d, %s, %s)' % (fieldname.get(f, f), w, clsname[cl], tyname[ty]) for f, w, cl, ty in slots)
    fl = ' | '.join('crate::spec::%s' % f for f in flags) or '0'
    o.append('    OpSpec { name: "%s", enc: Encoding::%s, code: 0x%x, slots: &[%s], flags: %s },' % (name, encname[enc], c, sl, fl))
o.append('];')
o.append('')
o.append('/// The number of gfx90a rows at the start of [`OPS`].')
o.append('#[cfg(test)]')
o.append('pub(crate) const GFX90A_ROWS: usize = %d;' % len(key90))
o.append('')
def emit(prefix, suffix, m, what):
    for enc in order:
        n = sizes[enc]
        arr = [m.get((enc, c), 0xffff) for c in range(n)]
        o.append('/// %s opcode field → index into [`OPS`] for %s (`u16::MAX`: no such opcode).' % (what, encname[enc]))
        o.append('pub(crate) static %s%s_MAP%s: [u16; %d] = [' % (prefix, enc, suffix, n))
        for i in range(0, n, 16):
            o.append('    ' + ', '.join(str(x) if x != 0xffff else 'N' for x in arr[i:i+16]) + ',')
        o.append('];')
emit('', '', key90, 'gfx90a:')
if map940 is not None:
    emit('', '_GFX940', map940, 'gfx940:')
o.insert(4, 'const N: u16 = u16::MAX;')
print('\n'.join(o))
print(len(rows), file=sys.stderr)
