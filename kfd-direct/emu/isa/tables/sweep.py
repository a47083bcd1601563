import subprocess, json, sys, re
# The target is the first argument (gfx90a, the default, or gfx940); the answers go to db.json
# for gfx90a and db-<target>.json otherwise (docs/isa.md §4).
MCPU = sys.argv[1] if len(sys.argv) > 1 else 'gfx90a'
OUT = 'db.json' if MCPU == 'gfx90a' else 'db-%s.json' % MCPU
MC=['llvm-mc-15','-disassemble','-show-encoding','-triple=amdgcn-amd-amdhsa','-mcpu=' + MCPU]
def run1(words_list):
    lines=[]
    def enc(ws):
        b=[]
        for w in ws: b+= [(w>>(8*i))&0xff for i in range(4)]
        return ' '.join('0x%02x'%x for x in b)
    for i,ws in enumerate(words_list):
        lines.append(enc(ws)); lines.append(enc([0xBF800000|(i+1)]))
    p=subprocess.run(MC,input='\n'.join(lines)+'\n',capture_output=True,text=True)
    if p.returncode!=0: return None
    res={}; cur=[]; 
    for l in p.stdout.splitlines():
        m=re.match(r'\s*(.*?)\s*; encoding: \[(.*)\]',l)
        if not m: continue
        t=m.group(1)
        mm=re.match(r's_nop (0x[0-9a-f]+|\d+)$',t)
        if mm and int(mm.group(1),0)>=1 and int(mm.group(1),0)<=len(words_list) and not cur is None:
            i=int(mm.group(1),0)-1
            if len(cur)==1 and cur[0][1]==4*len(words_list[i]): res[tuple(words_list[i])]=cur[0][0]
            cur=[]
        else: cur.append((t,len(m.group(2).split(','))))
    return res
def run(wl):
    if not wl: return {}
    r=run1(wl)
    if r is not None: return r
    if len(wl)==1:
        print('crash',[hex(x) for x in wl[0]]); return {}
    h=len(wl)//2
    a=run(wl[:h]); a.update(run(wl[h:])); return a
def runc(wl):
    out={}
    for i in range(0,len(wl),512): out.update(run(wl[i:i+512]))
    return out
probes={}
def add(enc,op,probe,ws): probes.setdefault(enc,[]).append((op,probe,tuple(ws)))
import itertools
def subsets(n):
    return list(itertools.product([0,1],repeat=n))
for op in range(128):
    add('SOP2',op,'r',[2<<30|op<<23|10<<16|30<<8|20])
    add('SOPC',op,'r',[0x17E<<23|op<<16|30<<8|20])
    add('SOPP',op,'r',[0x17F<<23|op<<16|0x0012])
    add('SOPP',op,'z',[0x17F<<23|op<<16|0])
for op in range(32):
    add('SOPK',op,'r',[0xB<<28|op<<23|10<<16|0x1234])
    add('SOPK',op,'l',[0xB<<28|op<<23|10<<16|0x1234, 0x5678])
    add('SOPK',op,'l0',[0xB<<28|op<<23|0x1234, 0x5678])
for op in range(256):
    add('SOP1',op,'r',[0x17D<<23|10<<16|op<<8|20])
    add('SOP1',op,'z',[0x17D<<23|0<<16|op<<8|0])
    add('SOP1',op,'d',[0x17D<<23|10<<16|op<<8|0])
    add('SOP1',op,'s',[0x17D<<23|0<<16|op<<8|20])
    for d,b in subsets(2):
        add('SMEM',op,'i%d%d'%(d,b),[0x30<<26|op<<18|1<<17|(10*d)<<6|(10*b), 0x40])
        add('SMEM',op,'s%d%d'%(d,b),[0x30<<26|op<<18|0<<17|(10*d)<<6|(10*b), 30])
    add('SMEM',op,'z',[0x30<<26|op<<18|1<<17, 0])
    add('VOP1',op,'r',[0x3F<<25|10<<17|op<<9|(256+20)])
    add('VOP1',op,'z',[0x3F<<25|op<<9])
    add('VOP1',op,'s',[0x3F<<25|10<<17|op<<9|20])
    add('VOP1',op,'c',[0x3F<<25|10<<17|op<<9|242])
    add('VOP1',op,'l',[0x3F<<25|10<<17|op<<9|255, 0x3ff00000])
    add('VOPC',op,'r',[0x3E<<25|op<<17|30<<9|(256+20)])
    add('VOPC',op,'c',[0x3E<<25|op<<17|30<<9|242])
    add('VOPC',op,'l',[0x3E<<25|op<<17|30<<9|255, 0x3ff00000])
for op in range(256):
    D=20|0x111<<8|0xf<<24|0xf<<28
    S=20|6<<8|2<<11|6<<16|6<<24
    add('VOP1',op,'dpp',[0x3F<<25|10<<17|op<<9|0xFA, D])
    add('VOP1',op,'sdwa',[0x3F<<25|10<<17|op<<9|0xF9, 20|6<<8|2<<11|6<<16])
    add('VOPC',op,'dpp',[0x3E<<25|op<<17|30<<9|0xFA, D])
    add('VOPC',op,'sdwa',[0x3E<<25|op<<17|30<<9|0xF9, S])
    add('VOPC',op,'sdwa2',[0x3E<<25|op<<17|30<<9|0xF9, S|(1<<15)|(50<<8)])
