# Instruction-set flags for the runtime-dispatched micro-kernels only. Never -mfma,
# -march=native or fast-math: multiply and add must stay two rounded operations.
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/csrc/kernels/ukernel_avx2.c
                            PROPERTIES COMPILE_OPTIONS "-mavx2")
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/csrc/kernels/ukernel_avx512.c
                            PROPERTIES COMPILE_OPTIONS "-mavx512f")
