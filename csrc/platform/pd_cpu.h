/* SPDX-License-Identifier: MIT */
/* Run-time CPU features for kernel dispatch: the instruction set and the OS saving its
 * registers. Always 0 off x86-64. */
#ifndef PD_CPU_H
#define PD_CPU_H

int pd_cpu_has_avx2(void);
int pd_cpu_has_avx512f(void);
/* AVX512DQ on top of AVX512F (vpmullq: one instruction for a 64-bit lane multiply). */
int pd_cpu_has_avx512dq(void);
/* FMA3 (vfmadd...): the elementary functions' fused multiply-adds in one instruction. */
int pd_cpu_has_fma(void);
/* AVX-512F on 256-bit units, each 512-bit instruction issued as two halves: AMD family 19h
 * (Zen 4; its Zen 3 models have no AVX-512). */
int pd_cpu_avx512_half_width(void);

#endif
