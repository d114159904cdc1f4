# shellcheck shell=bash
# Sourced by pack.sh and arms.sh here, run.sh and cluster.sh on the GPU machine.
# copy_device_libs DIR BINARY...: copies into DIR every shared library the
# binaries need except glibc, the C++ runtime and CUDA's own (the GPU machine
# has those, matching its driver).
# cuda_lib_dir: prints the GPU machine's CUDA library folder: the toolkit's,
# else the one pip installed libcublasLt into.
copy_device_libs() {
  local dir=$1 lib
  shift
  local system='/(ld-linux|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libnvidia)[.-]'
  mkdir -p "$dir"
  for b in "$@"; do ldd "$b" | awk '/=> \//{print $3}'; done | sort -u | while read -r lib; do
    [[ $lib =~ $system ]] || cp -L "$lib" "$dir/"
  done
}

cuda_lib_dir() {
  local dir=/usr/local/cuda/lib64 found
  if [[ ! -e $dir/libcublasLt.so.13 ]]; then
    found=$(find / -name 'libcublasLt.so.13*' -not -path '*/proc/*' 2>/dev/null | head -1)
    [[ -n "$found" ]] && dir=$(dirname "$found")
  fi
  echo "$dir"
}
