# SPDX-License-Identifier: MIT
# The floating-point flags every pydepth C target compiles with, in one place.
# Bit-exactness needs every multiply and add rounded separately: contraction off, never
# fast-math. MSVC: /fp:precise (contracts nothing since VS 2022), never /fp:fast or /fp:contract.
include(CheckCCompilerFlag)

add_library(pd_strict_fp_flags_only INTERFACE)
if(MSVC)
  target_compile_options(pd_strict_fp_flags_only INTERFACE /fp:precise)
else()
  # A compiler that silently ignored -ffp-contract=off would break every fixture: refuse it.
  check_c_compiler_flag(-ffp-contract=off PD_CC_FP_CONTRACT_OFF)
  if(NOT PD_CC_FP_CONTRACT_OFF)
    message(FATAL_ERROR "${CMAKE_C_COMPILER_ID} does not accept -ffp-contract=off; "
                        "pydepth needs multiply and add rounded separately")
  endif()
  target_compile_options(pd_strict_fp_flags_only INTERFACE
                         -ffp-contract=off -fno-fast-math -fno-unsafe-math-optimizations)
endif()
# 32-bit x86: binary64 in SSE2 registers, never x87 extended precision (docs/numerics.md §1.3).
if(NOT MSVC AND CMAKE_SIZEOF_VOID_P EQUAL 4 AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(i.86|x86|X86)$")
  target_compile_options(pd_strict_fp_flags_only INTERFACE -msse2 -mfpmath=sse)
endif()
# Intel's compilers default to a fast floating-point model: ask for the precise one explicitly.
if(CMAKE_C_COMPILER_ID MATCHES "^Intel")
  if(MSVC)
    target_compile_options(pd_strict_fp_flags_only INTERFACE /fp:precise)
  else()
    target_compile_options(pd_strict_fp_flags_only INTERFACE -fp-model=precise)
  endif()
endif()

# The core's own sources: the same flags plus optimization and warnings.
add_library(pd_strict_fp INTERFACE)
target_link_libraries(pd_strict_fp INTERFACE pd_strict_fp_flags_only)
if(MSVC)
  target_compile_options(pd_strict_fp INTERFACE /O2 /W3)
  # the core uses the plain C runtime names (fopen, strcpy, ...), which need no checked variants
  target_compile_definitions(pd_strict_fp INTERFACE _CRT_SECURE_NO_WARNINGS)
else()
  # an undeclared call is an error everywhere (clang makes it one; older gcc only warns)
  target_compile_options(pd_strict_fp INTERFACE -O3 -Wall -Wextra -Werror=implicit-function-declaration)
endif()
