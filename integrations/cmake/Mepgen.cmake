# Mepgen.cmake -- `make optimize KERNEL=foo` (or `KERNEL=foo cmake --build build --target optimize`) for a
# CMake project.
#
#   set(CMAKE_EXPORT_COMPILE_COMMANDS ON)            # mepgen reads the flags from compile_commands.json
#   include(path/to/mepgen/integrations/cmake/Mepgen.cmake)
#   mepgen_add_targets()                             # optimize, mepgen-mep, mepgen-patch, mepgen-revert, mepgen-list
#
# KERNEL (and APPLY=1 to apply the patch) are read from the environment when the target runs, so
#   make optimize KERNEL=heat::diffuse_step APPLY=1      (Makefile generators)
#   KERNEL=heat::diffuse_step cmake --build build --target optimize
# both work. MEPGEN_EXECUTABLE, MEPGEN_MEP_FLAGS and MEPGEN_OPTIMIZE_FLAGS are cache variables.

set(MEPGEN_EXECUTABLE "mepgen" CACHE STRING "How to run mepgen (e.g. 'python3 -m mepgen.cli')")
set(MEPGEN_MEP_FLAGS "" CACHE STRING "Extra flags for `mepgen mep` (e.g. --size N=4194304)")
set(MEPGEN_OPTIMIZE_FLAGS "" CACHE STRING "Extra flags for `mepgen optimize` (e.g. --budget 40)")

function(mepgen_add_targets)
  set(app "${CMAKE_SOURCE_DIR}")
  set(db "${CMAKE_BINARY_DIR}")
  set(m "${MEPGEN_EXECUTABLE}")
  set(need_kernel "test -n \"$KERNEL\" || { echo 'Mepgen.cmake: set KERNEL=<name> (target mepgen-list shows them)' >&2; exit 2; }")
  set(extract "${m} extract '${app}' -p '${db}'")
  set(mep "${m} mep -C '${app}' --keep-edits ${MEPGEN_MEP_FLAGS} \"$KERNEL\"")
  set(opt "${m} optimize -C '${app}' ${MEPGEN_OPTIMIZE_FLAGS} \"$KERNEL\"")
  set(patch "${m} patch -C '${app}' $([ -n \"$APPLY\" ] && echo --apply) \"$KERNEL\"")
  add_custom_target(mepgen-list COMMAND sh -c "${extract} && ${m} list -C '${app}'" VERBATIM USES_TERMINAL)
  add_custom_target(mepgen-mep COMMAND sh -c "${need_kernel} && ${extract} && ${mep}" VERBATIM USES_TERMINAL)
  add_custom_target(optimize COMMAND sh -c "${need_kernel} && ${extract} && ${mep} && ${opt} && ${patch}"
                    VERBATIM USES_TERMINAL)
  add_custom_target(mepgen-patch COMMAND sh -c "${need_kernel} && ${patch}" VERBATIM USES_TERMINAL)
  add_custom_target(mepgen-revert COMMAND sh -c "${need_kernel} && ${m} patch -C '${app}' --revert \"$KERNEL\""
                    VERBATIM USES_TERMINAL)
endfunction()
