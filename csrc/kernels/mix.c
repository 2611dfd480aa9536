/* SPDX-License-Identifier: MIT */
/* The alias guard's checksum terms (docs/numerics-concurrency.md C5): mix(bits, i) =
 * (bits ^ i*STEP) * MUL summed mod 2^64 over an index range or over the runs a product's packing
 * reads, in the widest vectors the products' path allows (one sum on every path). */
#include <string.h>
#include "mix.h"
#include "isa.h"
#include "../platform/pd_atomic.h"
#include "../platform/pd_cpu.h"
#include "../platform/pd_platform.h"
#if PD_ARCH_X86_64
#include <immintrin.h>
#endif

#define STEP 0x9E3779B97F4A7C15u /* key(i) = i * STEP */
#define MUL 0xBF58476D1CE4E5B9u

/* sum over i in [begin, end) of mix(bits_i, i) = (bits_i ^ key(i)) * MUL, mod 2^64: a multiply
 * after an index-dependent xor, so moved values change the sum too; MUL is odd, so one changed
 * bit always changes its term. */
static uint64_t mix_sum(const double *x, size_t begin, size_t end) {
    uint64_t s = 0, key = (uint64_t)begin * STEP; /* kept by addition */
    for (size_t i = begin; i < end; i++, key += STEP) {
        uint64_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        s += (bits ^ key) * MUL;
    }
    return s;
}

/* ---- the same sum over runs: a product's packing reads (pd_csum), or one whole range ---- */

/* One path's loop over runs (mix_rows's arguments). */
typedef uint64_t (*mix_loop)(const double *, size_t, size_t, size_t, size_t, double *, size_t);

/* A run's values from `from` on into a packed row of w doubles, zero past the run's cols. */
static void pack_tail(double *d, const double *run, size_t from, size_t cols, size_t w) {
    for (size_t j = from; j < cols; j++) d[j] = run[j];
    for (size_t j = cols; j < w; j++) d[j] = 0.0;
}

/* sum of mix(x[o], o) over o = off + r*rs + j, r < rows, j < cols: one run at a time. With dst,
 * run r is also copied to dst's row r of w doubles (w >= cols, zero past cols); the vector loops
 * below store the very vectors they mix, one read of each value for both. */
static uint64_t mix_rows(const double *x, size_t off, size_t rows, size_t rs, size_t cols, double *dst,
                         size_t w) {
    uint64_t s = 0;
    for (size_t r = 0; r < rows; r++) {
        s += mix_sum(x, off + r * rs, off + r * rs + cols);
        if (dst) pack_tail(dst + r * w, x + off + r * rs, 0, cols, w);
    }
    return s;
}

#if PD_ARCH_X86_64
/* The vector loops below take the 64-bit product from three 32x32-bit ones (the low half of
 * hi*hi never reaches the low 64 bits); their lane sums add up to mix_sum's, mod 2^64. */
#define MUL64(V, T, mul32, srli, slli, add)                                                          \
    add(mul32(V, clo), slli(add(mul32(srli(V, 32), clo), mul32(V, chi)), 32))

/* 4 or 8 lanes at a time, one accumulator for all runs: a short run (a panel's 8 or 16 values)
 * then costs its vectors, not a reduction each. */
PD_TARGET("avx2") static uint64_t mix_rows_avx2(const double *x, size_t off, size_t rows, size_t rs,
                                                size_t cols, double *dst, size_t w) {
    const __m256i clo = _mm256_set1_epi64x((long long)(MUL & 0xFFFFFFFFu));
    const __m256i chi = _mm256_set1_epi64x((long long)(MUL >> 32));
    const __m256i step = _mm256_set1_epi64x((long long)(4 * STEP));
    const __m256i lanes = _mm256_set_epi64x((long long)(3 * STEP), (long long)(2 * STEP), (long long)STEP, 0);
    const size_t full = cols / 4 * 4;
    __m256i acc = _mm256_setzero_si256();
    uint64_t tail = 0;
    for (size_t r = 0; r < rows; r++) {
        const size_t o = off + r * rs;
        __m256i key = _mm256_add_epi64(_mm256_set1_epi64x((long long)((uint64_t)o * STEP)), lanes);
        for (size_t j = 0; j < full; j += 4, key = _mm256_add_epi64(key, step)) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(x + o + j)), v = _mm256_xor_si256(raw, key);
            if (dst) _mm256_storeu_si256((__m256i *)(dst + r * w + j), raw);
            acc = _mm256_add_epi64(acc, MUL64(v, __m256i, _mm256_mul_epu32, _mm256_srli_epi64,
                                              _mm256_slli_epi64, _mm256_add_epi64));
        }
        if (full < cols) tail += mix_sum(x, o + full, o + cols);
        if (dst) pack_tail(dst + r * w, x + o, full, cols, w);
    }
    uint64_t lane[4];
    _mm256_storeu_si256((__m256i *)lane, acc);
    return lane[0] + lane[1] + lane[2] + lane[3] + tail;
}

/* The AVX-512 loop around its lane multiply: MUL64 on AVX-512F, one instruction where the CPU
 * multiplies 64-bit lanes (AVX512DQ: the low 64 bits of the product are the emulation's, so the
 * sum is too). */
