# Sourced by the build scripts (scripts/build.sh, scripts/build-cross.sh,
# .ci/run): when ccache is installed (scripts/setup.sh installs it) and
# FCB_CCACHE is not 0, sets fcb_ccache_args to CMake's compiler-launcher
# options so that a rebuild of unchanged sources, in this or another clone
# (base_dir is the clone, so its absolute paths do not enter the hash), is a
# cache hit. Respects a CCACHE_DIR / CCACHE_BASEDIR / CCACHE_MAXSIZE the caller
# set. Expects $repo.
fcb_ccache_args=()
if [ "${FCB_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$repo}"
  # Debug info (the sanitizer build's -g1) would otherwise hash the build
  # directory; the paths it records then name the clone that filled the cache.
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
  fcb_ccache_args=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
