# System libraries, found through pkg-config (scripts/install-deps.sh installs
# them on Debian 12). Each becomes an imported PkgConfig:: target.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_library(WD_LIBM m)

pkg_check_modules(VULKAN     REQUIRED IMPORTED_TARGET vulkan)
pkg_check_modules(MHD        REQUIRED IMPORTED_TARGET libmicrohttpd)
pkg_check_modules(JANSSON    REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(SNDFILE    REQUIRED IMPORTED_TARGET sndfile)
pkg_check_modules(FFTW3F     REQUIRED IMPORTED_TARGET fftw3f)
pkg_check_modules(SYSTEMD    REQUIRED IMPORTED_TARGET libsystemd)
# libswresample converts every input to 16 kHz mono exactly as the ffmpeg
# tool does (core/audio.c); it needs only libavutil, so builds without the
# codecs (WD_FFMPEG=OFF) keep it.
pkg_check_modules(SWR        REQUIRED IMPORTED_TARGET libswresample libavutil)
if(WD_FFMPEG)
  pkg_check_modules(LIBAV    REQUIRED IMPORTED_TARGET libavformat libavcodec libavutil)
endif()
pkg_check_modules(ZLIB       REQUIRED IMPORTED_TARGET zlib)
pkg_check_modules(PCRE2      REQUIRED IMPORTED_TARGET libpcre2-8)
# OpenBLAS: the reference forward pass in tests and the benchmarks' baseline.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)

find_program(GLSLANG_VALIDATOR glslangValidator REQUIRED)
# spirv-opt (spirv-tools) unrolls the register-blocked kernels' loops at build
# time (shaders/CMakeLists.txt, OPT).
find_program(SPIRV_OPT spirv-opt REQUIRED)
# spirv-val checks every optimized kernel (the matrix-unit ones included,
# which no CI device can run) against the Vulkan 1.2 SPIR-V rules.
find_program(SPIRV_VAL spirv-val REQUIRED)
