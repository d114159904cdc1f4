#!/usr/bin/env bash
# copy-runtime-libs.sh OUT BINARY...: copies the shared libraries the binaries
# load (per ldd) into OUT under their own paths, for a slim runtime image of
# the same distribution. Skips what every base image has (the C library and
# loader) and what the host provides (the NVIDIA driver's libcuda); CUDA's
# runtime libraries come from the CUDA runtime base image.
# Used by deploy/docker/*.Dockerfile.
set -euo pipefail
out=$1
shift
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libcuda\.so|libcudart\.so|libcublas|libcublasLt|libnvidia)'
for bin in "$@"; do
  ldd "$bin" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    if [[ $name =~ $skip ]]; then continue; fi
    mkdir -p "$out$(dirname "$path")"
    cp -L "$path" "$out$path"
  done
done
