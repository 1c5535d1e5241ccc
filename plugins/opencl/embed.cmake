# embed.cmake — writes OUT, a C file holding the OpenCL kernels as one string:
# common.cl, KERNEL_MATH (core/include/ampx/kernel_math.h, the numerics the C and CUDA
# backends compile too), scalars.cl, then every other kernels/opencl/*.cl in name order.
# Run as: cmake -DSRC_DIR=... -DKERNEL_MATH=... -DOUT=... -P embed.cmake
file(GLOB cl_files "${SRC_DIR}/*.cl")
list(SORT cl_files)
list(REMOVE_ITEM cl_files "${SRC_DIR}/common.cl" "${SRC_DIR}/scalars.cl")
set(ordered "${SRC_DIR}/common.cl" "${KERNEL_MATH}" "${SRC_DIR}/scalars.cl" ${cl_files})
set(body "")
set(total 0)
foreach(f ${ordered})
  file(READ "${f}" hex HEX)
  string(LENGTH "${hex}" len)
  math(EXPR bytes "${len} / 2")
  math(EXPR total "${total} + ${bytes} + 1")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  get_filename_component(name "${f}" NAME)
  string(APPEND body "/* ${name} */\n${hex}0x0a,\n")
endforeach()
file(WRITE "${OUT}.tmp"
  "/* Generated at build time from the kernels/opencl/ sources by plugins/opencl/embed.cmake. */\n"
  "#include <stddef.h>\n"
  "const char ampx_ocl_source[] = {\n${body}0x00};\n"
  "const size_t ampx_ocl_source_size = ${total};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
