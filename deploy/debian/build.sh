#!/bin/sh
# Builds the mcp-gateway .deb from a clean copy of the tree with Debian's own tools, then runs
# lintian on it:
#   sh deploy/debian/build.sh [OUTDIR]          (default OUTDIR: ./debs)
# MCPGW_DEB_SUFFIX=+test1 adds a changelog entry 0.2.0-1+test1 on top (a newer build, for
# upgrade tests). The upstream version is meson.build's; the script fails when the changelog's
# disagrees. Lintian's errors and warnings fail the build; overrides are in
# mcp-gateway.lintian-overrides, each with its reason.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/debs}
mkdir -p "$out"
out=$(cd "$out" && pwd)

upstream=$(sed -n "s/^  version: '\([^']*\)',$/\1/p" "$root/meson.build")
debver=$(sed -n '1s/^mcp-gateway (\([^)]*\)).*/\1/p' "$root/deploy/debian/changelog")
[ "${debver%-*}" = "$upstream" ] || {
    echo "deploy/debian/changelog is at $debver, meson.build at $upstream: add a changelog entry" >&2
    exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$tmp/mcp-gateway-$upstream
mkdir "$src"
# A clean tree: the files git knows (committed or not, ignored ones left out: no build
# directories, no node_modules), or, outside a checkout, everything but those.
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$root" ls-files -z --cached --others --exclude-standard \
        | (cd "$root" && xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) \
        | tar -C "$root" --null -T - -cf - | tar -C "$src" -xf -
else
    tar -C "$root" --exclude='./build*' --exclude='./debs' --exclude=node_modules -cf - . \
        | tar -C "$src" -xf -
fi
rm -rf "$src/debian"
cp -r "$src/deploy/debian" "$src/debian"
rm "$src/debian/build.sh"

if [ -n "${MCPGW_DEB_SUFFIX:-}" ]; then
    {
        printf 'mcp-gateway (%s%s) unstable; urgency=medium\n\n' "$debver" "$MCPGW_DEB_SUFFIX"
        printf '  * Test build %s%s.\n\n' "$debver" "$MCPGW_DEB_SUFFIX"
        printf ' -- mcp-gateway developers <mcp-gateway@example.org>  %s\n\n' "$(date -R)"
        cat "$src/debian/changelog"
    } >"$tmp/changelog"
    mv "$tmp/changelog" "$src/debian/changelog"
fi

echo "== dpkg-buildpackage: mcp-gateway $debver${MCPGW_DEB_SUFFIX:-} =="
export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=$(nproc)}"
(cd "$src" && dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1 || {
    tail -n 80 "$tmp/build.log"
    echo "dpkg-buildpackage failed" >&2
    exit 1
}
grep -E '^dpkg-(buildpackage|deb|genchanges): ' "$tmp/build.log" || true

deb=$(ls "$tmp"/mcp-gateway_*.deb)
cp "$deb" "$out/"
deb=$out/$(basename "$deb")
echo "== lintian $(lintian --version | sed 's/^Lintian v//') on $(basename "$deb") =="
# Every tag is shown (pedantic and info included), overridden ones (O:) with their reasons; an error (E:) or a warning (W:) not
# overridden fails. (lintian's own --fail-on counts overridden tags too when they are shown.)
lintian --pedantic --display-info --show-overrides "$deb" >"$tmp/lintian.log" 2>&1 || true
grep -v '^running with root privileges' "$tmp/lintian.log" || true
if grep -q '^[EW]: ' "$tmp/lintian.log"; then
    echo "lintian: errors or warnings above" >&2
    exit 1
fi
echo "lintian verdict: clean (no error or warning; $(grep -c '^O: ' "$tmp/lintian.log") overridden, each with its reason above)"
echo "built $deb"
