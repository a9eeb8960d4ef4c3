#!/bin/sh
# Usage: check_tour.sh SOURCE_ROOT
#
# The tour of the files (src/README.md, the section headed "A tour of the files") stays true to
# the tree. An entry is a list item that opens with the file's path in backquotes, relative to
# src/ (`pool/pool.c`, `main.c`, `../include/pool.h`), and may go on over lines indented by two
# spaces; the functions it names are written `name()`. The check fails when:
#   - a .c or .h file of src/, or a header of include/, has no entry, or more than one;
#   - an entry names a file that does not exist, or one that is not a .c or .h file there;
#   - an entry names a function its file does not define (a .c file: a line that opens with
#     `name(`, the project's style putting the return type on the line before) or declare (a
#     header: a line that opens with `name(`, or a top-level line that has `name(` after a type);
#   - an entry names no function while its file defines or declares one.
# A check of its own, apart from check_docs.sh: it reads one section, and its rules are about that
# section only. Prints every offence; exits 1 if there is one.
set -eu
root=${1:?usage: check_tour.sh SOURCE_ROOT}
cd "$root"
doc=src/README.md
bad=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One line per entry: "PATH NAME NAME ...", PATH as on disk (src/x/y.c, include/y.h). An entry's
# continuation lines are joined to it; any other line ends it.
awk '
    /^## / { in_tour = ($0 ~ /^## ([0-9]+\. )?A tour of the files/); next }
    !in_tour { next }
    /^- `[^`]*`/ { if (entry != "") print entry; entry = $0; next }
    /^  [^ ]/ && entry != "" { entry = entry " " $0; next }
    { if (entry != "") print entry; entry = "" }
    END { if (entry != "") print entry }
' "$doc" | while IFS= read -r e; do
    p=${e#- \`}
    p=${p%%\`*}
    case $p in
    ../include/*) p=include/${p#../include/} ;;
    *) p=src/$p ;;
    esac
    # shellcheck disable=SC2016 # the backquotes are Markdown's, not the shell's
    fns=$(printf '%s\n' "$e" | grep -o '`[A-Za-z_][A-Za-z0-9_]*()`' | tr -d '`()' | tr '\n' ' ')
    echo "$p $fns"
done >"$tmp/entries"

if [ ! -s "$tmp/entries" ]; then
    echo "$doc has no tour of the files (a section headed \"A tour of the files\" with entries)" >&2
    exit 1
fi

# Every file has exactly one entry.
{ ls src/*.c src/*/*.c src/*/*.h include/*.h 2>/dev/null || true; } | sort >"$tmp/files"
cut -d' ' -f1 "$tmp/entries" | sort >"$tmp/named"
for f in $(comm -23 "$tmp/files" "$tmp/named"); do
    echo "$f has no entry in $doc's tour of the files" >&2
    bad=1
done
for f in $(uniq -d "$tmp/named"); do
    echo "$f has $(grep -c "^$f\$" "$tmp/named") entries in $doc's tour of the files, not one" >&2
    bad=1
done

# Every entry names a file there, and functions that file has.
while read -r f fns; do
    case $f in
    src/*.c | src/*.h | include/*.h) ;;
    *)
        echo "$doc's tour has an entry for $f, which is not a .c or .h file of src/ or include/" >&2
        bad=1
        continue
        ;;
    esac
    if [ ! -f "$f" ]; then
        echo "$doc's tour has an entry for $f, which does not exist" >&2
        bad=1
        continue
    fi
    case $f in
    *.c) kind=define ;;
    *) kind=declare ;;
    esac
    for fn in $fns; do
        if [ $kind = define ]; then
            grep -q "^$fn(" "$f" && continue
        else
            grep -q "^$fn(\|^[A-Za-z].*[ *]$fn(" "$f" && continue
        fi
        echo "$doc's tour names $fn() for $f, which $f does not $kind" >&2
        bad=1
    done
    if [ -z "$fns" ]; then
        if [ $kind = define ]; then
            has=$(grep -c '^[a-z_][a-z0-9_]*(' "$f" || true)
        else
            has=$(grep -c '^[a-z_][a-z0-9_]*(\|^[A-Za-z].*[ *][a-z_][a-z0-9_]*(' "$f" || true)
        fi
        if [ "$has" -gt 0 ]; then
            echo "$doc's tour names no function for $f, which has $has: name its main ones" >&2
            bad=1
        fi
    fi
done <"$tmp/entries"

[ $bad -eq 0 ] || exit 1
echo "$doc's tour: $(wc -l <"$tmp/entries") files, one entry each; every function it names is there"
