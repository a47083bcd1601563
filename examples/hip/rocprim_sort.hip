// A hipcc program that sorts, scans and reduces with rocPRIM (Debian's librocprim-dev): a radix
// sort of 64 Ki keys, an inclusive scan and a sum of their low bytes, checked on the host. Its code object holds
// rocPRIM's radix-sort, scan and reduce kernels (more than 32).
// Build: hipcc -std=c++17 --offload-arch=gfx90a rocprim_sort.hip -o rocprim_sort
#include <hip/hip_runtime.h>
#include <rocprim/rocprim.hpp>

#include <cstdio>
#include <vector>

#define CHECK(call)                                                                   \
    do {                                                                              \
        hipError_t e_ = (call);                                                       \
        if (e_ != hipSuccess) {                                                       \
            std::fprintf(stderr, "%s: %s\n", #call, hipGetErrorName(e_));            \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

int main() {
    const size_t n = 1 << 16;
    std::vector<unsigned> keys(n);
    for (size_t i = 0; i < n; i++) keys[i] = unsigned(i * 2654435761u) ^ 0x5bd1e995u;
    unsigned *in = nullptr, *out = nullptr;
    CHECK(hipMalloc(&in, n * sizeof(unsigned)));
    CHECK(hipMalloc(&out, n * sizeof(unsigned)));
    CHECK(hipMemcpy(in, keys.data(), n * sizeof(unsigned), hipMemcpyHostToDevice));
    size_t temp_bytes = 0;
    CHECK(rocprim::radix_sort_keys(nullptr, temp_bytes, in, out, n));
    void* temp = nullptr;
    CHECK(hipMalloc(&temp, temp_bytes));
    CHECK(rocprim::radix_sort_keys(temp, temp_bytes, in, out, n));
    CHECK(hipDeviceSynchronize());
    std::vector<unsigned> sorted(n);
    CHECK(hipMemcpy(sorted.data(), out, n * sizeof(unsigned), hipMemcpyDeviceToHost));
    for (size_t i = 1; i < n; i++) {
        if (sorted[i - 1] > sorted[i]) {
            std::fprintf(stderr, "not sorted at %zu: %u > %u\n", i, sorted[i - 1], sorted[i]);
            return 1;
        }
    }
    // Inclusive prefix sum of the sorted keys' low bytes.
    std::vector<unsigned> low(n);
    for (size_t i = 0; i < n; i++) low[i] = sorted[i] & 0xff;
    CHECK(hipMemcpy(in, low.data(), n * sizeof(unsigned), hipMemcpyHostToDevice));
    size_t scan_bytes = 0;
    CHECK(rocprim::inclusive_scan(nullptr, scan_bytes, in, out, n, rocprim::plus<unsigned>()));
    void* scan_temp = nullptr;
    CHECK(hipMalloc(&scan_temp, scan_bytes));
    CHECK(rocprim::inclusive_scan(scan_temp, scan_bytes, in, out, n, rocprim::plus<unsigned>()));
    std::vector<unsigned> sums(n);
    CHECK(hipMemcpy(sums.data(), out, n * sizeof(unsigned), hipMemcpyDeviceToHost));
    unsigned running = 0;
    for (size_t i = 0; i < n; i++) {
        running += low[i];
        if (sums[i] != running) {
            std::fprintf(stderr, "scan wrong at %zu: %u, expected %u\n", i, sums[i], running);
            return 1;
        }
    }
    // The sum of the low bytes, reduced on the device: the scan's last element.
    unsigned* total = nullptr;
    CHECK(hipMalloc(&total, sizeof(unsigned)));
    size_t reduce_bytes = 0;
    CHECK(rocprim::reduce(nullptr, reduce_bytes, in, total, 0u, n, rocprim::plus<unsigned>()));
    void* reduce_temp = nullptr;
    CHECK(hipMalloc(&reduce_temp, reduce_bytes));
    CHECK(rocprim::reduce(reduce_temp, reduce_bytes, in, total, 0u, n, rocprim::plus<unsigned>()));
    unsigned sum = 0;
    CHECK(hipMemcpy(&sum, total, sizeof(unsigned), hipMemcpyDeviceToHost));
    if (sum != running) {
        std::fprintf(stderr, "reduce: %u, expected %u\n", sum, running);
        return 1;
    }
    CHECK(hipFree(reduce_temp));
    CHECK(hipFree(total));
    CHECK(hipFree(scan_temp));
    CHECK(hipFree(temp));
    CHECK(hipFree(out));
    CHECK(hipFree(in));
    std::printf("sorted, scanned and reduced %zu keys\n", n);
    return 0;
}
