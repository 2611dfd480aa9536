/* SPDX-License-Identifier: MIT */
/* Portable 4x4 micro-kernel (plain C, SSE2 at most): the "baseline" path. */
#include "ukernel.h"
#include "gemm_small.h"

#define MR 4
#define NR 4

static void ukernel_generic(size_t kc, const double *a, const double *b, double *c, size_t ldc,
                            const pd_tile_io *io) {
    PD_TILE_LOCALS(io, kc);
    double acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = load ? c[i * ldc + j] : 0.0;
    for (size_t k = 0; k < kc; pd_line_share_ask(&share))
        for (const size_t end = pd_line_share_until(&share, k, kc); k < end; k++, a += MR, b += NR)
            for (int i = 0; i < MR; i++)
                for (int j = 0; j < NR; j++) acc[i][j] = acc[i][j] + a[i] * b[j];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = add ? add[i * ldadd + j] + acc[i][j] : acc[i][j];
}

static void ukernel_generic_rows(size_t kc, const double *a, size_t lda, const double *b, double *c,
                                 size_t ldc, const pd_tile_io *io) {
    PD_TILE_LOCALS(io, kc);
    double acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = load ? c[i * ldc + j] : 0.0;
    for (size_t k = 0; k < kc; pd_line_share_ask(&share))
        for (const size_t end = pd_line_share_until(&share, k, kc); k < end; k++, b += NR)
            for (int i = 0; i < MR; i++)
                for (int j = 0; j < NR; j++) acc[i][j] = acc[i][j] + a[i * lda + k] * b[j];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = add ? add[i * ldadd + j] + acc[i][j] : acc[i][j];
}

const pd_gemm_path pd_path_baseline = {"baseline", MR, NR, 256, 128, 2048, 0, ukernel_generic,
                                       ukernel_generic_rows, pd_small_generic};
