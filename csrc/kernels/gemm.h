/* SPDX-License-Identifier: MIT */
/* Deterministic dense products: every output sums its terms in ascending k from +0.0,
 * one rounded multiply then one rounded add per term (never FMA, never reassociated).
 * acc == 0: C = s;  acc != 0: C = C + s  (s fully formed first, then one addition). */
#ifndef PD_GEMM_H
#define PD_GEMM_H
#include <stddef.h>

/* C[m,n] (+)= sum_k A[m*lda+k] * B[k*ldb+n] */
void pd_mm_nn(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc);
/* C[m,n] (+)= sum_k A[m*lda+k] * B[n*ldb+k] */
void pd_mm_nt(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc);
/* C[m,n] (+)= sum_k A[k*lda+m] * B[k*ldb+n] */
void pd_mm_tn(size_t M, size_t K, size_t N, const double *A, size_t lda,
              const double *B, size_t ldb, double *C, size_t ldc, int acc);

/* pd_mm_nn and pd_mm_nt that also add B's checksum terms to bsum (pd_checksum.h), each of B's
 * K x N values once, while it is packed: a parameter's record-time checksum without a pass. */
struct pd_csum_s;
void pd_mm_nn_sum(size_t M, size_t K, size_t N, const double *A, size_t lda,
                  const double *B, size_t ldb, double *C, size_t ldc, int acc, struct pd_csum_s *bsum);
void pd_mm_nt_sum(size_t M, size_t K, size_t N, const double *A, size_t lda,
                  const double *B, size_t ldb, double *C, size_t ldc, int acc, struct pd_csum_s *bsum);

/* A row-major B (K x N, rows ldb apart) packed once into the current path's panels, for several
 * pd_mm_tn_panels products that read it: the tied head's dE blocks would each pack all of B
 * again. panels is NULL when memory is short; the products then pack B as they go. B must stay
 * unchanged while the panels are used. */
typedef struct pd_b_panels_s {
    const void *path; /* the path whose panels these are: another path packs B as it goes */
    size_t K, N, npad, ldb;
    const double *B;
    double *panels;
} pd_b_panels;
/* Packs B into b->panels under the current path (NULL when short of memory). */
void pd_b_panels_pack(pd_b_panels *b, size_t K, size_t N, const double *B, size_t ldb);
/* Frees b's panels; b may be packed again. */
void pd_b_panels_free(pd_b_panels *b);
/* pd_mm_tn with b's B: C[m,n] (+)= sum_k A[k*lda+m] * B[k*ldb+n], the same bits. */
void pd_mm_tn_panels(size_t M, const double *A, size_t lda, const pd_b_panels *b, double *C, size_t ldc,
                     int acc);

/* Name of the instruction-set path chosen at run time ("baseline", "avx2", ...). */
const char *pd_kernel_path(void);
/* Force a path by name for testing; returns 0 if unavailable on this CPU. */
int pd_force_kernel_path(const char *name);
/* Whether the AVX-512 tiles fold each broadcast into its multiply (mul_bcast_avx512.h): yes
 * where AVX-512 runs at half width, unless forced. Same bits either way. */
int pd_avx512_folds(void);
/* Force it for testing: 0 or 1, or -1 for this CPU's choice. */
void pd_force_avx512_fold(int mode);

#endif
