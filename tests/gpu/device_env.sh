# Sourced by the scripts that run on the GPU machine (bench/gpu_check.sh,
# tests/gpu/device_ctest.sh): sets ROOT, OUT, DEPS and LIBDIR and points
# pkg-config, the compiler and the loader at the Debian packages that
# machine lacks (xxhash, cmocka, Google Benchmark), carried unpacked in
# .device-deps/root. Prepare that folder once, here:
#   mkdir -p .device-deps/debs && cd .device-deps/debs && apt-get download \
#     libxxhash-dev libxxhash0 libcmocka-dev libcmocka0 libbenchmark-dev \
#     libbenchmark1debian libgtest-dev && cd .. && for f in debs/*.deb; do dpkg -x $f root; done
ROOT=$(pwd)
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
DEPS=$ROOT/.device-deps/root/usr
LIBDIR=$DEPS/lib/x86_64-linux-gnu
# The unpacked .pc files still say prefix=/usr.
sed -i "s|^prefix=.*|prefix=$DEPS|" "$LIBDIR"/pkgconfig/*.pc
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CPATH=$DEPS/include LIBRARY_PATH=$LIBDIR
export PATH=/usr/local/cuda/bin:$PATH
