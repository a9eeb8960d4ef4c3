#!/bin/sh
# Builds and runs every test: a gcc build (warnings are errors) and the benchmark's quick mode
# against it, the Debian package end to end (tests/package/run.sh), the same suites again under
# AddressSanitizer + UndefinedBehaviorSanitizer, a warning-free clang compile, and a short run of
# every libFuzzer target.
# meson prints the count of tests run, passed and failed for each build.
# -Dtests=enabled: a missing criterion or node fails the setup instead of leaving suites out.
set -eu
cd "$(dirname "$0")/.."

# setup DIR COMPILER OPTION...: configures DIR, or reconfigures it when it exists, so the options
# given here always apply (a plain "meson setup" is skipped on an existing directory and would
# keep whatever it was configured with). The compiler cannot change in place: a directory built
# with another one is an error, to remove by hand.
setup() {
    dir=$1
    compiler=$2
    shift 2
    if [ -f "$dir/meson-private/coredata.dat" ]; then
        meson setup --reconfigure "$dir" "$@"
        if ! grep -q "^C compiler for the host machine: .* ($compiler " "$dir/meson-logs/meson-log.txt"; then
            echo "$dir was configured with another compiler than $compiler: remove it and run again" >&2
            exit 1
        fi
    else
        CC=$compiler meson setup "$dir" "$@"
    fi
}

setup build gcc -Dtests=enabled -Dwerror=true -Dfuzz=false -Db_sanitize=none
meson compile -C build
meson test -C build --print-errorlogs --num-processes 2
# The official conformance suite's tables (0.1.16 for the legacy revisions, 0.2.0-alpha.12's
# 2026-07-28 requirement set) from the test log into this one.
sed -n -e '/^# MCP conformance /,/^# TOTAL  /p' build/meson-logs/testlog.txt | sed 's/^# //'
# The benchmark's short mode, so it keeps working: times are printed, not asserted; the gateway's
# system calls per echo (counted by strace) are, against bounds (BENCHMARKS.md).
node tests/bench/run.mjs --quick --no-build --build build
# The Debian package end to end (as root, or through sudo like tests/deps.sh): build with
# dpkg-buildpackage, lintian, install, the SDK client and the SDK interop tests against the
# installed binary started as its unit would, an upgrade with requests in flight (the drain),
# purge, nothing left behind (tests/package/run.sh), and its container image run by podman
# (tests/container/run.sh, called from there).
sh tests/package/run.sh

setup build-asan gcc -Dtests=enabled -Dwerror=true -Dfuzz=false -Db_sanitize=address,undefined
meson compile -C build-asan
ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 3

setup build-clang clang -Dtests=enabled -Dwerror=true -Dfuzz=false -Db_sanitize=none
meson compile -C build-clang

# The libFuzzer targets (tests/fuzz; clang, ASan+UBSan): 20 s each, starting from the committed
# corpus, so the fuzz build keeps working and a new crash fails the run. Every build above also
# replays each corpus and every crasher ever found (suite fuzz-regress). The targets are the lines
# of tests/fuzz/targets, the list tests/fuzz/meson.build builds them from. No test runs in this
# build (-Dtests=disabled: no unit or integration binaries to compile).
setup build-fuzz clang -Dtests=disabled -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false
meson compile -C build-fuzz
targets=$(grep -v -e '^#' -e '^[[:space:]]*$' tests/fuzz/targets)
[ -n "$targets" ] || { echo "tests/fuzz/targets lists no fuzz target" >&2; exit 1; }
for t in $targets; do
    scratch=$(mktemp -d)
    mkdir "$scratch/new"
    if ! build-fuzz/tests/fuzz/${t}_fuzz -max_total_time=20 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$scratch/" "$scratch/new" "tests/fuzz/corpus/$t" \
        >"$scratch/log" 2>&1; then
        tail -n 60 "$scratch/log"
        echo "fuzz target $t found a crash (the input is in the log above; its file is in" \
            "$scratch, to keep as tests/fuzz/regression/$t/crash-<sha1> once fixed)"
        exit 1
    fi
    echo "fuzz target $t:"
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done' "$scratch/log" || true
    rm -rf "$scratch"
done
echo "all builds and test suites passed"
