/* Shared checks for the C tests: each EXPECT compares a hipError_t with the value HIP returns. */
#ifndef CHECK_H
#define CHECK_H

#include "aqueduct_hip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
