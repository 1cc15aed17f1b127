# Debian packages (CPack, one per component; scripts/package.sh builds them, docs/install.md):
#   topo-aware                       the command, its docs and examples
#   topo-aware-spank-slurm-<release> the SPANK plugin built for one Slurm release, pinned to that
#                                    release's slurm-wlm-basic-plugins (what srun and slurmd
#                                    depend on at their exact version), its plugstack.conf line
#                                    under /usr/share/topo-aware, never enabled by the package.
# Slurm loads a plugin only where its major.minor matches, so the plugin package cannot outlive a
# Slurm upgrade: dpkg holds the two together ("upgrade Slurm and the plugin in one transaction").
# Build the packages from a tree configured with CMAKE_INSTALL_PREFIX=/usr (Debian's paths).
set(CPACK_PACKAGE_NAME topo-aware)
set(CPACK_PACKAGE_VENDOR "topo-aware")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "topo-aware maintainers <topo-aware@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_STRIP_FILES ON)  # no debug info in the packages
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # libhwloc, libstdc++, ... from the binaries (dpkg-shlibdeps)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/topo-aware/topo-aware")
set(CPACK_COMPONENTS_ALL cli)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME topo-aware)
set(CPACK_COMPONENT_CLI_DESCRIPTION
  "Topology-aware rank mapping for Slurm GPU jobs: the command line\n"
  "topo-aware discovers node and fabric topology, maps a training job's parallel layout\n"
  "to GPUs, NICs and CPUs, explains the plan and checks nodes (doctor).")
if(TARGET topo_aware_spank)
  list(APPEND CPACK_COMPONENTS_ALL spank)
  set(rel ${TOPOAWARE_SPANK_SYSTEM_RELEASE})
  string(REPLACE "." ";" parts ${rel})
  list(GET parts 0 major)
  list(GET parts 1 minor)
  math(EXPR next "${minor} + 1")
  if(next LESS 10)
    set(next "0${next}")
  endif()
  set(CPACK_DEBIAN_SPANK_PACKAGE_NAME topo-aware-spank-slurm-${rel})
  set(CPACK_DEBIAN_SPANK_PACKAGE_DEPENDS
    "slurm-wlm-basic-plugins (>= ${rel}~), slurm-wlm-basic-plugins (<< ${major}.${next}~)")
  set(CPACK_DEBIAN_SPANK_PACKAGE_RECOMMENDS topo-aware)
  set(CPACK_COMPONENT_SPANK_DESCRIPTION
    "topo-aware's SPANK plugin for Slurm ${rel}: srun --topo-aware\n"
    "Built for Slurm ${rel} only (Slurm loads a plugin only where major.minor match).\n"
    "Not enabled by the package: see /usr/share/topo-aware/plugstack.conf.d/topo-aware.conf.")
endif()
include(CPack)