for op in range(64):
    add('VOP2',op,'dpp',[op<<25|10<<17|30<<9|0xFA, D])
    add('VOP2',op,'sdwa',[op<<25|10<<17|30<<9|0xF9, S])
    add('VOP2',op,'r',[op<<25|10<<17|30<<9|(256+20)])
    add('VOP2',op,'s',[op<<25|10<<17|30<<9|20])
    add('VOP2',op,'c',[op<<25|10<<17|30<<9|242])
    add('VOP2',op,'l',[op<<25|10<<17|30<<9|255, 0x3ff00000])
    add('VOP2',op,'k',[op<<25|10<<17|30<<9|(256+20), 0x3ff00000])
SRC=[(256+20),(256+30)<<9,(256+40)<<18]
SSRC=[20,30<<9,40<<18]
CSRC=[242,242<<9,242<<18]
for op in range(0x380):
  for n in range(4):
    add('VOP3',op,'r%d'%n,[0x34<<26|op<<16|10, sum(SRC[:n])])
    add('VOP3',op,'s%d'%n,[0x34<<26|op<<16|10, sum(SSRC[:n])])
    add('VOP3',op,'c%d'%n,[0x34<<26|op<<16|10, sum(CSRC[:n])])
    add('VOP3',op,'b%d'%n,[0x34<<26|op<<16|50<<8|10, sum(SRC[:n])])
    for i in range(n):
      add('VOP3',op,'a%d_%d'%(n,i),[0x34<<26|op<<16|1<<(8+i)|10, sum(SRC[:n])])
      add('VOP3',op,'n%d_%d'%(n,i),[0x34<<26|op<<16|10, sum(SRC[:n])|1<<(29+i)])
    add('VOP3',op,'o%d'%n,[0x34<<26|op<<16|1<<11|10, sum(SRC[:n])])
  add('VOP3',op,'z',[0x34<<26|op<<16, 0])
MSRC=[(256+64),(256+96)<<9,(256+128)<<18]
for op in range(128):
  for n in range(4):
    add('VOP3P',op,'r%d'%n,[0x1A7<<23|op<<16|1<<14|10, sum(SRC[:n])|3<<27])
    add('VOP3P',op,'c%d'%n,[0x1A7<<23|op<<16|1<<14|10, sum(CSRC[:n])|3<<27])
    add('VOP3P',op,'s%d'%n,[0x1A7<<23|op<<16|1<<14|10, sum(SSRC[:n])|3<<27])
  add('VOP3P',op,'m',[0x1A7<<23|op<<16|32, sum(MSRC)])
  add('VOP3P',op,'a',[0x1A7<<23|op<<16|1<<15|32, sum(MSRC)])
for op in range(256):
  for a,d0,d1,v in subsets(4):
    f=10*a|(20*d0)<<8|(30*d1)<<16|(40*v)<<24
    add('DS',op,'r%d%d%d%d'%(a,d0,d1,v),[0x36<<26|op<<17, f])
    add('DS',op,'o%d%d%d%d'%(a,d0,d1,v),[0x36<<26|op<<17|8<<8|4, f])
for op in range(128):
  for seg in range(3):
    for a,d,v in subsets(3):
      add('FLAT%d'%seg,op,'r%d%d%d'%(a,d,v),[0x37<<26|op<<18|seg<<14|16, 10*a|(20*d)<<8|0x7f<<16|(30*v)<<24])
      add('FLAT%d'%seg,op,'f%d%d%d'%(a,d,v),[0x37<<26|op<<18|seg<<14|16, 10*a|(20*d)<<8|(30*v)<<24])
      add('FLAT%d'%seg,op,'s%d%d%d'%(a,d,v),[0x37<<26|op<<18|seg<<14|16, 10*a|(20*d)<<8|40<<16|(30*v)<<24])
  add('MUBUF',op,'z',[0x38<<26|op<<18, 0])
  for d in range(2):
    add('MUBUF',op,'r%d'%d,[0x38<<26|op<<18|1<<12|16, 10|(20*d)<<8|2<<16|12<<24])
    add('MUBUF',op,'n%d'%d,[0x38<<26|op<<18|16, (20*d)<<8|2<<16|12<<24])
for op in range(128):
  for dm in (0xf, 0x1, 0x3):
    add('MIMG',op,'s%x'%dm,[0x3C<<26 | op<<18 | dm<<8, 10 | 20<<8 | 2<<16 | 3<<21])
    add('MIMG',op,'n%x'%dm,[0x3C<<26 | op<<18 | dm<<8, 10 | 20<<8 | 2<<16])
for op in range(16):
  add('MTBUF',op,'r',[0x3A<<26|4<<19|4<<23|op<<15|1<<12|16, 10|20<<8|2<<16|12<<24])
db={}
for enc,lst in probes.items():
    res=runc([w for _,_,w in lst])
    for op,pr,w in lst:
        if w in res:
            db.setdefault(enc,{}).setdefault(str(op),{})[pr]=res[w]
json.dump(db,open(OUT,'w'),indent=0,sort_keys=True)
for enc in db: print(enc,len(db[enc]))
