#!/bin/sh
# Usage: docs.sh MCP_GATEWAY SOURCE_ROOT
#
# `meson compile -C build docs` runs it: rewrites README.md's option tables and the comment above
# each key of conf/gateway.ini from src/config/options.md (the keys' prose) and the option table
# (their defaults and bounds), with the binary's hidden --man. Run it after editing either; suite
# docs (tests/integration/manpages.test.mjs) fails while a file differs from what it writes.
set -eu
bin=${1:?usage: docs.sh MCP_GATEWAY SOURCE_ROOT}
root=${2:?usage: docs.sh MCP_GATEWAY SOURCE_ROOT}
for pair in readme:README.md conf:conf/gateway.ini; do
    file=$root/${pair#*:}
    tmp=$(mktemp "$file.XXXXXX")
    if ! "$bin" --man "${pair%%:*}" "$root/src/config/options.md" "$file" >"$tmp"; then
        rm -f "$tmp"
        exit 1
    fi
    if cmp -s "$tmp" "$file"; then
        echo "$file: as written already"
    else
        cat "$tmp" >"$file" # keeps the file's mode
        echo "$file: rewritten"
    fi
    rm -f "$tmp"
done
