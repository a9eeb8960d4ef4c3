#!/bin/sh
# Usage: check_listed.sh [-x IGNORED]... LIST DIR:PATTERN[?]... -- NAME...
#
# Checks a test list against the files on disk, so that no test silently does not run. NAMEs are
# the tests LIST wires up (a meson.build, tests/fuzz/targets); each PATTERN is PREFIX*SUFFIX. It
# fails when a listed NAME has no DIR/PREFIX<NAME>SUFFIX (unless the PATTERN ends in '?': those
# entries may be absent), and when a DIR holds an entry matching PATTERN whose NAME is not listed
# (an entry named IGNORED is skipped): a test file nobody added to LIST would otherwise never
# run, and every suite would still pass. Run at configure time (a warning) and by meson test
# (suites unit, integration, fuzz-regress: a failure). Names are plain words (no blanks).
set -eu

usage() {
    echo "usage: check_listed.sh [-x IGNORED]... LIST DIR:PATTERN[?]... -- NAME..." >&2
    exit 2
}

ignored=" "
while [ "${1-}" = "-x" ]; do
    [ $# -ge 2 ] || usage
    ignored="$ignored$2 "
    shift 2
done
[ $# -ge 1 ] || usage
list=$1
shift

# The names follow "--"; the DIR:PATTERN pairs stay in "$@".
names=""
count=0
seen=0
for a in "$@"; do
    if [ "$seen" -eq 1 ]; then
        names="$names $a"
        count=$((count + 1))
    elif [ "$a" = "--" ]; then
        seen=1
    fi
done
[ "$seen" -eq 1 ] || usage

is_listed() {
    for m in $names; do
        if [ "$m" = "$1" ]; then
            return 0
        fi
    done
    return 1
}

status=0
for pair in "$@"; do
    [ "$pair" != "--" ] || break
    dir=${pair%:*}
    pattern=${pair##*:}
    optional=0
    case $pattern in *\?) optional=1 pattern=${pattern%\?} ;; esac
    prefix=${pattern%%\**}
    suffix=${pattern#*\*}
    bad=0
    if [ "$optional" -eq 0 ]; then
        for name in $names; do
            if [ ! -e "$dir/$prefix$name$suffix" ]; then
                echo "$dir/$prefix$name$suffix: listed in $list but missing" >&2
                bad=1
            fi
        done
    fi
    found=0
    for f in "$dir"/$pattern; do
        [ -e "$f" ] || continue # the pattern matched nothing and stayed as it was
        base=${f##*/}
        case $ignored in *" $base "*) continue ;; esac
        found=$((found + 1))
        name=${base#"$prefix"}
        name=${name%"$suffix"}
        if ! is_listed "$name"; then
            echo "$f: not listed in $list, so it never runs" >&2
            bad=1
        fi
    done
    if [ "$bad" -eq 0 ]; then
        echo "$dir/$pattern: $found present, $count listed in $list: none left out"
    else
        status=1
    fi
done
exit "$status"
