#!/bin/sh
# Builds a container image of mcp-gateway from its Debian package with Debian's own tools, no base
# image from a registry:
#   sh deploy/container/build.sh DEB [TAG]      (default TAG: localhost/mcp-gateway:VERSION)
# mmdebstrap makes a root filesystem of this host's Debian release (its "essential" packages, the
# .deb, and what the .deb depends on, fetched from the Debian archive as apt-get would), without
# documentation, man pages or apt lists; image-setup.sh then makes the package's configuration the
# container's; podman import makes the image of it, run as the package's user mcp-gateway.
# MCPGW_IMAGE_PACKAGES="nodejs ..." adds Debian packages (for the MCP servers the image is to run).
# As root (or as a user mmdebstrap's unshare mode works for; the image then is that user's).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] && [ -f "$1" ] || {
    echo "usage: $0 DEB [TAG]" >&2
    exit 2
}
deb=$(realpath "$1")
version=$(dpkg-deb -f "$deb" Version)
# A tag is [A-Za-z0-9_.-]: 0.2.0-1+test1 becomes 0.2.0-1_test1.
tag=${2:-localhost/mcp-gateway:$(printf %s "$version" | tr -c 'A-Za-z0-9_.\n-' _)}
# The release the .deb was built on: its shared libraries are that release's.
suite=${MCPGW_IMAGE_SUITE:-$(. /etc/os-release && echo "$VERSION_CODENAME")}
for tool in mmdebstrap podman; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "$tool is not installed (apt-get install mmdebstrap podman)" >&2
        exit 1
    }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
# mmdebstrap's unshare mode reads the .deb as another user: a copy anyone may read.
cp "$deb" "$tmp/" && chmod 0644 "$tmp/$(basename "$deb")"

echo "== mmdebstrap $suite: essential + $(basename "$deb") ${MCPGW_IMAGE_PACKAGES:-} =="
t0=$(date +%s)
# The package's Depends names systemd | systemd-standalone-sysusers | systemd-sysusers (its postinst
# makes the user): the small one, not systemd. init-system-helpers (essential in bookworm) needs
# usrmerge | usr-is-merged: the merged-usr hooks make /bin and the others links into /usr first and
# give apt usr-is-merged, so that usrmerge, and perl with it, stay out. file-mirror-automount makes
# the .deb given by its path visible to dpkg inside the root filesystem.
set --
[ -z "${MCPGW_IMAGE_PACKAGES:-}" ] || set -- --include="$MCPGW_IMAGE_PACKAGES"
mmdebstrap --quiet --variant=essential --include=systemd-standalone-sysusers "$@" \
    --include="$tmp/$(basename "$deb")" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --customize-hook="copy-in $here/image-setup.sh /tmp" \
    --customize-hook='chroot "$1" sh /tmp/image-setup.sh' \
    --customize-hook='rm -f "$1/tmp/image-setup.sh"' \
    "$suite" "$tmp/rootfs.tar" >"$tmp/mmdebstrap.log" 2>&1 || {
    tail -n 60 "$tmp/mmdebstrap.log"
    echo "mmdebstrap failed" >&2
    exit 1
}
grep -A2 'configuration OK' "$tmp/mmdebstrap.log" || true
echo "root filesystem: $(du -h "$tmp/rootfs.tar" | cut -f1) in $(($(date +%s) - t0)) s"

# The user the package made, by number: a runtime can then tell it is not root without the image's
# /etc/passwd (Kubernetes' runAsNonRoot).
ids=$(tar -xOf "$tmp/rootfs.tar" ./etc/passwd | awk -F: '$1 == "mcp-gateway" { print $3 ":" $4 }')
case $ids in
    '' | 0:* | *:*:*)
        echo "no non-root user mcp-gateway in the image (/etc/passwd: '$ids')" >&2
        exit 1
        ;;
esac

echo "== podman import $tag (USER $ids, mcp-gateway) =="
podman import --quiet \
    --change "USER=$ids" \
    --change 'WORKDIR=/var/lib/mcp-gateway' \
    --change 'ENV=LANG=C.UTF-8' \
    --change 'ENTRYPOINT=["/usr/bin/mcp-gateway"]' \
    --change 'CMD=["--config","/etc/mcp-gateway/gateway.ini"]' \
    --change 'EXPOSE=8080/tcp' \
    --change 'STOPSIGNAL=SIGTERM' \
    --change "LABEL=org.opencontainers.image.title=mcp-gateway" \
    --change "LABEL=org.opencontainers.image.version=$version" \
    --message "mcp-gateway $version on Debian $suite (deploy/container/build.sh)" \
    "$tmp/rootfs.tar" "$tag" >/dev/null
echo "built $tag: $(podman image inspect --format '{{.Id}} {{.Size}}' "$tag" | awk '{ printf "%s, %.1f MB", substr($1, 1, 12), $2 / 1e6 }')"
