#!/bin/sh
# Builds and runs every test: a gcc build (warnings are errors) and the benchmark's quick mode
# against it, the same suites again under AddressSanitizer + UndefinedBehaviorSanitizer, and a
# warning-free clang compile.
# meson prints the count of tests run, passed and failed for each build.
set -eu
cd "$(dirname "$0")/.."

[ -f build/build.ninja ] || meson setup build -Dwerror=true
meson compile -C build
meson test -C build --print-errorlogs --num-processes 2
# The benchmark's short mode, so it keeps working: figures are printed, not asserted (BENCHMARKS.md).
node tests/bench/run.mjs --quick --no-build --build build

[ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined -Dwerror=true
meson compile -C build-asan
ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 3

[ -f build-clang/build.ninja ] || CC=clang meson setup build-clang -Dwerror=true
meson compile -C build-clang
echo "all builds and test suites passed"
