# shellcheck shell=bash
# Sourced by pack.sh and arms.sh: copies into a folder every shared library
# the given binaries need except glibc, the C++ runtime and CUDA's own (the
# GPU machine has those, matching its driver).
# Usage: copy_device_libs DIR BINARY...
copy_device_libs() {
  local dir=$1 lib
  shift
  local system='/(ld-linux|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libnvidia)[.-]'
  mkdir -p "$dir"
  for b in "$@"; do ldd "$b" | awk '/=> \//{print $3}'; done | sort -u | while read -r lib; do
    [[ $lib =~ $system ]] || cp -L "$lib" "$dir/"
  done
}
