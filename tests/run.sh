#!/bin/sh
# Builds and runs every test: a gcc build (warnings are errors) and the benchmark's quick mode
# against it, the same suites again under AddressSanitizer + UndefinedBehaviorSanitizer, a
# warning-free clang compile, and a short run of every libFuzzer target.
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

# The libFuzzer targets (tests/fuzz; clang, ASan+UBSan): 20 s each, starting from the committed
# corpus, so the fuzz build keeps working and a new crash fails the run. Every build above also
# replays each corpus and every crasher ever found (suite fuzz-regress).
[ -f build-fuzz/build.ninja ] || CC=clang meson setup build-fuzz -Dfuzz=true \
    -Db_sanitize=address,undefined -Db_lundef=false
meson compile -C build-fuzz
for t in jsonrpc config sse jwt http; do
    scratch=$(mktemp -d)
    mkdir "$scratch/new"
    if ! build-fuzz/tests/fuzz/${t}_fuzz -max_total_time=20 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$scratch/" "$scratch/new" "tests/fuzz/corpus/$t" \
        >"$scratch/log" 2>&1; then
        tail -n 60 "$scratch/log"
        echo "fuzz target $t found a crash (the input is in the log above)"
        exit 1
    fi
    echo "fuzz target $t:"
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done' "$scratch/log" || true
    rm -rf "$scratch"
done
echo "all builds and test suites passed"
