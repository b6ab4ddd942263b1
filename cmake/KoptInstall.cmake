# Install rules and the Debian package (CPack). FHS layout under the prefix
# (/usr for the package, /usr/local by default):
#   bin/kopt, bin/kopt-worker           kopt finds kopt-worker beside itself
#   share/kopt/{prompts,knowledge_base/{techniques,references},hardware,
#               bench,examples,schema}  found by common/data_paths (bin/../share/kopt)
#   share/doc/kopt/                     README, docs/*.md, daemon.example.json
#   lib/systemd/system/kopt-daemon.service, lib/sysusers.d/kopt.conf
#   <sysconfdir>/kopt/daemon.json       the daemon's config (a conffile)
# `scripts/setup --package` builds build-package/kopt_<version>_amd64.deb.
include(GNUInstallDirs)

set(KOPT_UNITDIR "lib/systemd/system" CACHE STRING "systemd unit directory, relative to the prefix")
set(KOPT_SYSUSERSDIR "lib/sysusers.d" CACHE STRING "sysusers.d directory, relative to the prefix")
set(_share "${CMAKE_INSTALL_DATADIR}/kopt")
set(_doc "${CMAKE_INSTALL_DOCDIR}")

install(TARGETS kopt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT kopt)
if(TARGET kopt-worker)
  install(TARGETS kopt-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT kopt)
endif()

install(DIRECTORY prompts/templates/ DESTINATION ${_share}/prompts COMPONENT kopt
        FILES_MATCHING PATTERN "*.md" PATTERN "*.txt")
install(DIRECTORY knowledge_base/techniques knowledge_base/references DESTINATION ${_share}/knowledge_base
        COMPONENT kopt)
install(DIRECTORY configs/hardware/ DESTINATION ${_share}/hardware COMPONENT kopt)
install(DIRECTORY configs/bench/ DESTINATION ${_share}/bench COMPONENT kopt)
install(DIRECTORY configs/examples/ DESTINATION ${_share}/examples COMPONENT kopt)
install(DIRECTORY configs/schema/ DESTINATION ${_share}/schema COMPONENT kopt)

install(FILES README.md DESTINATION ${_doc} COMPONENT kopt)
install(DIRECTORY docs/ DESTINATION ${_doc} COMPONENT kopt FILES_MATCHING PATTERN "*.md")
install(FILES configs/daemon.example.json DESTINATION ${_doc}/examples COMPONENT kopt)

install(FILES configs/kopt.sysusers.conf DESTINATION ${KOPT_SYSUSERSDIR} RENAME kopt.conf COMPONENT kopt)

# The unit names installed paths, and /etc is not under the prefix /usr, so
# both are written at install time from the prefix then in force (cmake
# --install --prefix, CPack's /usr), not the one configured.
file(READ configs/daemon.example.json _example)
string(JSON _example SET "${_example}" "gpus" "1")  # GPU 0 only; edit "gpus" for more
# Cubins under the unit's CacheDirectory=, not in the state directory.
string(JSON _example SET "${_example}" "worker" "cache_dir" "\"/var/cache/kopt/cubin\"")
file(WRITE ${PROJECT_BINARY_DIR}/packaging/daemon.json "${_example}\n")
install(CODE "
  set(_prefix \"\${CMAKE_INSTALL_PREFIX}\")
  if(_prefix STREQUAL \"/usr\")
    set(KOPT_SYSCONFDIR \"/etc/kopt\")
  else()
    set(KOPT_SYSCONFDIR \"\${_prefix}/etc/kopt\")
  endif()
  set(KOPT_BINDIR \"\${_prefix}/${CMAKE_INSTALL_BINDIR}\")
  set(KOPT_DOCDIR \"\${_prefix}/${CMAKE_INSTALL_DOCDIR}\")
  set(KOPT_UNITDIR \"\${_prefix}/${KOPT_UNITDIR}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/configs/kopt-daemon.service.in\"
                 \"${PROJECT_BINARY_DIR}/packaging/kopt-daemon.service\" @ONLY)
  file(INSTALL \"${PROJECT_BINARY_DIR}/packaging/kopt-daemon.service\" DESTINATION \"\${KOPT_UNITDIR}\"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  file(INSTALL \"${PROJECT_BINARY_DIR}/packaging/daemon.json\" DESTINATION \"\${KOPT_SYSCONFDIR}\"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
" COMPONENT kopt)

# ---- Debian package -------------------------------------------------------
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "kopt")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_VENDOR "kopt")
set(CPACK_PACKAGE_CONTACT "kopt maintainers <kopt@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "profile-guided GPU kernel optimization daemon")
set(CPACK_PACKAGE_DESCRIPTION "kopt sends kernel-generation prompts to LLM APIs, profiles each candidate
 with CUPTI on the GPU and feeds the measurements back. Contains the kopt
 control plane (CLI and daemon), the kopt-worker GPU process, prompt
 templates, the knowledge base, GPU peak tables and a hardened systemd unit.
 The worker needs the CUDA 13 toolkit's NVRTC and CUPTI (not packaged by
 Debian) and, to measure, an NVIDIA driver; run `kopt doctor` to check.")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")  # kopt_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION "devel")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Dependencies from the binaries' NEEDED entries (dpkg-shlibdeps). CUDA's
# libraries have no Debian package here; CPack passes --ignore-missing-info,
# and the Recommends/description name what is needed instead.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "systemd")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurm-client")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/packaging/debian/postinst;${PROJECT_SOURCE_DIR}/packaging/debian/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES OFF)
# DESTDIR staging, so that the absolute /etc/kopt of the install code lands
# in the package and not on the build machine.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX "/usr")
# cpack packages what is built and does not run the build first (`make
# install` neither): scripts/setup --package builds, then packs, and the
# package test reuses the test build's binaries.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
# Only what the install rules above put in the package (no test targets).
set(CPACK_INSTALL_CMAKE_PROJECTS "${PROJECT_BINARY_DIR};kopt;kopt;/")
include(CPack)
