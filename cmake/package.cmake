# The Debian packages, made by CPack from the install rules:
#   cmake -S . -B build-deb -DCMAKE_INSTALL_PREFIX=/usr && cmake --build build-deb
#   (cd build-deb && cpack -G DEB)
# ptrace-gpu: the binary, its Python agent, man pages, completion and the
#   sampler's unit; Depends computed from the binaries by dpkg-shlibdeps.
# ptrace-gpu-cupti: the CUPTI agent (GPU activity), apart because libcupti
#   comes from NVIDIA's CUDA toolkit, which no Debian package provides: its
#   dependency cannot be computed, and a host without CUDA needs none of it.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ptrace-gpu)
set(CPACK_PACKAGE_VENDOR "ptrace-gpu")
set(CPACK_PACKAGE_CONTACT "ptrace-gpu developers <ptrace-gpu@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "exact tracer for Python and PyTorch GPU workloads (eBPF)")
set(CPACK_PACKAGE_DESCRIPTION
    "ptrace-gpu attaches to a running Python process, or starts a command, and records
every Python call, PyTorch op, CUDA call and off-CPU interval with eBPF uprobes
and tracepoints, merged with CUPTI GPU activity into one trace. Reports: GPU
idle time, cProfile-style tables, flame graphs, Chrome/Perfetto JSON, pprof;
and a low-cost sampler of every Python process on a host.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL main cupti)
# /etc/default/ptrace-gpu is an absolute destination (GNUInstallDirs, /usr)
set(CPACK_SET_DESTDIR ON)
# Debian ships binaries stripped (debug info belongs in a -dbgsym package)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

set(CPACK_DEBIAN_MAIN_PACKAGE_NAME ptrace-gpu)
set(CPACK_DEBIAN_MAIN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_MAIN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_MAIN_PACKAGE_RECOMMENDS "bash-completion")
set(CPACK_DEBIAN_MAIN_PACKAGE_SUGGESTS "ptrace-gpu-cupti, python3-torch, systemd")
set(CPACK_DEBIAN_MAIN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/dist/debian/conffiles
    ${CMAKE_SOURCE_DIR}/dist/debian/postinst
    ${CMAKE_SOURCE_DIR}/dist/debian/postrm)
set(CPACK_DEBIAN_MAIN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_COMPONENT_MAIN_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")

set(CPACK_DEBIAN_CUPTI_PACKAGE_NAME ptrace-gpu-cupti)
set(CPACK_DEBIAN_CUPTI_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_CUPTI_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_CUPTI_PACKAGE_DEPENDS "ptrace-gpu (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_CUPTI_DESCRIPTION
    "ptrace-gpu's CUPTI agent: GPU kernels, copies and syncs with their timing
Loaded into a traced process that uses CUDA, it hands CUPTI's activity records
to ptrace-gpu record. Needs libcupti from NVIDIA's CUDA toolkit
(/usr/local/cuda), which is not packaged here.")
set(CPACK_COMPONENT_CUPTI_DEPENDS main)
include(CPack)
