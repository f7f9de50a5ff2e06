# Install rules and Debian packages (docs/INSTALL.md). `cmake --install BUILD --prefix DIR` gives a
# tree that runs from anywhere: the binaries carry no build-tree path (the only run-time paths they
# use are the system's: the built-in calibration texts of Debian packages, docs/DATA.md).
#
#   bin/                                   ripplekv, ripplekv-scheduler, ripplekv-agent (component
#                                          "ripplekv"), ripplekv-worker (component "worker")
#   share/doc/ripplekv/                    README, docs/, examples/ (deploy/: Helm chart, Slurm,
#                                          Docker, Grafana, the local cluster)
#   share/bash-completion/completions/     ripplekv's completion, generated from its commands
#   lib/systemd/system/                    ripplekv-scheduler.service, ripplekv-agent@.service
#   SYSCONFDIR/ripplekv/                   scheduler.env, agent.env (the units' flags)
#
# `cpack -G DEB` (scripts/package) makes one package per component: `ripplekv` (CLI, scheduler,
# agent) and `ripplekv-worker`; a build with CUDA names them ripplekv-cuda and
# ripplekv-worker-cuda (each conflicting with, and providing, the CPU one). Run-time
# dependencies come from dpkg-shlibdeps, plus the packages of the built-in calibration texts.
include(GNUInstallDirs)

# Libraries outside the system's directories (the CUDA toolkit's) stay found after installing.
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS ripplekv ripplekv-scheduler ripplekv-agent
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ripplekv)
install(TARGETS ripplekv-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT worker)

install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ripplekv)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT ripplekv)
install(DIRECTORY deploy/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT ripplekv
        USE_SOURCE_PERMISSIONS)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/ripplekv-worker
        COMPONENT worker)

# Bash completion, written by the built ripplekv from its own command definitions.
set(RIPPLEKV_COMPLETION ${CMAKE_BINARY_DIR}/completion/ripplekv)
add_custom_command(
  OUTPUT ${RIPPLEKV_COMPLETION}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/completion
  COMMAND ripplekv completion bash > ${RIPPLEKV_COMPLETION}
  DEPENDS ripplekv
  COMMENT "bash completion of ripplekv"
  VERBATIM)
add_custom_target(ripplekv_completion ALL DEPENDS ${RIPPLEKV_COMPLETION})
install(FILES ${RIPPLEKV_COMPLETION}
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/bash-completion/completions COMPONENT ripplekv)

# systemd units (deploy/systemd/), their ExecStart pointed at this install's bin/, and the
# environment files they read, where the system keeps them.
set(RIPPLEKV_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
    "Where the systemd units are installed, relative to the prefix")
foreach(unit ripplekv-scheduler.service ripplekv-agent@.service)
  if(EXISTS ${PROJECT_SOURCE_DIR}/deploy/systemd/${unit})
    file(READ ${PROJECT_SOURCE_DIR}/deploy/systemd/${unit} text)
    string(REPLACE "/usr/bin/" "${CMAKE_INSTALL_FULL_BINDIR}/" text "${text}")
    file(WRITE ${CMAKE_BINARY_DIR}/systemd/${unit} "${text}")
    install(FILES ${CMAKE_BINARY_DIR}/systemd/${unit} DESTINATION ${RIPPLEKV_SYSTEMD_UNIT_DIR}
            COMPONENT ripplekv)
  endif()
endforeach()
# The config files: /etc/ripplekv for a /usr install (the package), else etc/ under the prefix.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(RIPPLEKV_CONFIG_DIR ${CMAKE_INSTALL_FULL_SYSCONFDIR}/ripplekv)
else()
  set(RIPPLEKV_CONFIG_DIR ${CMAKE_INSTALL_SYSCONFDIR}/ripplekv)
endif()
set(RIPPLEKV_CONFFILES "")
foreach(example scheduler agent)
  if(EXISTS ${PROJECT_SOURCE_DIR}/deploy/systemd/${example}.env.example)
    install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/${example}.env.example
            DESTINATION ${RIPPLEKV_CONFIG_DIR} RENAME ${example}.env COMPONENT ripplekv)
    string(APPEND RIPPLEKV_CONFFILES "${CMAKE_INSTALL_FULL_SYSCONFDIR}/ripplekv/${example}.env\n")
  endif()
endforeach()
# dpkg keeps an operator's edits of these across upgrades.
file(WRITE ${CMAKE_BINARY_DIR}/debian/conffiles "${RIPPLEKV_CONFFILES}")

# Debian packages.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ripplekv)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Per-layer KV-cache budgets for LLM serving, by measurement")
set(RIPPLEKV_PACKAGE_MAINTAINER "RippleKV developers <maintainers@ripplekv.invalid>" CACHE STRING
    "The Maintainer field of the Debian packages")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${RIPPLEKV_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# Absolute destinations (/etc) land in the package, not on the building machine.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_COMPONENTS_ALL ripplekv worker)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
if(RIPPLEKV_HAVE_CUDA)
  set(suffix "-cuda")
  # NVIDIA's libraries come from its own packages: dpkg-shlibdeps treats them as private.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
  set(CPACK_DEBIAN_RIPPLEKV_PACKAGE_CONFLICTS ripplekv)
  set(CPACK_DEBIAN_RIPPLEKV_PACKAGE_PROVIDES ripplekv)
  set(CPACK_DEBIAN_RIPPLEKV_PACKAGE_REPLACES ripplekv)
  set(CPACK_DEBIAN_WORKER_PACKAGE_CONFLICTS ripplekv-worker)
  set(CPACK_DEBIAN_WORKER_PACKAGE_PROVIDES ripplekv-worker)
  set(CPACK_DEBIAN_WORKER_PACKAGE_REPLACES ripplekv-worker)
else()
  set(suffix "")
endif()
set(CPACK_DEBIAN_RIPPLEKV_PACKAGE_NAME "ripplekv${suffix}")
set(CPACK_DEBIAN_WORKER_PACKAGE_NAME "ripplekv-worker${suffix}")
set(CPACK_COMPONENT_RIPPLEKV_DESCRIPTION
    "The ripplekv command, the calibration scheduler and the serving-node agent")
if(RIPPLEKV_HAVE_CUDA)
  set(CPACK_COMPONENT_WORKER_DESCRIPTION
      "The calibration worker: CPU and CUDA GPUs (NVIDIA's CUDA 13 runtime needed), MPI/NCCL TP")
else()
  set(CPACK_COMPONENT_WORKER_DESCRIPTION "The calibration worker: CPU, MPI tensor parallelism")
endif()
# The built-in calibration texts (docs/DATA.md) are files of these packages.
set(CPACK_DEBIAN_RIPPLEKV_PACKAGE_DEPENDS "cmake-data, golang-github-pierrec-lz4-dev")
set(CPACK_DEBIAN_WORKER_PACKAGE_DEPENDS "cmake-data, golang-github-pierrec-lz4-dev")
# The units' system user (cmake/debian/postinst), and the config files dpkg keeps.
set(CPACK_DEBIAN_RIPPLEKV_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/debian/postinst)
if(NOT RIPPLEKV_CONFFILES STREQUAL "")
  list(APPEND CPACK_DEBIAN_RIPPLEKV_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/debian/conffiles)
endif()
set(CPACK_DEBIAN_RIPPLEKV_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
