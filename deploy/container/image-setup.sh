#!/bin/sh
# Runs inside the image's root filesystem (build.sh's mmdebstrap customize hook, chrooted), once the
# package is installed: turns the package's configuration into the container's, checks it as the
# gateway's user, and drops what a container does not need.
set -eu
conf=/etc/mcp-gateway/gateway.ini

# The container's own network namespace: listen on every address in it (podman publishes the port),
# so the peer is never loopback and [auth] mode none is refused: bearer tokens from
# /etc/mcp-gateway/tokens, which the operator mounts over the empty one made here. public_url
# names what `podman run -p 127.0.0.1:8080:8080` gives. The log goes to stderr (podman logs), as
# text. The drain and the child ladder fit podman's and docker's default stop timeout of 10 s:
# shutdown_drain_ms + child_stdin_grace_ms + child_term_grace_ms + 1 s = 5 + 1 + 1 + 1 = 8 s.
# No peer's X-Forwarded-For is believed: nginx is not on the container's loopback (the package
# trusts it there), where only the gateway's own children could connect from.
sed -i -e 's/^listen = .*/listen = 0.0.0.0:8080/' \
    -e 's/^log_format = journal$/log_format = text/' \
    -e 's/^shutdown_drain_ms = .*/shutdown_drain_ms = 5000/' \
    -e 's/^child_stdin_grace_ms = .*/child_stdin_grace_ms = 1000/' \
    -e 's/^child_term_grace_ms = .*/child_term_grace_ms = 1000/' \
    -e 's/^mode = none$/mode = bearer/' \
    -e 's/^trusted_proxies = .*/trusted_proxies =/' \
    -e 's|^; public_url = .*|public_url = http://127.0.0.1:8080|' \
    -e 's|^; tokens_file = .*|tokens_file = /etc/mcp-gateway/tokens|' "$conf"
for line in 'listen = 0.0.0.0:8080' 'log_format = text' 'log_file =' 'shutdown_drain_ms = 5000' \
    'child_stdin_grace_ms = 1000' 'child_term_grace_ms = 1000' 'mode = bearer' \
    'public_url = http://127.0.0.1:8080' 'tokens_file = /etc/mcp-gateway/tokens' 'trusted_proxies =' \
    'command = /usr/lib/mcp-gateway/mcp-example-server'; do
    grep -qx "$line" "$conf" || {
        echo "image-setup: $conf has no line '$line'" >&2
        exit 1
    }
done
cat >/etc/mcp-gateway/tokens <<'EOF'
# Bearer tokens, one per line: sha256:<64 hex> PRINCIPAL [SCOPE ...] (mcp-gateway.ini(5), [auth]).
# Empty: every request gets 401. Mount yours over this file:
#   podman run -v ./tokens:/etc/mcp-gateway/tokens:ro ...
EOF
chmod 0644 /etc/mcp-gateway/tokens

# The user the package's sysusers file made runs the gateway (the image's USER); its home, which
# the unit's StateDirectory= would make, is the working directory.
uid=$(id -u mcp-gateway)
[ "$uid" -ne 0 ] || {
    echo "image-setup: mcp-gateway is uid 0" >&2
    exit 1
}
install -d -o mcp-gateway -g mcp-gateway -m 0755 /var/lib/mcp-gateway
[ "$(stat -c '%a %U:%G' "$conf")" = "640 root:mcp-gateway" ] || {
    echo "image-setup: $conf is $(stat -c '%a %U:%G' "$conf"), not 640 root:mcp-gateway" >&2
    exit 1
}
# The box of the example server (sandbox = on) is tried when the container starts: here, in a
# chroot, the kernel refuses a user namespace to any process, so the check runs on a copy with the
# box off (every other line is checked as it is).
grep -qx 'sandbox = on' "$conf" || {
    echo "image-setup: $conf does not box its example server (sandbox = on)" >&2
    exit 1
}
check=/tmp/gateway-check.ini
sed 's/^sandbox = on$/sandbox = off/' "$conf" >"$check"
chown root:mcp-gateway "$check"
chmod 0640 "$check"
(cd /var/lib/mcp-gateway && setpriv --reuid=mcp-gateway --regid=mcp-gateway --init-groups \
    /usr/bin/mcp-gateway --check-config --config "$check")
rm -f "$check"

# No logs or backups of the build in the image, nor the build host's name and resolver, which
# mmdebstrap copied in: podman gives the container its own.
rm -f /etc/hostname /etc/resolv.conf
rm -f /var/log/dpkg.log /var/log/alternatives.log /var/log/bootstrap.log /var/cache/debconf/*-old \
    /var/lib/dpkg/*-old
rm -rf /var/log/apt /var/cache/apt/* /var/lib/apt/lists/*