#define MIX_ROWS_512(NAME, ISA, LANE_MUL)                                                                \
    PD_TARGET(ISA) static uint64_t NAME(const double *x, size_t off, size_t rows, size_t rs, size_t cols,   \
                                        double *dst, size_t w) {                                         \
        const __m512i clo = _mm512_set1_epi64((long long)(MUL & 0xFFFFFFFFu));                          \
        const __m512i chi = _mm512_set1_epi64((long long)(MUL >> 32));                                  \
        const __m512i mul = _mm512_set1_epi64((long long)MUL);                                          \
        const __m512i step = _mm512_set1_epi64((long long)(8 * STEP));                                  \
        const __m512i lanes = _mm512_set_epi64((long long)(7 * STEP), (long long)(6 * STEP),            \
                                               (long long)(5 * STEP), (long long)(4 * STEP),            \
                                               (long long)(3 * STEP), (long long)(2 * STEP),            \
                                               (long long)STEP, 0);                                      \
        const size_t full = cols / 8 * 8;                                                                \
        __m512i acc = _mm512_setzero_si512();                                                            \
        uint64_t tail = 0;                                                                               \
        (void)clo, (void)chi, (void)mul;                                                                 \
        if (dst && cols == 16 && w == 16) /* a whole panel of the AVX-512 path: two vectors a row */    \
            for (size_t r = 0; r < rows; r++, dst += 16) {                                               \
                const size_t o = off + r * rs;                                                           \
                const __m512i key =                                                                      \
                    _mm512_add_epi64(_mm512_set1_epi64((long long)((uint64_t)o * STEP)), lanes);         \
                const __m512i raw0 = _mm512_loadu_si512((const void *)(x + o));                          \
                const __m512i raw1 = _mm512_loadu_si512((const void *)(x + o + 8));                      \
                _mm512_storeu_si512((void *)dst, raw0);                                                  \
                _mm512_storeu_si512((void *)(dst + 8), raw1);                                            \
                {                                                                                        \
                    const __m512i v = _mm512_xor_si512(raw0, key);                                       \
                    acc = _mm512_add_epi64(acc, LANE_MUL);                                               \
                }                                                                                        \
                {                                                                                        \
                    const __m512i v = _mm512_xor_si512(raw1, _mm512_add_epi64(key, step));              \
                    acc = _mm512_add_epi64(acc, LANE_MUL);                                               \
                }                                                                                        \
            }                                                                                            \
        else                                                                                             \
        for (size_t r = 0; r < rows; r++) {                                                              \
            const size_t o = off + r * rs;                                                               \
            __m512i key = _mm512_add_epi64(_mm512_set1_epi64((long long)((uint64_t)o * STEP)), lanes);   \
            for (size_t j = 0; j < full; j += 8, key = _mm512_add_epi64(key, step)) {                    \
                const __m512i raw = _mm512_loadu_si512((const void *)(x + o + j));                       \
                const __m512i v = _mm512_xor_si512(raw, key);                                            \
                if (dst) _mm512_storeu_si512((void *)(dst + r * w + j), raw);                            \
                acc = _mm512_add_epi64(acc, LANE_MUL);                                                   \
            }                                                                                            \
            if (full < cols) tail += mix_sum(x, o + full, o + cols);                                     \
            if (dst) pack_tail(dst + r * w, x + o, full, cols, w);                                       \
        }                                                                                                \
        uint64_t lane[8], s = tail;                                                                      \
        _mm512_storeu_si512((void *)lane, acc);                                                          \
        for (int l = 0; l < 8; l++) s += lane[l];                                                        \
        return s;                                                                                        \
    }

MIX_ROWS_512(mix_rows_avx512, "avx512f",
             MUL64(v, __m512i, _mm512_mul_epu32, _mm512_srli_epi64, _mm512_slli_epi64, _mm512_add_epi64))
MIX_ROWS_512(mix_rows_avx512dq, "avx512f,avx512dq", _mm512_mullo_epi64(v, mul))

/* The AVX-512 path's loop: one CPUID read, kept (a CPUID can cost a VM exit). */
static pd_atomic_int g_dq; /* 0 unknown, 1 without AVX512DQ, 2 with it */

static mix_loop avx512_loop(void) {
    int dq = pd_atomic_int_load(&g_dq);
    if (!dq) {
        dq = pd_cpu_has_avx512dq() ? 2 : 1;
        pd_atomic_int_store(&g_dq, dq);
    }
    return dq == 2 ? mix_rows_avx512dq : mix_rows_avx512;
}
#define MIX_AVX512 avx512_loop()
#else
#define MIX_AVX512 mix_rows
#endif

void pd_csum_init(pd_csum *s, const double *base) {
    s->base = base;
    s->sum = 0;
    s->count = 0;
}

static mix_loop current_loop(void) { return PD_ISA_PICK(mix_rows, mix_rows_avx2, MIX_AVX512, mix_rows); }

void pd_csum_add_rows(pd_csum *s, const double *p, size_t rows, size_t rs, size_t cols) {
    if (rs == cols) cols *= rows, rows = 1; /* back to back (an unpacked whole weight): one long run */
    s->sum += current_loop()(s->base, (size_t)(p - s->base), rows, rs, cols, NULL, 0);
    s->count += rows * cols;
}

void pd_csum_pack_rows(pd_csum *s, const double *p, size_t rows, size_t rs, size_t cols, double *dst, size_t w) {
    s->sum += current_loop()(s->base, (size_t)(p - s->base), rows, rs, cols, dst, w);
    s->count += rows * cols;
}

void pd_csum_merge(pd_csum *s, const pd_csum *part) {
    s->sum += part->sum; /* addition commutes: any split of the values gives one sum */
    s->count += part->count;
}

uint64_t pd_mix_range(const double *x, size_t begin, size_t end) {
    return current_loop()(x, begin, 1, end - begin, end - begin, NULL, 0); /* one run */
}
