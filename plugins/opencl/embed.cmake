# embed.cmake — writes OUT, a C file holding the OpenCL kernels as strings:
# - ampx_ocl_source, the program every context builds at create(): common.cl, KERNEL_MATH
#   (core/include/ampx/kernel_math.h, the numerics the C and CUDA backends compile too),
#   scalars.cl, then every other kernels/opencl/*.cl in name order;
# - ampx_ocl_prelude (common.cl and KERNEL_MATH) and ampx_ocl_typed_*, one string per
#   kernels/opencl/typed/*.cl: the kernels compiled once per dtype combination on first use
#   (plugins/opencl/typed.c), the prelude first.
# Run as: cmake -DSRC_DIR=... -DKERNEL_MATH=... -DOUT=... -P embed.cmake

# The bytes of FILES as C initializer lines in VAR, their total size (each file + '\n') in SIZE.
function(ampx_hex_files var size)
  set(body "")
  set(total 0)
  foreach(f ${ARGN})
    file(READ "${f}" hex HEX)
    string(LENGTH "${hex}" len)
    math(EXPR bytes "${len} / 2")
    math(EXPR total "${total} + ${bytes} + 1")
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
    get_filename_component(name "${f}" NAME)
    string(APPEND body "/* ${name} */\n${hex}0x0a,\n")
  endforeach()
  set(${var} "${body}" PARENT_SCOPE)
  set(${size} "${total}" PARENT_SCOPE)
endfunction()

file(GLOB cl_files "${SRC_DIR}/*.cl")
list(SORT cl_files)
list(REMOVE_ITEM cl_files "${SRC_DIR}/common.cl" "${SRC_DIR}/scalars.cl")
set(prelude "${SRC_DIR}/common.cl" "${KERNEL_MATH}")
ampx_hex_files(main_body main_size ${prelude} "${SRC_DIR}/scalars.cl" ${cl_files})
ampx_hex_files(prelude_body prelude_size ${prelude})

file(GLOB typed_files "${SRC_DIR}/typed/*.cl")
list(SORT typed_files)
set(typed_defs "")
set(typed_names "")
set(typed_srcs "")
set(typed_sizes "")
set(i 0)
foreach(f ${typed_files})
  ampx_hex_files(body size "${f}")
  get_filename_component(name "${f}" NAME)
  string(APPEND typed_defs "static const char typed_${i}[] = {\n${body}0x00};\n")
  string(APPEND typed_names "\"${name}\", ")
  string(APPEND typed_srcs "typed_${i}, ")
  string(APPEND typed_sizes "${size}, ")
  math(EXPR i "${i} + 1")
endforeach()

file(WRITE "${OUT}.tmp"
  "/* Generated at build time from the kernels/opencl/ sources by plugins/opencl/embed.cmake. */\n"
  "#include <stddef.h>\n"
  "const char ampx_ocl_source[] = {\n${main_body}0x00};\n"
  "const size_t ampx_ocl_source_size = ${main_size};\n"
  "const char ampx_ocl_prelude[] = {\n${prelude_body}0x00};\n"
  "const size_t ampx_ocl_prelude_size = ${prelude_size};\n"
  "${typed_defs}"
  "const unsigned ampx_ocl_typed_count = ${i};\n"
  "const char *const ampx_ocl_typed_names[] = {${typed_names}0};\n"
  "const char *const ampx_ocl_typed_sources[] = {${typed_srcs}0};\n"
  "const size_t ampx_ocl_typed_sizes[] = {${typed_sizes}0};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
