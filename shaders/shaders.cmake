# The shader variants built into whisperd. One line per variant:
#   wd_shader(NAME <variant> SRC <file.comp> [DEFINES ...])
wd_shader(NAME gemm_tex     SRC gemm_tex.comp   DEFINES TM=16 TN=16)
wd_shader(NAME gemm_tex_8x8 SRC gemm_tex.comp   DEFINES TM=8 TN=8)
wd_shader(NAME gemm_tiled   SRC gemm_tiled.comp)
