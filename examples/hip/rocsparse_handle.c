/* A C program using Debian's rocSPARSE (librocsparse0): a handle (rocSPARSE runs its init
   kernel there) and a CSR matrix-vector product of a tridiagonal 1000 x 1000 matrix, checked
   against the host. Build: gcc -D__HIP_PLATFORM_AMD__ rocsparse_handle.c -lrocsparse -lamdhip64 */
#include <hip/hip_runtime_api.h>
#include <rocsparse/rocsparse.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define HIP(call) do { hipError_t e_ = (call); if (e_ != hipSuccess) { \
    fprintf(stderr, "%s: %s\n", #call, hipGetErrorName(e_)); return 1; } } while (0)
#define SP(call) do { rocsparse_status s_ = (call); if (s_ != rocsparse_status_success) { \
    fprintf(stderr, "%s: rocsparse status %d\n", #call, (int)s_); return 1; } } while (0)

int main(void) {
    rocsparse_handle h;
    SP(rocsparse_create_handle(&h));
    enum { N = 1000 };
    int nnz = 3 * N - 2, *rows = malloc((N + 1) * sizeof(int)), *cols = malloc(nnz * sizeof(int));
    double *vals = malloc(nnz * sizeof(double)), x[N], y[N], want[N];
    int k = 0;
    for (int i = 0; i < N; i++) {
        rows[i] = k;
        for (int j = i - 1; j <= i + 1; j++)
            if (j >= 0 && j < N) { cols[k] = j; vals[k] = (j == i) ? 2.0 : -1.0; k++; }
        x[i] = i % 7;
    }
    rows[N] = k;
    for (int i = 0; i < N; i++) {
        want[i] = 0;
        for (int p = rows[i]; p < rows[i + 1]; p++) want[i] += vals[p] * x[cols[p]];
    }
    int *drows, *dcols;
    double *dvals, *dx, *dy;
    HIP(hipMalloc((void **)&drows, (N + 1) * sizeof(int)));
    HIP(hipMalloc((void **)&dcols, nnz * sizeof(int)));
    HIP(hipMalloc((void **)&dvals, nnz * sizeof(double)));
    HIP(hipMalloc((void **)&dx, N * sizeof(double)));
    HIP(hipMalloc((void **)&dy, N * sizeof(double)));
    HIP(hipMemcpy(drows, rows, (N + 1) * sizeof(int), hipMemcpyHostToDevice));
    HIP(hipMemcpy(dcols, cols, nnz * sizeof(int), hipMemcpyHostToDevice));
    HIP(hipMemcpy(dvals, vals, nnz * sizeof(double), hipMemcpyHostToDevice));
    HIP(hipMemcpy(dx, x, N * sizeof(double), hipMemcpyHostToDevice));
    rocsparse_mat_descr d;
    SP(rocsparse_create_mat_descr(&d));
    double one = 1.0, zero = 0.0;
    SP(rocsparse_dcsrmv(h, rocsparse_operation_none, N, N, nnz, &one, d, dvals, drows, dcols, NULL, dx, &zero, dy));
    HIP(hipDeviceSynchronize());
    HIP(hipMemcpy(y, dy, N * sizeof(double), hipMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        if (fabs(y[i] - want[i]) > 1e-12) { fprintf(stderr, "y[%d] = %g, want %g\n", i, y[i], want[i]); return 1; }
    SP(rocsparse_destroy_mat_descr(d));
    SP(rocsparse_destroy_handle(h));
    printf("rocsparse_handle: ok\n");
    return 0;
}
