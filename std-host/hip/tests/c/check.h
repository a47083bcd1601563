/* Shared checks for the C tests: each EXPECT compares a hipError_t with the value HIP returns. */
#ifndef CHECK_H
#define CHECK_H

#include "aqueduct_hip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The differential run (tests/differential.rs) links the tests that use only standard HIP API
   against Debian's libamdhip64 (HIP 5.2) too, and runs the same binary on both runtimes. HIP 5.2
   lacks some functions of the newest HIP, which aqueduct follows: those are weak references there,
   called only on the newest HIP's side. */
#ifdef AQD_LINK_HIP52
#pragma weak hipStreamGetId
#pragma weak hipStreamGetDevice
#pragma weak hipEventRecordWithFlags
#pragma weak hipDeviceSetLimit
#pragma weak hipLaunchHostFunc
#pragma weak hipDrvGetErrorName
#pragma weak hipDrvGetErrorString
#endif

/* Set (non-empty) only for the run on Debian's HIP 5.2: checks where HIP 5.2 behaves
   differently from the newest HIP are skipped there, each under NEWER_HIP (or taking 5.2's
   answer through expect_hip52()) with a comment naming the difference (README, "Where
   aqueduct's answer differs from HIP 5.2's"). Never set on aqueduct's run. */
static inline int expect_hip52(void) {
    const char *v = getenv("AQD_EXPECT_HIP52");
    return v != NULL && *v != 0;
}

/* A check of the newest HIP's behaviour, skipped under AQD_EXPECT_HIP52. */
#define NEWER_HIP(check)                                                                           \
    do {                                                                                           \
        if (!expect_hip52()) {                                                                     \
            check;                                                                                 \
        }                                                                                          \
    } while (0)

/* Atomic: the threads test checks from two pthreads at once. */
static _Atomic int failures;

#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        hipError_t e_ = (call);                                                                    \
        hipError_t w_ = (want);                                                                    \
        if (e_ != w_) {                                                                            \
            fprintf(stderr, "%s:%d: %s = %s (%d), want %s (%d)\n", __FILE__, __LINE__, #call,      \
                    hipGetErrorName(e_), (int)e_, hipGetErrorName(w_), (int)w_);                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define OK(call) EXPECT(call, hipSuccess)

#define TRUE(cond)                                                                                 \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #cond);                     \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define DONE(name)                                                                                 \
    do {                                                                                           \
        if (failures) {                                                                            \
            fprintf(stderr, "%s: %d failure(s)\n", name, failures);                                \
            return 1;                                                                              \
        }                                                                                          \
        printf("%s: ok\n", name);                                                                  \
        return 0;                                                                                  \
    } while (0)

#endif
