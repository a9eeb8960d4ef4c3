#!/bin/sh
# Usage: docs.sh [--check] MCP_GATEWAY SOURCE_ROOT
#
# `meson compile -C build docs` runs it: rewrites README.md's option tables and the comment above
# each key of conf/gateway.ini from src/config/options.md (the keys' prose) and the option table
# (their defaults and bounds), with the binary's hidden --man. Run it after editing either.
# --check (test docs-written, suite docs) changes nothing: it fails, naming the file and the
# command, while a file differs from what it would write.
set -eu
check=false
if [ "${1:-}" = --check ]; then
    check=true
    shift
fi
bin=${1:?usage: docs.sh [--check] MCP_GATEWAY SOURCE_ROOT}
root=${2:?usage: docs.sh [--check] MCP_GATEWAY SOURCE_ROOT}
bad=0
for pair in readme:README.md conf:conf/gateway.ini; do
    file=$root/${pair#*:}
    tmp=$(mktemp)
    if ! "$bin" --man "${pair%%:*}" "$root/src/config/options.md" "$file" >"$tmp"; then
        rm -f "$tmp"
        exit 1
    fi
    if cmp -s "$tmp" "$file"; then
        echo "$file: as written already"
    elif $check; then
        echo "$file differs from what src/config/options.md and the option table make:" >&2
        diff -u "$file" "$tmp" | head -n 40 >&2 || true
        echo "edit src/config/options.md or src/config/config_table.c, not $file; then run: meson compile -C build docs" >&2
        bad=1
    else
        cat "$tmp" >"$file" # keeps the file's mode
        echo "$file: rewritten"
    fi
    rm -f "$tmp"
done
exit $bad
