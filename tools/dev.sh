#!/usr/bin/env bash
# Sets up whatever this machine is missing, builds npusim, and runs the demo or every test.
#   bash tools/dev.sh demo   # the README's first command
#   bash tools/dev.sh test   # the README's second command (and CI's)
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(build-essential cmake ninja-build pkg-config ccache libsystemc-dev libboost-program-options-dev
  libfmt-dev libyaml-cpp-dev libgtest-dev libgmock-dev libeigen3-dev pybind11-dev clang-format
  chromium-headless-shell)  # the last renders `npusim sweep report`'s page in a test
# scalesim: SCALE-Sim, the reference the systolic array is validated against (bench/scalesim_validation.py); its 3.0.0
# converts one-element arrays with int(), which numpy 2.4 rejects, hence numpy<2.4.
PYTHON_PACKAGES=(torch==2.13.0 scikit-build-core ninja pytest pytest-xdist==3.8.0 "numpy<2.4" matplotlib ruff==0.17.6
  transformers==5.23.0 expecttest==0.3.0 scalesim==3.0.0 dask==2026.8.0 distributed==2026.8.0 optuna==5.0.0
  pandas==3.1.1 pyarrow==26.0.1 pyyaml scipy tqdm)
PYTHON=${PYTHON:-python3}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_debian_packages() {
  local missing=()
  for package in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

install_python_packages() {
  # torch is pinned: 2.13.0 is the CPU build on this machine's disk; anything looser pulls a multi-GB CUDA build.
  if ! TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PYTHON" - "${PYTHON_PACKAGES[@]}" <<'PY' 2>/dev/null; then
import sys
from importlib.metadata import version
pins = dict(arg.split("==") for arg in sys.argv[1:] if "==" in arg)
import torch
assert torch.__version__.split("+")[0] == pins["torch"]
assert version("ruff") == pins["ruff"]  # formatting must not change with ruff releases
assert version("transformers") == pins["transformers"]  # the GPT-2 test's model code
assert version("pytest-xdist") == pins["pytest-xdist"]  # the Python tests run on every core (-n)
assert version("expecttest") == pins["expecttest"]  # PyTorch's OpInfo test machinery imports it
assert version("scalesim") == pins["scalesim"]  # the reference of tests/python/test_scalesim_validation.py
assert tuple(map(int, version("numpy").split(".")[:2])) < (2, 4)  # SCALE-Sim 3.0.0 needs numpy < 2.4
for name in ("dask", "distributed", "optuna", "pandas", "pyarrow"):  # npusim sweep (docs/sweeps.md)
    assert version(name) == pins[name], name
for name in ("scikit-build-core", "ninja", "pytest", "numpy", "matplotlib", "pyyaml", "scipy", "tqdm"):
    version(name)
PY
    echo "== installing Python packages: ${PYTHON_PACKAGES[*]}"
    "$PYTHON" -m pip install -q --disable-pip-version-check "${PYTHON_PACKAGES[@]}"
  fi
}

build_and_install() {
  echo "== building npusim (C++ libraries, tools, tests, PyTorch backend) against the installed torch"
  local started=$SECONDS
  # --no-build-isolation: build against the torch already installed instead of downloading one.
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps .
  echo "== built and installed in $((SECONDS - started)) s"
}

# The C++ libraries and their GoogleTest suites, and the fuzz targets' smoke runs, built with AddressSanitizer and
# UndefinedBehaviorSanitizer in a build directory of their own (ccache keeps a rebuild short), then the runtime's
# threaded tests with ThreadSanitizer; any finding fails.
# docs/robustness.md: what runs, and how long it takes.
# A build whose log is shown only when it fails.
quiet_build() {
  local directory=$1
  shift
  if ! cmake --build "$directory" -j "$(nproc)" "$@" >"$directory/build.log" 2>&1; then
    tail -n 60 "$directory/build.log"
    return 1
  fi
}

sanitizer_tests() {
  echo "== C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan)"
  local started=$SECONDS
  cmake -S . -B build-asan -G Ninja -DNPUSIM_BUILD_TORCH=OFF -DNPUSIM_SANITIZE=address,undefined \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  quiet_build build-asan
  echo "== sanitizer build took $((SECONDS - started)) s"
  started=$SECONDS
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=0:strict_string_checks=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -E "${SANITIZER_TESTS_EXCLUDED}"
  echo "== sanitizer tests took $((SECONDS - started)) s"

  # ThreadSanitizer on the runtime's multi-thread tests (device_test): host threads, device threads and streams.
  echo "== runtime tests under ThreadSanitizer (build-tsan)"
  started=$SECONDS
  cmake -S . -B build-tsan -G Ninja -DNPUSIM_BUILD_TORCH=OFF -DNPUSIM_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >/dev/null
  quiet_build build-tsan --target device_test
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" -R '^Device\.|^Modes/Devices'
  echo "== ThreadSanitizer build and tests took $((SECONDS - started)) s"
}
# Left out of the sanitizer run (a ctest -E regex), run by the plain build only: the fuzz smoke runs that host the
# emulator and the SystemC model in one process, where SystemC's unannotated stack switches give ASan false reports
# (docs/robustness.md).
SANITIZER_TESTS_EXCLUDED='^(TimedProgramFuzz|RingFuzz|FusedKernelFuzz)\.'

setup() {
  install_debian_packages
  install_python_packages
  build_and_install
}

case "${1:-}" in
  demo)
    setup
    # An unchanged CUDA training script (a small ResNet-style CNN) on the simulated NPU, in timed mode, with the
    # performance report at the end.
    npusim run --mode "${NPUSIM_MODE:-timed}" --map-device cuda examples/resnet_training.py
    ;;
  test)
    all_started=$SECONDS
    setup
    echo "== formatting (clang-format, ruff)"
    git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run --Werror
    # Two commands, not an && list: set -e does not stop at a failure on the left of &&.
    "$PYTHON" -m ruff check --quiet .
    "$PYTHON" -m ruff format --check --quiet .
    echo "== C++ tests (GoogleTest through ctest)"
    started=$SECONDS
    ctest --test-dir build --output-on-failure -j "$(nproc)"
    echo "== C++ tests took $((SECONDS - started)) s"
    sanitizer_tests
    echo "== Python tests (pytest, one worker process per core)"
    started=$SECONDS
    "$PYTHON" -m pytest tests/python -q -n "$(nproc)"
    echo "== Python tests took $((SECONDS - started)) s; everything $((SECONDS - all_started)) s"
    ;;
  setup)
    setup
    ;;
  *)
    echo "usage: bash tools/dev.sh demo|test|setup" >&2
    exit 2
    ;;
esac
