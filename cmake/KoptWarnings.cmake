# Warnings and sanitizers live on INTERFACE targets so that every kopt target
# opts in with one link line, and third-party code is not affected.
add_library(kopt_warnings INTERFACE)
add_library(kopt::warnings ALIAS kopt_warnings)
target_compile_options(kopt_warnings INTERFACE
  $<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow
    -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
    -Wconversion -Wsign-conversion -Wnull-dereference -Wdouble-promotion -Wformat=2
    -Wimplicit-fallthrough>)

add_library(kopt_sanitizers INTERFACE)
add_library(kopt::sanitizers ALIAS kopt_sanitizers)
if(KOPT_SANITIZE)
  # Host C++ only: nvcc does not take these flags, and device code is not
  # instrumented by the host sanitizers anyway.
  target_compile_options(kopt_sanitizers INTERFACE
    $<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined>)
  target_link_options(kopt_sanitizers INTERFACE -fsanitize=address,undefined)
endif()

# Every kopt target links this one.
add_library(kopt_build_options INTERFACE)
add_library(kopt::build_options ALIAS kopt_build_options)
target_link_libraries(kopt_build_options INTERFACE kopt_warnings kopt_sanitizers)
