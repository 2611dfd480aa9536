/* SPDX-License-Identifier: MIT */
/* CPUID and XGETBV read directly, so no compiler runtime (__builtin_cpu_supports) is needed. */
#include "pd_cpu.h"
#include "pd_platform.h"

#if PD_ARCH_X86_64
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    int v[4];
    __cpuidex(v, (int)leaf, (int)sub);
    for (int i = 0; i < 4; i++) r[i] = (unsigned)v[i];
}
static unsigned long long xgetbv0(void) { return _xgetbv(0); }
#else
#include <cpuid.h>
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) r[0] = r[1] = r[2] = r[3] = 0;
}
static unsigned long long xgetbv0(void) {
    unsigned lo, hi; /* the instruction itself: no -mxsave needed */
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

/* XCR0 bits the OS must save: SSE|AVX (0x6); plus opmask|ZMM_Hi256|Hi16_ZMM (0xE0). */
static int os_saves(unsigned long long mask) {
    unsigned r[4];
    cpuid(1, 0, r);
    const int osxsave = (r[2] >> 27) & 1, avx = (r[2] >> 28) & 1;
    return osxsave && avx && (xgetbv0() & mask) == mask;
}

static unsigned leaf7_ebx(void) {
    unsigned r[4];
    cpuid(0, 0, r);
    if (r[0] < 7) return 0;
    cpuid(7, 0, r);
    return r[1];
}

int pd_cpu_has_avx2(void) { return os_saves(0x6) && ((leaf7_ebx() >> 5) & 1); }
int pd_cpu_has_avx512f(void) { return os_saves(0xE6) && ((leaf7_ebx() >> 16) & 1); }
int pd_cpu_has_avx512dq(void) { return pd_cpu_has_avx512f() && ((leaf7_ebx() >> 17) & 1); }

int pd_cpu_has_fma(void) {
    unsigned r[4];
    cpuid(1, 0, r);
    return os_saves(0x6) && ((r[2] >> 12) & 1);
}

int pd_cpu_avx512_half_width(void) {
    unsigned r[4];
    cpuid(0, 0, r);
    const int amd = r[1] == 0x68747541u && r[3] == 0x69746e65u && r[2] == 0x444d4163u; /* "AuthenticAMD" */
    cpuid(1, 0, r);
    const unsigned family = ((r[0] >> 8) & 0xF) + ((r[0] >> 8 & 0xF) == 0xF ? (r[0] >> 20) & 0xFF : 0);
    return amd && family == 0x19 && pd_cpu_has_avx512f();
}
#else
int pd_cpu_has_avx2(void) { return 0; }
int pd_cpu_has_avx512f(void) { return 0; }
int pd_cpu_has_avx512dq(void) { return 0; }
int pd_cpu_has_fma(void) { return 0; }
int pd_cpu_avx512_half_width(void) { return 0; }
#endif
