#!/bin/sh
# Installs what building, running and testing mcp-gateway need on Debian 12, then the npm test
# tools pinned in tests/package-lock.json. Idempotent: only missing packages are installed.
set -eu
cd "$(dirname "$0")/.."

# systemd: systemd-analyze, which deploy.test.mjs needs to verify the unit (installing the package
# in a container does not start it).
# libseccomp-dev: the seccomp filter of a boxed child (sandbox = on).
# libcurl4-openssl-dev: the gateway's outgoing HTTPS (issuer keys, introspection); openssl: the CLI
# the tests make a throwaway CA and certificate for the loopback authorization server with.
# dpkg-dev, debhelper, build-essential, lintian, man-db: building and checking the Debian package
# (deploy/debian/build.sh); procps: ps for tests/package/run.sh, and a dependency of the package.
# prometheus: its promtool, which stateless_reload.test.mjs checks /metrics with (promtool check
# metrics) and prometheus_rules.test.mjs deploy/prometheus with (check rules, test rules); the
# package's service is not started in a container. logrotate: signals.test.mjs runs
# the package's logrotate file with it. mmdebstrap, podman, runc, netavark, iptables, uidmap:
# tests/container/run.sh builds the container image from the .deb (deploy/container/build.sh) and
# runs it with podman (runc; netavark and iptables publish its port). strace: the benchmark's
# quick mode (tests/run.sh) counts the gateway's system calls per echo with strace -c and fails
# without it.
pkgs="meson ninja-build pkg-config gcc clang libmicrohttpd-dev libjansson-dev libinih-dev
      libcriterion-dev libssl-dev libcurl4-openssl-dev libseccomp-dev openssl nginx-light curl systemd
      dpkg-dev debhelper build-essential lintian man-db procps prometheus logrotate
      mmdebstrap podman runc netavark iptables uidmap strace"
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"

missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "installing:$missing"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi

if [ -f tests/package-lock.json ] && [ ! -d tests/node_modules ]; then
    (cd tests && npm ci --no-audit --no-fund --loglevel=error)
fi
