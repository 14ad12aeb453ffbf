# Generates the low-level layer of the Java binding (cmake -P).
#
# Inputs: SWIG (executable), INTERFACE (kvcache.i), UMBRELLA (kvcache.h),
# INCLUDE_DIR (include/), GENERATED_INCLUDE_DIR (the build's include/ with
# version.h), OUT (output folder), WORDSIZE64 (int64_t is long).
# Writes OUT/kvcache_headers.i (one %include per #include of the umbrella,
# in its order, so a new module header is wrapped with no change here),
# OUT/kvcache_wrap.c (the JNI code), OUT/java/org/kvcache/*.java and
# OUT/java-sources.txt (the generated Java files, for javac @file).
foreach(v SWIG INTERFACE UMBRELLA INCLUDE_DIR GENERATED_INCLUDE_DIR OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "swig_generate.cmake: ${v} is not set")
  endif()
endforeach()

file(STRINGS ${UMBRELLA} lines REGEX "^#include \"kvcache/[a-z_0-9]+\\.h\"")
set(includes "/* Generated from kvcache.h by swig_generate.cmake. */\n")
foreach(line ${lines})
  string(REGEX REPLACE "^#include (\"kvcache/[a-z_0-9]+\\.h\").*" "%include \\1" inc "${line}")
  string(APPEND includes "${inc}\n")
endforeach()
if(NOT lines)
  message(FATAL_ERROR "swig_generate.cmake: no #include \"kvcache/...\" line in ${UMBRELLA}")
endif()
file(WRITE ${OUT}/kvcache_headers.i.tmp "${includes}")
file(COPY_FILE ${OUT}/kvcache_headers.i.tmp ${OUT}/kvcache_headers.i ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}/kvcache_headers.i.tmp)

# Stale classes of a struct that was renamed must not survive.
file(REMOVE_RECURSE ${OUT}/java)
file(MAKE_DIRECTORY ${OUT}/java/org/kvcache)
set(inc_flags -I${OUT} -I${INCLUDE_DIR} -I${GENERATED_INCLUDE_DIR})
# int64_t is long on LP64 Linux (glibc); stdint.i follows SWIGWORDSIZE64.
if(WORDSIZE64)
  list(APPEND inc_flags -DSWIGWORDSIZE64)
endif()
execute_process(
  COMMAND ${SWIG} -java -nopgcpp -Wextra -package org.kvcache
          -outdir ${OUT}/java/org/kvcache -o ${OUT}/kvcache_wrap.c.tmp
          ${inc_flags} ${INTERFACE}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "swig failed (${rc})")
endif()
file(COPY_FILE ${OUT}/kvcache_wrap.c.tmp ${OUT}/kvcache_wrap.c ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}/kvcache_wrap.c.tmp)

# A pointer type that no typemap of kvcache.i handles would become an
# unusable SWIGTYPE_p_* class: refuse it here, naming the type.
file(GLOB typewrappers ${OUT}/java/org/kvcache/SWIGTYPE_*.java)
if(typewrappers)
  message(FATAL_ERROR "swig produced type wrappers for pointer types that kvcache.i does not "
                      "map to addresses (add them to a KVC_ADDRESS line): ${typewrappers}")
endif()

file(GLOB sources ${OUT}/java/org/kvcache/*.java)
list(SORT sources)
string(REPLACE ";" "\n" listing "${sources}")
file(WRITE ${OUT}/java-sources.txt "${listing}\n")
