/* SPDX-License-Identifier: MIT */
/* Packing copies per path: the same C under each path's target (isa.h), so the compiler moves
 * whole vectors of that width; the panel widths the kernels use are constants here, so each
 * row is a few straight loads and stores. */
#include "pack.h"
#include "isa.h"
#include "../platform/pd_platform.h"

/* A transposed A's stored rows lie a power of two apart in the vocabulary products, too many
 * short streams for the hardware prefetcher: its packing asks for the row this many k ahead
 * (benchmarks/KERNELS.md has the measurement). */
#define PD_PACK_A_PREFETCH 8

/* n doubles from s to d; n a constant at every use, so the loop unrolls into vector moves */
#define COPY(d, s, n)                                                                                     \
    do {                                                                                                  \
        double *restrict d_ = (d);                                                                        \
        const double *restrict s_ = (s);                                                                  \
        for (size_t j_ = 0; j_ < (n); j_++) d_[j_] = s_[j_];                                              \
    } while (0)

#define PACKERS(suffix, target)                                                                           \
    target static void rows##suffix(size_t kb, const double *restrict src, size_t ld, size_t cols,        \
                                    double *restrict dst, int w) {                                        \
        const size_t n = (size_t)w;                                                                       \
        if (cols == n && n == 16)                                                                         \
            for (size_t k = 0; k < kb; k++) { COPY(dst + k * 16, src + k * ld, 16); }                     \
        else if (cols == n && n == 8)                                                                     \
            for (size_t k = 0; k < kb; k++) { COPY(dst + k * 8, src + k * ld, 8); }                       \
        else                                                                                              \
            for (size_t k = 0; k < kb; k++, dst += n) {                                                   \
                size_t j = 0;                                                                             \
                for (; j < cols; j++) dst[j] = src[k * ld + j];                                           \
                for (; j < n; j++) dst[j] = 0.0;                                                          \
            }                                                                                             \
    }                                                                                                     \
    target static void slivers##suffix(size_t kb, const double *restrict src, size_t ld, size_t n,        \
                                       double *restrict dst, int w) {                                     \
        const size_t ws = (size_t)w, step = kb * ws;                                                      \
        const size_t kp = kb > PD_PACK_A_PREFETCH ? kb - PD_PACK_A_PREFETCH : 0; /* rows that prefetch */ \
        for (size_t k = 0; k < kb; k++) {                                                                 \
            const int pf = k < kp;                                                                        \
            const double *restrict ak = src + k * ld, *ahead = pf ? ak + PD_PACK_A_PREFETCH * ld : ak;    \
            double *restrict d = dst + k * ws;                                                            \
            if (ws == 8) /* one line a sliver: its prefetch rides in the copy's loop */                   \
                for (size_t s = 0; s < n; s++, d += step) {                                               \
                    if (pf) PD_PREFETCH_R(ahead + s * 8);                                                 \
                    COPY(d, ak + s * 8, 8);                                                               \
                }                                                                                         \
            else {                                                                                        \
                for (size_t i = 0; pf && i < n * ws; i += 8) PD_PREFETCH_R(ahead + i);                    \
                for (size_t s = 0; s < n; s++, d += step) { COPY(d, ak + s * ws, ws); }                   \
            }                                                                                             \
        }                                                                                                 \
    }                                                                                                     \
    static const pd_packers packers##suffix = {rows##suffix, slivers##suffix};

PD_ISA_VARIANTS(PACKERS)

/* Each path's packers by the path itself (the baseline's serve any path without its own). */
static const struct {
    const pd_gemm_path *path;
    const pd_packers *packers;
} g_packers[] = {
#if PD_ARCH_X86_64
    {&pd_path_avx512, &packers_avx512},
    {&pd_path_avx2, &packers_avx2},
#elif PD_ARCH_AARCH64
    {&pd_path_neon, &packers_neon},
#endif
    {&pd_path_baseline, &packers_baseline},
};

const pd_packers *pd_packers_for(const pd_gemm_path *p) {
    for (size_t i = 0; i < sizeof g_packers / sizeof g_packers[0]; i++)
        if (g_packers[i].path == p) return g_packers[i].packers;
    return &packers_baseline;
}
