#!/usr/bin/env bash
# Installs ptxevo's dependencies from Debian's packages, checks the CUDA toolkit and builds
# build/ptxevo. Safe to run again: packages already present are not reinstalled and the build
# is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "setup: error: $*" >&2; exit 1; }

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libtbb-dev libeigen3-dev libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
  libsqlite3-dev libcurl4-openssl-dev libssl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost-context-dev  # fibers for the KDA kernels run on the CPU in the tests
  openmpi-bin libopenmpi-dev  # campaigns across ranks and hosts (cluster/, docs/distributed.md)
  clang-19 llvm-19 lld-19 libclang-rt-19-dev
  chromium  # headless: renders ptxevo report's HTML in report/tests/report_render_test.cpp
  python3 python3-torch  # CPU torch for the bench harness tests (bench/*/test_*.py), run by /usr/bin/python3
)

command -v dpkg-query >/dev/null || die "this script needs a Debian-based system (dpkg/apt-get); install the packages listed in scripts/setup.sh by hand"
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "need root or sudo to install: ${missing[*]}"
    SUDO="sudo"
  fi
  $SUDO apt-get update -qq || die "apt-get update failed (no network to the Debian mirror?)"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "apt-get install failed for: ${missing[*]}"
else
  echo "setup: all Debian packages present"
fi

# The CUDA toolkit comes from NVIDIA, not Debian: check it rather than install it.
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
[ -x "$CUDA_HOME/bin/ptxas" ] || die "no ptxas in $CUDA_HOME/bin: install the CUDA 13 toolkit or set CUDA_HOME"
[ -f "$CUDA_HOME/include/nvrtc.h" ] || die "no nvrtc.h in $CUDA_HOME/include: the CUDA toolkit's NVRTC is required"
ls "$CUDA_HOME"/lib64/libnvrtc.so* >/dev/null 2>&1 || die "no libnvrtc.so in $CUDA_HOME/lib64"
ver=$("$CUDA_HOME/bin/ptxas" --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1.\2/p')
case "$ver" in
  13.*) echo "setup: CUDA toolkit $ver at $CUDA_HOME" ;;
  *) die "CUDA toolkit 13.x required, found '${ver:-unknown}' at $CUDA_HOME" ;;
esac
export PATH="$CUDA_HOME/bin:$PATH"

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$CUDA_HOME" >/dev/null
# The main job needs only the CLI; scripts/test.sh builds the test executables it runs, and
# scripts/pack_gpu_bundle.sh the GPU machine's (building everything here cost CI ~5 minutes).
cmake --build build --parallel "$(nproc)" --target ptxevo
echo "setup: built build/ptxevo"
