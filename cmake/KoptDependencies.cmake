# Third-party libraries: Debian 12's packages (scripts/setup installs them).
# Each find_package names the Debian package that provides it, so that a
# missing one fails with a message that says what to install.
find_package(Threads REQUIRED)

macro(kopt_require_package pkg debian)
  find_package(${pkg} ${ARGN} QUIET)
  if(NOT ${pkg}_FOUND)
    message(FATAL_ERROR "kopt needs ${pkg}: install the Debian package '${debian}' "
                        "(scripts/setup does this for you)")
  endif()
endmacro()

kopt_require_package(nlohmann_json nlohmann-json3-dev 3.11)
kopt_require_package(CLI11 libcli11-dev)
kopt_require_package(CURL libcurl4-openssl-dev)
kopt_require_package(SQLite3 libsqlite3-dev)
kopt_require_package(fmt libfmt-dev)
kopt_require_package(spdlog libspdlog-dev)

# cpp-httplib ships only a pkg-config file on Debian.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
if(NOT HTTPLIB_FOUND)
  message(FATAL_ERROR "kopt needs cpp-httplib: install the Debian package 'libcpp-httplib-dev'")
endif()
add_library(kopt_httplib INTERFACE)
add_library(kopt::httplib ALIAS kopt_httplib)
target_link_libraries(kopt_httplib INTERFACE PkgConfig::HTTPLIB)

if(KOPT_ENABLE_TESTS)
  kopt_require_package(GTest libgtest-dev)
endif()
