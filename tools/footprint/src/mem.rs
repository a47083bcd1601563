//! The C memory routines a firmware image links (`memcpy`, `memmove`, `memset`, `memcmp` and
//! the ARM EABI's `__aeabi_mem*` entry points), written as byte loops for size, as a size-built
//! libc has them (newlib-nano's are of this kind).
//!
//! Without them the probe gets compiler-builtins' speed-tuned routines (about 3.3 KiB on this
//! target: a word-unrolled `memcpy`, a 1.5 KiB `memmove` and three copies of `memset`), which
//! are the toolchain's, not core's. These count in the probe's `.text` like core's own code
//! (`scripts/footprint`, `docs/architecture.md`, "Footprint"). Thumb-2 assembly, so the compiler
//! cannot turn a loop back into a call of the routine it implements.

core::arch::global_asm!(
    r#"
    .section .text.aqueduct_footprint_mem,"ax",%progbits
    .syntax unified
    .thumb

    @ void *memcpy(void *dst, const void *src, size_t n): forward, byte by byte.
    .global memcpy
    .global __aeabi_memcpy
    .global __aeabi_memcpy4
    .global __aeabi_memcpy8
    .type memcpy, %function
    .type __aeabi_memcpy, %function
    .type __aeabi_memcpy4, %function
    .type __aeabi_memcpy8, %function
    .thumb_func
memcpy:
    .thumb_func
__aeabi_memcpy:
    .thumb_func
__aeabi_memcpy4:
    .thumb_func
__aeabi_memcpy8:
    mov     ip, r0
1:  subs    r2, r2, #1
    itt     hs
    ldrbhs  r3, [r1], #1
    strbhs  r3, [ip], #1
    bhs     1b
    bx      lr
    .size memcpy, . - memcpy

    @ void *memmove(void *dst, const void *src, size_t n): forward when dst <= src (each byte
    @ is read before it can be overwritten), else backward from the end.
    .global memmove
    .global __aeabi_memmove
    .global __aeabi_memmove4
    .global __aeabi_memmove8
    .type memmove, %function
    .type __aeabi_memmove, %function
    .type __aeabi_memmove4, %function
    .type __aeabi_memmove8, %function
    .thumb_func
memmove:
    .thumb_func
__aeabi_memmove:
    .thumb_func
__aeabi_memmove4:
    .thumb_func
__aeabi_memmove8:
    cmp     r0, r1
    bls     memcpy
2:  subs    r2, r2, #1
    itt     hs
    ldrbhs  r3, [r1, r2]
    strbhs  r3, [r0, r2]
    bhs     2b
    bx      lr
    .size memmove, . - memmove

    @ void __aeabi_memset(void *dst, size_t n, int c) (EABI order), __aeabi_memclr(dst, n).
    .global __aeabi_memset
    .global __aeabi_memset4
    .global __aeabi_memset8
    .global __aeabi_memclr
    .global __aeabi_memclr4
    .global __aeabi_memclr8
    .type __aeabi_memset, %function
    .type __aeabi_memset4, %function
    .type __aeabi_memset8, %function
    .type __aeabi_memclr, %function
    .type __aeabi_memclr4, %function
    .type __aeabi_memclr8, %function
    .thumb_func
__aeabi_memclr:
    .thumb_func
__aeabi_memclr4:
    .thumb_func
__aeabi_memclr8:
    movs    r2, #0
    .thumb_func
__aeabi_memset:
    .thumb_func
__aeabi_memset4:
    .thumb_func
__aeabi_memset8:
    mov     r3, r1
    mov     r1, r2
    mov     r2, r3
    .size __aeabi_memclr, . - __aeabi_memclr

    @ void *memset(void *dst, int c, size_t n).
    .global memset
    .type memset, %function
    .thumb_func
memset:
    mov     ip, r0
3:  subs    r2, r2, #1
    it      hs
    strbhs  r1, [ip], #1
    bhs     3b
    bx      lr
    .size memset, . - memset

    @ int memcmp(const void *a, const void *b, size_t n), and bcmp.
    .global memcmp
    .global bcmp
    .type memcmp, %function
    .type bcmp, %function
    .thumb_func
memcmp:
    .thumb_func
bcmp:
4:  subs    r2, r2, #1
    blo     5f
    ldrb    r3, [r0], #1
    ldrb    ip, [r1], #1
    subs    r3, r3, ip
    beq     4b
    mov     r0, r3
    bx      lr
5:  movs    r0, #0
    bx      lr
    .size memcmp, . - memcmp
"#
);
