/* Modules whose metadata note cannot be read, and images whose headers do not add up.

   argv[1] is the emulator's gfx90a fixture. A copy with its `amdhsa.kernels` key renamed still
   loads (the kernel descriptors are intact), but no kernel of it has a known argument layout:
   a launch through kernelParams (or with no arguments) must fail with hipErrorInvalidKernelFile
   and never run the kernel over a zeroed argument segment, while a launch through `extra` (a
   ready buffer) still runs. ELF headers whose table arithmetic wraps, or whose entries are
   smaller than an ELF64 record, are hipErrorInvalidImage. */
#include "check.h"

#include <stdint.h>

static char image[1 << 20], broken[1 << 20];

/* Renames the metadata's `amdhsa.kernels` key (same length, so the note stays well formed). */
static int break_metadata(char *buf, size_t len) {
    static const char key[] = "amdhsa.kernels";
    int found = 0;
    for (size_t i = 0; i + sizeof key - 1 <= len; i++) {
        if (memcmp(buf + i, key, sizeof key - 1) == 0) {
            buf[i + sizeof key - 2] = 'z';
            found++;
        }
    }
    return found;
}

static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }

/* A 64-byte ELF64 header followed by one 64-byte section header. */
static unsigned char hdr[128];
static void elf_header(void) {
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, "\x7f" "ELF", 4);
    hdr[4] = 2; /* ELFCLASS64 */
    hdr[5] = 1; /* little endian */
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: module_metadata CODE_OBJECT\n"); return 2; }
    FILE *f = fopen(argv[1], "rb");
    TRUE(f != NULL);
    size_t len = fread(image, 1, sizeof image, f);
    fclose(f);
    TRUE(len > 0 && len < sizeof image);
    memcpy(broken, image, len);
    TRUE(break_metadata(broken, len) > 0);

    hipStream_t s;
    OK(hipStreamCreate(&s));
    enum { N = 512 };
    unsigned *ua, *ub, *uc, hu[N];
    OK(hipMalloc((void **)&ua, N * 4));
    OK(hipMalloc((void **)&ub, N * 4));
    OK(hipMalloc((void **)&uc, N * 4));
    OK(hipMemset(ua, 0, N * 4));
    unsigned value = 9, count = N;
    void *fill_args[] = {&ua, &value, &count};

    /* The intact image: its layout is known and kernelParams work. */
    hipModule_t good, bad;
    hipFunction_t fill, bad_fill, bad_add;
    OK(hipModuleLoadData(&good, image));
    OK(hipModuleGetFunction(&fill, good, "fill_u32"));
    OK(hipModuleLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, s, fill_args, NULL));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(hu, ua, sizeof hu, hipMemcpyDeviceToHost));
    TRUE(hu[0] == 9 && hu[N - 1] == 9);

    /* HIP 5.2 aborts the process when a kernel's metadata is missing ("Cannot find Symbol"). */
    if (!expect_hip52()) {
        /* The image without readable metadata: kernelParams cannot be laid out. */
        OK(hipModuleLoadData(&bad, broken));
        OK(hipModuleGetFunction(&bad_fill, bad, "fill_u32"));
        OK(hipModuleGetFunction(&bad_add, bad, "vector_add"));
        value = 5;
        EXPECT(hipModuleLaunchKernel(bad_fill, N / 256, 1, 1, 256, 1, 1, 0, s, fill_args, NULL),
               hipErrorInvalidKernelFile);
        EXPECT(hipModuleLaunchKernel(bad_fill, N / 256, 1, 1, 256, 1, 1, 0, s, NULL, NULL), hipErrorInvalidKernelFile);
        OK(hipStreamSynchronize(s));
        OK(hipStreamQuery(s));
        OK(hipMemcpy(hu, ua, sizeof hu, hipMemcpyDeviceToHost));
        TRUE(hu[0] == 9 && hu[N - 1] == 9); /* the failed launches ran nothing */

        /* `extra` carries its own layout, so that launch still runs: c = a + b. */
        OK(hipMemset(ub, 0, N * 4));
        struct { unsigned *a, *b, *c; unsigned n; } packed = {ua, ub, uc, N};
        size_t packed_size = sizeof packed;
        void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &packed, HIP_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                         HIP_LAUNCH_PARAM_END};
        OK(hipModuleLaunchKernel(bad_add, N / 64, 1, 1, 64, 1, 1, 0, s, NULL, extra));
        OK(hipStreamSynchronize(s));
        OK(hipMemcpy(hu, uc, sizeof hu, hipMemcpyDeviceToHost));
        TRUE(hu[0] == 9 && hu[N - 1] == 9);
        OK(hipModuleUnload(bad));
    }
    OK(hipModuleUnload(good));

    /* HIP 5.2 reads through ELF header fields that wrap (the process crashes). */
    if (!expect_hip52()) {
        /* Header arithmetic: a section table whose end wraps past 2^64. */
        hipModule_t m;
        elf_header();
        put64(hdr + 0x28, UINT64_MAX - 100); /* e_shoff */
        put16(hdr + 0x3a, 64);               /* e_shentsize */
        put16(hdr + 0x3c, 4);                /* e_shnum */
        EXPECT(hipModuleLoadData(&m, hdr), hipErrorInvalidImage);
        /* Program header entries smaller than an ELF64 program header. */
        elf_header();
        put64(hdr + 0x20, 64); /* e_phoff */
        put16(hdr + 0x36, 8);  /* e_phentsize */
        put16(hdr + 0x38, 1);  /* e_phnum */
        EXPECT(hipModuleLoadData(&m, hdr), hipErrorInvalidImage);
        /* A section whose sh_offset + sh_size wraps. */
        elf_header();
        put64(hdr + 0x28, 64); /* e_shoff */
        put16(hdr + 0x3a, 64);
        put16(hdr + 0x3c, 1);
        hdr[64 + 4] = 1;                     /* SHT_PROGBITS */
        put64(hdr + 64 + 0x18, UINT64_MAX);  /* sh_offset */
        put64(hdr + 64 + 0x20, 2);           /* sh_size */
        EXPECT(hipModuleLoadData(&m, hdr), hipErrorInvalidImage);
    }

    OK(hipFree(ua));
    OK(hipFree(ub));
    OK(hipFree(uc));
    OK(hipStreamDestroy(s));
    DONE("module_metadata");
}
