#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Installs rucx's C API under PREFIX with UCX's file names, so that programs
# written for UCX 1.13 build against it (headers, pkg-config files) and
# binaries built against UCX 1.13 run on it (sonames):
#
#   PREFIX/lib/libucp.so.0            the library (cargo build -p rucx-capi)
#   PREFIX/lib/lib{ucs,ucm,uct}.so.0  empty libraries with UCX's sonames
#   PREFIX/lib/lib*.so                development symlinks
#   PREFIX/include/{ucp,ucs}/...      the headers of capi/include
#   PREFIX/lib/pkgconfig/ucx*.pc      pkg-config files
#
# Every exported symbol, ucs_* included, lives in libucp. The empty
# libraries exist so that binaries listing them as needed load; each of
# them needs libucp.so.0, so that a binary linked against libucs alone
# still finds the ucs_* functions.
#
# Usage: capi/install.sh PREFIX
# Environment: CARGO (default cargo), CARGO_TARGET_DIR (default target/ of
# the repository), CC (default cc), CAPI_FEATURES (cargo features of
# rucx-capi, e.g. "verbs" for RDMA NICs through libibverbs; default none).
set -euo pipefail

usage() {
    echo "usage: $0 PREFIX" >&2
    echo "  installs libucp.so.0, UCX-named stub libraries, headers and" >&2
    echo "  pkg-config files under PREFIX (e.g. \$HOME/.local or /usr/local)" >&2
    exit 2
}

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "error: PREFIX is missing" >&2
    usage
fi

capi_dir=$(cd "$(dirname "$0")" && pwd)
repo_dir=$(dirname "$capi_dir")

mkdir -p "$1"
prefix=$(cd "$1" && pwd)
libdir="$prefix/lib"
includedir="$prefix/include"
pcdir="$libdir/pkgconfig"

cargo=${CARGO:-cargo}
cc=${CC:-cc}
target_dir=${CARGO_TARGET_DIR:-$repo_dir/target}
case "$target_dir" in
    /*) ;;
    *) target_dir="$repo_dir/$target_dir" ;;
esac

features=()
if [ -n "${CAPI_FEATURES:-}" ]; then
    features=(--features "$CAPI_FEATURES")
fi
echo "== building libucp (cargo build --release -p rucx-capi ${features[*]})"
(cd "$repo_dir" && "$cargo" build --release -p rucx-capi "${features[@]}")
built="$target_dir/release/libucp.so"
if [ ! -f "$built" ]; then
    echo "error: $built was not built" >&2
    exit 1
fi

mkdir -p "$libdir" "$includedir" "$pcdir"

echo "== $libdir/libucp.so.0"
# Replace rather than overwrite in place: a running program may have the
# old file mapped.
cp "$built" "$libdir/libucp.so.0.tmp"
mv -f "$libdir/libucp.so.0.tmp" "$libdir/libucp.so.0"
ln -sfn libucp.so.0 "$libdir/libucp.so"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
printf '/* Intentionally empty: rucx exports everything from libucp. */\n' \
    >"$scratch/empty.c"

for name in ucs ucm uct; do
    echo "== $libdir/lib$name.so.0 (empty, needs libucp.so.0)"
    "$cc" -shared -fPIC -Wl,-soname,"lib$name.so.0" \
        -o "$scratch/lib$name.so.0" "$scratch/empty.c" \
        -Wl,--no-as-needed -L"$libdir" -lucp
    mv -f "$scratch/lib$name.so.0" "$libdir/lib$name.so.0"
    ln -sfn "lib$name.so.0" "$libdir/lib$name.so"
done

echo "== $includedir"
cp -R "$capi_dir/include/." "$includedir/"

# The prefix goes into sed's replacement: escape what sed treats specially.
prefix_sed=$(printf '%s\n' "$prefix" | sed 's/[\\|&]/\\&/g')
for template in "$capi_dir"/pkgconfig/*.pc.in; do
    pc="$pcdir/$(basename "$template" .in)"
    echo "== $pc"
    sed "s|@PREFIX@|$prefix_sed|g" "$template" >"$pc"
done

echo "installed rucx's C API under $prefix"
echo "  build:  cc prog.c \$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs ucx)"
echo "  run:    LD_LIBRARY_PATH=$libdir ./prog"
