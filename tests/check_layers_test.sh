#!/bin/sh
# Usage: check_layers_test.sh CHECK_LAYERS_SH SOURCE_ROOT
#
# The layer check's own test: each way past it that it once had, or could have, is a case that
# must fail. Each case copies the tree's src/ and include/ into a temporary directory, writes one
# bad change into the copy, and runs the check on it: it must exit 1 and say why (the text
# expected below). The unchanged copy must pass. Prints a line per case; exits 1 if one is wrong.
set -eu
check=$(realpath "${1:?usage: check_layers_test.sh CHECK_LAYERS_SH SOURCE_ROOT}")
root=$(realpath "${2:?usage: check_layers_test.sh CHECK_LAYERS_SH SOURCE_ROOT}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
cases=0

fresh() {
    rm -rf "$tmp/t"
    mkdir "$tmp/t"
    cp -R "$root/src" "$root/include" "$tmp/t/"
}

# expect_fail NAME TEXT: the check fails on the copy as it is now, and its complaint holds TEXT.
expect_fail() {
    cases=$((cases + 1))
    if sh "$check" "$tmp/t" >"$tmp/out" 2>&1; then
        echo "FAIL $1: the check passed" >&2
        bad=1
    elif ! grep -qF -- "$2" "$tmp/out"; then
        echo "FAIL $1: the check failed without saying \"$2\":" >&2
        sed 's/^/    /' "$tmp/out" >&2
        bad=1
    else
        echo "ok $1: $(grep -F -- "$2" "$tmp/out" | head -n 1)"
    fi
}

# expect_pass NAME: the check passes the copy as it is now.
expect_pass() {
    cases=$((cases + 1))
    if sh "$check" "$tmp/t" >"$tmp/out" 2>&1; then
        echo "ok $1: $(tail -n 1 "$tmp/out")"
    else
        echo "FAIL $1: the check fails:" >&2
        sed 's/^/    /' "$tmp/out" >&2
        bad=1
    fi
}

# An include, however written, appended to src/core/util.c.
core_includes() {
    printf '%s\n' "$1" >>"$tmp/t/src/core/util.c"
}

fresh
expect_pass 'the tree as it is'

fresh
core_includes '#include "../session/session_int.h"'
expect_fail 'a path with ".." from core to a private header of session' \
    'includes "../session/session_int.h": ".." in an include'
fresh
core_includes '#include "../../include/session.h"'
expect_fail 'a path with ".." to a public header' \
    'includes "../../include/session.h": ".." in an include'
fresh
core_includes '#  include "session.h"'
expect_fail '"#  include" with spaces after "#"' \
    'src/core/util.c (core) includes "session.h" (session)'
fresh
core_includes '#	include "pool.h"'
expect_fail '"#<tab>include"' 'src/core/util.c (core) includes "pool.h" (pool)'
fresh
core_includes '  #include "http.h"'
expect_fail 'an indented "#include"' 'src/core/util.c (core) includes "http.h" (http)'
fresh
core_includes '#include <session.h>'
expect_fail 'an angle-bracket include of a public header' \
    'src/core/util.c (core) includes <session.h> (session)'
fresh
core_includes '#include "src/session/session_int.h"'
expect_fail 'a private header of session by its path from the root' \
    '(core) includes "src/session/session_int.h" (session)'
fresh
core_includes '#include SESSION_HEADER'
expect_fail 'an include the check cannot read' 'an include the check cannot read'
fresh
core_includes '#include "nosuch.h"'
expect_fail 'a header no layer has' 'which is no header of any layer'

# A header's layer is where what it declares is defined, not its file name.
fresh
printf '%s\n' 'struct session *session_find(const char *id);' >>"$tmp/t/include/util.h"
expect_fail 'a session prototype written into include/util.h' \
    'include/util.h declares what several layers define (core session)'
fresh
printf '%s\n' 'struct session *session_find(const char *id);' >>"$tmp/t/src/core/util.c"
expect_fail 'a session prototype written into a core .c file' \
    'src/core/util.c (core) declares session_find, which session defines'
fresh
printf '%s\n' 'void util_nothing(void);' >>"$tmp/t/include/util.h"
expect_fail 'a prototype nothing defines' \
    'include/util.h declares util_nothing, which no .c file under src/ defines'
fresh
printf '%s\n' '#include "util.h"' 'struct nothing;' >"$tmp/t/include/nothing.h"
expect_fail 'a header that declares nothing defined' \
    'include/nothing.h declares nothing a .c file under src/ defines'
fresh
mv "$tmp/t/src/session/session.c" "$tmp/t/src/session/util.c"
printf '%s\n' '#include "session.h"' >>"$tmp/t/src/pool/pool.c"
expect_fail 'session.h, named like nothing of session/, still session'"'"'s: pool includes it' \
    'src/pool/pool.c (pool) includes "session.h" (session)'

# The order is src/layers', read from there.
fresh
sed -i 's/^core$/mcp/; t; s/^mcp$/core/' "$tmp/t/src/layers"
expect_fail 'src/layers puts mcp below core' '(mcp) includes "util.h" (core): upward or sideways'
fresh
printf '%s\n' '#include "session.h"' >>"$tmp/t/src/pool/pool.c"
expect_fail 'pool includes session, its sibling' \
    'src/pool/pool.c (pool) includes "session.h" (session): upward or sideways'
sed -i 's/^session pool$/session\npool/' "$tmp/t/src/layers"
expect_pass 'the same, once src/layers puts pool above session'
fresh
sed -i 's/^core$/core_/' "$tmp/t/src/layers"
expect_fail 'a folder src/layers does not list' 'src/core/: a folder that src/layers does not list'
fresh
printf '%s\n' 'extra' >>"$tmp/t/src/layers"
expect_fail 'a layer src/layers lists with no folder' \
    'src/layers lists extra, which is no folder of src/'
fresh
sed -i 's/^mcp$/config/; t; s/^config$/mcp/' "$tmp/t/src/layers"
expect_fail 'src/README.md in another order than src/layers' "src/README.md's table of layers"
fresh
rm "$tmp/t/src/layers"
expect_fail 'no src/layers' 'src/layers is missing'

[ $bad -eq 0 ] || exit 1
echo "$cases cases: the check passes the tree and fails on each hole"
