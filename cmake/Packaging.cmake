# Debian packages of spintune with CPack (`make package`, docs/install.md):
#   spintune-tuner  spintune-tuner, its systemd unit, /etc/spintune/tuner.toml
#   spintune-agent  spintune-agent, spintune-ioload, unit, /etc/spintune/agent.toml
#   spintune-cli    spintune
#   spintune-dev    the C driver headers, spintune.ko's sources (/usr/src)
# each with its man pages and bash completion. Each folder's CMakeLists.txt
# installs its own files into one of these components; packaging/ adds the
# rest. Depends: computed by dpkg-shlibdeps from the binaries.
add_subdirectory(${PROJECT_SOURCE_DIR}/packaging ${PROJECT_BINARY_DIR}/packaging)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME spintune)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "spintune developers <spintune@example.invalid>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tuner agent cli dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

set(spintune_summary_tuner "spintune tuner: fits driver wait tables from agents' samples")
set(spintune_summary_agent "spintune agent: measures a board and applies pushed wait tables")
set(spintune_summary_cli "spintune command line: offline fits, tables, headers, profiles")
set(spintune_summary_dev "spintune driver headers and kernel module sources")
set(spintune_about
  "spintune learns how a device driver should wait for each command to complete\n"
  "(spin, interrupt, spin then interrupt, sleep then spin, poll with sleeps)\n"
  "from completion times measured on the board itself.")
string(CONCAT spintune_about ${spintune_about})
foreach(component tuner agent cli dev)
  string(TOUPPER ${component} C)
  set(CPACK_DEBIAN_${C}_PACKAGE_NAME spintune-${component})
  set(CPACK_COMPONENT_${C}_DESCRIPTION "${spintune_summary_${component}}\n${spintune_about}")
endforeach()

# Example configurations are conffiles: an upgrade keeps local edits.
foreach(component tuner agent)
  string(TOUPPER ${component} C)
  set(dir ${PROJECT_BINARY_DIR}/packaging/debian-${component})
  file(WRITE ${dir}/conffiles "/etc/spintune/${component}.toml\n")
  set(CPACK_DEBIAN_${C}_PACKAGE_CONTROL_EXTRA ${dir}/conffiles)
endforeach()
set(CPACK_DEBIAN_TUNER_PACKAGE_SUGGESTS spintune-cli)
set(CPACK_DEBIAN_AGENT_PACKAGE_SUGGESTS spintune-cli)
# Headers and sources only; a module build needs the kernel's headers, the
# self-test's table comes from `spintune header`.
set(CPACK_DEBIAN_DEV_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS spintune-cli)

# A cross build (tools/cross_build.sh) packages the agent only, for the
# target's Debian architecture. dpkg-shlibdeps needs the target's dpkg
# database, which a sysroot does not have: cross_build.sh names the
# Depends instead (cpack -D CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS=...).
if(CMAKE_CROSSCOMPILING)
  execute_process(COMMAND dpkg-architecture -qDEB_HOST_ARCH -t${CMAKE_LIBRARY_ARCHITECTURE}
    OUTPUT_VARIABLE deb_arch OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${deb_arch})
  set(CPACK_COMPONENTS_ALL agent)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
endif()

include(CPack)
