# cmake -DIN=x.spv -DOUT=x.c -DNAME=sym -P embed_spirv.cmake
# Writes the SPIR-V words of IN as `const uint32_t wd_spv_<NAME>[]` so that the
# binary carries its shaders and needs no runtime compiler or .spv files.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR rem "${n_hex} % 8")
if(NOT rem EQUAL 0 OR n_hex EQUAL 0)
  message(FATAL_ERROR "${IN}: not a whole number of 32-bit SPIR-V words")
endif()
# SPIR-V is little-endian on disk; reassemble each word as 0xDDCCBBAA.
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "(0x........u,0x........u,0x........u,0x........u,0x........u,0x........u,)" "\\1\n  " words "${words}")
math(EXPR n_words "${n_hex} / 8")
file(WRITE "${OUT}" "/* Generated from ${IN}; do not edit. */\n#include <stdint.h>\n#include <stddef.h>\nextern const uint32_t wd_spv_${NAME}[];\nextern const size_t wd_spv_${NAME}_words;\nconst uint32_t wd_spv_${NAME}[] = {\n  ${words}\n};\nconst size_t wd_spv_${NAME}_words = ${n_words};\n")
