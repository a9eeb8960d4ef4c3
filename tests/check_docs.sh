#!/bin/sh
# Usage: check_docs.sh SOURCE_ROOT
#
# The design of record stays true to the tree:
#   - every file src/README.md names in backquotes (x.c, layer/x.c, ../dir/x) exists: a bare name
#     anywhere under src/, include/ or tests/, a path relative to src/;
#   - every .c file of src/ is named there (a new file gets its line in the layers' table);
#   - no source, header, test, deploy file or top-level document cites a document the repository
#     does not contain, or an id of one: a finding's ("F6", "(F1/F5)", "finding 10", "finding F6")
#     or an issue's ("issue 2, item 5"). A comment or a test name says the reason itself.
# Prints every offence; exits 1 if there is one.
set -eu
root=${1:?usage: check_docs.sh SOURCE_ROOT}
cd "$root"
doc=src/README.md
bad=0
named=0

for t in $(grep -o '`[A-Za-z0-9_./-]*\.\(c\|h\|md\|sh\|mjs\|build\)`' "$doc" | tr -d '`' | sort -u); do
    named=$((named + 1))
    case $t in
    */*)
        [ -e "src/$t" ] || { echo "$doc names $t: src/$t does not exist" >&2; bad=1; }
        ;;
    *)
        if [ -z "$(find src include tests -name node_modules -prune -o -name "$t" -print | head -n 1)" ]; then
            echo "$doc names $t: no such file under src/, include/ or tests/" >&2
            bad=1
        fi
        ;;
    esac
done
[ "$named" -gt 40 ] || { echo "$doc names only $named files: is it the design?" >&2; bad=1; }

for f in src/*/*.c src/*.c; do
    n=$(basename "$f")
    grep -q "\`$n\`\|\`${f#src/}\`" "$doc" || { echo "$f is not named in $doc (the layers' table)" >&2; bad=1; }
done

# What is read for citations: every text file but the fuzzers' inputs, the dependencies and this
# script (which names the patterns).
cited=$(find src include tests deploy conf meson.build ./*.md -name node_modules -prune -o -type f -print \
    | grep -v '^tests/fuzz/corpus/\|^tests/fuzz/regression/\|^tests/check_docs\.sh$\|^tests/package-lock\.json$')

# Documents that live beside the repository, not in it, and the ids of a checklist kept there.
absent='DESIGN\.md\|STYLE\.md\|engineering-notes\|mcp-spec-checklist\|lifetimes\.md\|peers\.md\|field-2026\|modern-era-notes\|[Cc]hecklist [A-Z]-[0-9]'
hits=$(echo "$cited" | xargs grep -In "$absent" || true)
if [ -n "$hits" ]; then
    echo "cites a document the repository does not contain:" >&2
    echo "$hits" >&2
    bad=1
fi

# Ids of findings and issues kept outside the repository: F and a number as a word ("F6", "(F9)",
# "F1/F5"; not inside hex, base64 or a percent escape: "0xF1", "+F1/", "%F1"; not a function key:
# "F1 key"), "finding" and an id ("finding 10", "findings F6"), an issue's number ("issue #29",
# "issue 2, items 5 and 6", "(issue 16)"; not "to issue 2 requests").
iid='[Ii]ssues? #[0-9]+|[Ii]ssues? [0-9]+(, items? [0-9]+|\))'
fid='(^|[^[:alnum:]_+/%\\])F[0-9]+([^[:alnum:]_+=]|$)'
hits=$(echo "$cited" | xargs grep -InoE "$fid.{0,4}|[Ff]indings? #?F?[0-9]+|$iid" \
    | grep -vE ':[^:]*F[0-9]+ key' || true)
if [ -n "$hits" ]; then
    echo "cites an id of a finding or an issue the repository does not define (say the reason itself):" >&2
    echo "$hits" >&2
    bad=1
fi
[ $bad -eq 0 ] || exit 1
echo "$doc: $named files named, all present; every source file in it; no absent document or outside id cited"
