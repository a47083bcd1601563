/* A C program using Debian's rocSPARSE (librocsparse0) with its kernels as shipped: a handle
   (rocSPARSE runs its init kernel there) and CSR matrix-vector products y = alpha A x + beta y,
   plain (no analysis) and adaptive (after rocsparse_dcsrmv_analysis, whose row blocks send short
   rows, long rows and empty rows down different kernel paths), on a tridiagonal 1000 x 1000
   matrix and on an irregular 3000 x 2000 one (rows of 0 to 40 entries, and a few of thousands);
   each result checked against a host product. It prints an FNV-1a digest of the results' bytes
   so two runtimes can be compared.
   Build: gcc -D__HIP_PLATFORM_AMD__ rocsparse_csrmv.c -lrocsparse -lamdhip64 -lm */
#include <hip/hip_runtime_api.h>
#include <rocsparse/rocsparse.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define HIP(call) do { hipError_t e_ = (call); if (e_ != hipSuccess) { \
    fprintf(stderr, "%s: %s\n", #call, hipGetErrorName(e_)); exit(1); } } while (0)
#define SP(call) do { rocsparse_status s_ = (call); if (s_ != rocsparse_status_success) { \
    fprintf(stderr, "%s: rocsparse status %d\n", #call, (int)s_); exit(1); } } while (0)

static uint64_t digest = 0xcbf29ce484222325ull;
static uint32_t rng = 2463534242u;

static uint32_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

struct csr { int m, n, nnz, *rows, *cols; double *vals; };

static void *dev_copy(const void *host, size_t bytes) {
    void *d;
    HIP(hipMalloc(&d, bytes ? bytes : 1));
    if (bytes) HIP(hipMemcpy(d, host, bytes, hipMemcpyHostToDevice));
    return d;
}

/* y = alpha A x + beta y on the device, plain or adaptive, checked against the host. */
static void product(rocsparse_handle h, const struct csr *a, int adaptive, const char *name) {
    double *x = malloc(a->n * sizeof(double)), *y = malloc(a->m * sizeof(double)), *want = malloc(a->m * sizeof(double));
    for (int i = 0; i < a->n; i++) x[i] = (double)(next() % 2001) / 1000.0 - 1.0;
    for (int i = 0; i < a->m; i++) y[i] = (double)(next() % 101) / 10.0;
    const double alpha = 2.5, beta = -0.5;
    for (int i = 0; i < a->m; i++) {
        double s = 0;
        for (int p = a->rows[i]; p < a->rows[i + 1]; p++) s += a->vals[p] * x[a->cols[p]];
        want[i] = alpha * s + beta * y[i];
    }
    int *drows = dev_copy(a->rows, (a->m + 1) * sizeof(int)), *dcols = dev_copy(a->cols, a->nnz * sizeof(int));
    double *dvals = dev_copy(a->vals, a->nnz * sizeof(double)), *dx = dev_copy(x, a->n * sizeof(double));
    double *dy = dev_copy(y, a->m * sizeof(double));
    rocsparse_mat_descr d;
    SP(rocsparse_create_mat_descr(&d));
    rocsparse_mat_info info = NULL;
    if (adaptive) {
        SP(rocsparse_create_mat_info(&info));
        SP(rocsparse_dcsrmv_analysis(h, rocsparse_operation_none, a->m, a->n, a->nnz, d, dvals, drows, dcols, info));
    }
    SP(rocsparse_dcsrmv(h, rocsparse_operation_none, a->m, a->n, a->nnz, &alpha, d, dvals, drows, dcols, info, dx,
                        &beta, dy));
    HIP(hipDeviceSynchronize());
    HIP(hipMemcpy(y, dy, a->m * sizeof(double), hipMemcpyDeviceToHost));
    for (int i = 0; i < a->m; i++) {
        double scale = 1;
        for (int p = a->rows[i]; p < a->rows[i + 1]; p++) scale += fabs(a->vals[p] * x[a->cols[p]]);
        if (!(fabs(y[i] - want[i]) <= 1e-13 * scale * alpha)) {
            fprintf(stderr, "%s (%s): y[%d] = %.17g, want %.17g\n", name, adaptive ? "adaptive" : "plain", i, y[i], want[i]);
            exit(1);
        }
    }
    const unsigned char *b = (const unsigned char *)y;
    for (size_t i = 0; i < a->m * sizeof(double); i++) digest = (digest ^ b[i]) * 0x100000001b3ull;
    if (info) SP(rocsparse_destroy_mat_info(info));
    SP(rocsparse_destroy_mat_descr(d));
    HIP(hipFree(drows));
    HIP(hipFree(dcols));
    HIP(hipFree(dvals));
    HIP(hipFree(dx));
    HIP(hipFree(dy));
    free(x);
    free(y);
    free(want);
}

static struct csr tridiagonal(int n) {
    struct csr a = {n, n, 3 * n - 2, malloc((n + 1) * sizeof(int)), malloc((3 * n - 2) * sizeof(int)),
                    malloc((3 * n - 2) * sizeof(double))};
    int k = 0;
    for (int i = 0; i < n; i++) {
        a.rows[i] = k;
        for (int j = i - 1; j <= i + 1; j++)
            if (j >= 0 && j < n) { a.cols[k] = j; a.vals[k] = (j == i) ? 2.0 : -1.0; k++; }
    }
    a.rows[n] = k;
    return a;
}

static struct csr irregular(int m, int n) {
    struct csr a = {m, n, 0, malloc((m + 1) * sizeof(int)), NULL, NULL};
    int *len = malloc(m * sizeof(int));
    for (int i = 0; i < m; i++) {
        len[i] = (i % 997 == 13) ? 1500 + (int)(next() % 500) : (i % 11 == 0) ? 0 : (int)(next() % 41);
        a.nnz += len[i];
    }
    a.cols = malloc(a.nnz * sizeof(int));
    a.vals = malloc(a.nnz * sizeof(double));
    int k = 0;
    for (int i = 0; i < m; i++) {
        a.rows[i] = k;
        int col = (int)(next() % 8);
        for (int p = 0; p < len[i]; p++) {
            a.cols[k] = col % n; /* ascending while col < n, as CSR wants */
            a.vals[k++] = (double)((int)(next() % 2001) - 1000) / 256.0;
            col += 1 + (int)(next() % ((len[i] > 100) ? 1 : 40));
            if (col >= n) break;
        }
    }
    a.rows[m] = k;
    a.nnz = k;
    free(len);
    return a;
}

int main(void) {
    rocsparse_handle h;
    SP(rocsparse_create_handle(&h));
    struct csr t = tridiagonal(1000), r = irregular(3000, 2000);
    for (int adaptive = 0; adaptive < 2; adaptive++) {
        product(h, &t, adaptive, "tridiagonal");
        product(h, &r, adaptive, "irregular");
    }
    SP(rocsparse_destroy_handle(h));
    printf("rocsparse_csrmv: ok (digest %016llx)\n", (unsigned long long)digest);
    return 0;
}
