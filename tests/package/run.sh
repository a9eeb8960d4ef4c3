#!/bin/sh
# The Debian package end to end, as tests/run.sh runs it in CI (root on Debian 12, where systemd
# usually does not run, so its steps are done here as the installed unit says):
#   build (twice: 0.1.0-1 and a newer 0.1.0-1+upgradetest1) -> lintian -> install -> start the
#   installed binary with the installed config as the unit would (its User, Group, working and
#   state directory, umask, ExecStartPre) -> the SDK against it, then the SDK interop tests with
#   GW_BIN=/usr/bin/mcp-gateway -> upgrade while requests are in flight (the unit's stop: SIGTERM,
#   drain, within TimeoutStopSec) -> remove and purge -> no user, file or process left.
# Each step prints a "===== package: ..." header. Any failure exits non-zero (and the EXIT trap
# stops what it started and purges the package). Not root: again through sudo.
set -eu
cd "$(dirname "$0")/../.."
root=$(pwd)

step() { printf '\n===== package: %s =====\n' "$*"; }
fail() {
    echo "package test FAILED: $*" >&2
    exit 1
}

# It installs and purges a package: root, or sudo as tests/deps.sh uses it. A run that cannot is a
# failure, never a silent skip.
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "it installs and purges the package: run as root, or install sudo"
    exec sudo -E sh "$0" "$@"
fi
if dpkg-query -W -f='${Status}' mcp-gateway 2>/dev/null | grep -q 'ok installed'; then
    fail "mcp-gateway is installed on this machine already: purge it first (dpkg --purge mcp-gateway)"
fi
getent passwd mcp-gateway >/dev/null && fail "a user mcp-gateway exists already"

t_start=$(date +%s)
work=$(mktemp -d)
gwpid=""
uid=""
cleanup() {
    status=$?
    if [ -n "$gwpid" ] && kill -0 "$gwpid" 2>/dev/null; then
        kill -KILL "$gwpid" 2>/dev/null || true
    fi
    if [ $status -ne 0 ]; then
        [ -f "$work/journal.log" ] && { echo "--- gateway log (tail)"; tail -n 40 "$work/journal.log"; }
        # The user did not exist before this test: whatever runs as it, the test started.
        if [ -n "$uid" ]; then
            for p in $(user_procs "$uid" | awk '{print $2}'); do kill -KILL "$p" 2>/dev/null || true; done
            sleep 0.5
        fi
        dpkg-query -W mcp-gateway >/dev/null 2>&1 && dpkg --purge mcp-gateway >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

unit=/lib/systemd/system/mcp-gateway.service
ukey() { sed -n "s/^$1=//p" "$unit"; }
url=http://127.0.0.1:8080/mcp

# unit_exec COMMAND...: runs (execs) a command as systemd runs the unit's: as User=/Group=, in
# WorkingDirectory=, with UMask= and the environment systemd gives a service.
unit_exec() {
    cd "$(ukey WorkingDirectory)"
    umask "$(ukey UMask)"
    exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        HOME="$(getent passwd "$(ukey User)" | cut -d: -f6)" USER="$(ukey User)" LOGNAME="$(ukey User)" \
        setpriv --reuid="$(ukey User)" --regid="$(ukey Group)" --init-groups --no-new-privs -- "$@"
}
# unit_start: what systemd does for "start": StateDirectory=, ExecStartPre=, then ExecStart= in
# the background. The gateway's stderr stands in for the journal.
unit_start() {
    install -d -o "$(ukey User)" -g "$(ukey Group)" -m 0755 "/var/lib/$(ukey StateDirectory)"
    # shellcheck disable=SC2046 # the command line is split like systemd splits it (no quotes in it)
    (unit_exec $(ukey ExecStartPre)) || fail "ExecStartPre failed"
    : >"$work/journal.log"
    # shellcheck disable=SC2046
    (unit_exec $(ukey ExecStart)) >>"$work/journal.log" 2>&1 &
    gwpid=$!
    i=0
    until grep -q 'listening on' "$work/journal.log"; do
        kill -0 "$gwpid" 2>/dev/null || fail "the gateway exited at start: $(cat "$work/journal.log")"
        i=$((i + 1))
        [ $i -lt 100 ] || fail "the gateway did not listen within 10 s"
        sleep 0.1
    done
    echo "started pid $gwpid as $(ps -o user= -p "$gwpid") ($(readlink "/proc/$gwpid/exe")):"
    grep 'listening on' "$work/journal.log"
}
# unit_stop: what systemd does for "stop" with KillMode=mixed: KillSignal= to the main process
# only; SIGKILL to what is left once TimeoutStopSec= has passed, which here is a failure.
unit_stop() {
    sig=$(ukey KillSignal)
    timeout=$(ukey TimeoutStopSec)
    t0=$(date +%s%N)
    kill -s "${sig#SIG}" "$gwpid"
    i=0
    while kill -0 "$gwpid" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt $((timeout * 10)) ]; then
            kill -KILL "$gwpid"
            fail "the gateway outlived TimeoutStopSec=$timeout: systemd would have sent SIGKILL"
        fi
        sleep 0.1
    done
    rc=0
    wait "$gwpid" || rc=$?
    gwpid=""
    [ $rc -eq 0 ] || fail "the gateway exited with status $rc after $sig"
    echo "$sig: the gateway exited 0 after $((($(date +%s%N) - t0) / 1000000)) ms (TimeoutStopSec=$timeout s)"
}
user_procs() { ps -e -o uid=,pid=,args= | awk -v u="$1" '$1 == u'; }

# curl_rpc SESSION BODY [OUT]: one POST to the installed gateway, answer to OUT or stdout.
curl_rpc() {
    curl -sS -N -m 60 "$url" -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
        ${1:+-H "Mcp-Session-Id: $1"} -d "$2" -o "${3:--}"
}
initialize() {
    curl -sS -D "$work/init.h" -o /dev/null "$url" -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' \
        -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"package-test","version":"1"}}}'
    sid=$(sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: *\([^[:space:]]*\).*/\1/p' "$work/init.h")
    [ -n "$sid" ] || fail "initialize gave no session id"
    curl_rpc "$sid" '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
}

step "build the .deb twice (0.1.0-1, then 0.1.0-1+upgradetest1 for the upgrade), lintian on each"
sh deploy/debian/build.sh "$work/v1"
MCPGW_DEB_SUFFIX=+upgradetest1 sh deploy/debian/build.sh "$work/v2"
deb1=$(ls "$work"/v1/mcp-gateway_*.deb)
deb2=$(ls "$work"/v2/mcp-gateway_*.deb)
echo "build and lintian: $(($(date +%s) - t_start)) s"
sh tests/container/run.sh "$deb1" # its container image (deploy/container), run by podman

step "install $(basename "$deb1")"
dpkg -i "$deb1"
dpkg -L mcp-gateway | sort >"$work/files"
for f in /usr/bin/mcp-gateway /usr/lib/mcp-gateway/mcp-example-server /etc/mcp-gateway/gateway.ini \
    "$unit" /usr/lib/sysusers.d/mcp-gateway.conf /usr/share/man/man8/mcp-gateway.8.gz \
    /usr/share/man/man5/mcp-gateway.ini.5.gz /usr/share/doc/mcp-gateway/examples/mcp-gateway.conf \
    /usr/share/doc/mcp-gateway/examples/prometheus/mcp-gateway.rules.yml \
    /usr/share/doc/mcp-gateway/examples/prometheus/mcp-gateway.rules.test.yml \
    /etc/logrotate.d/mcp-gateway; do
    [ -e "$f" ] || fail "$f is not installed"
    echo "installed: $f"
done
dpkg-query -W -f='${Conffiles}\n' mcp-gateway | grep -q ' /etc/mcp-gateway/gateway.ini ' \
    || fail "/etc/mcp-gateway/gateway.ini is not a conffile"
echo "conffile: /etc/mcp-gateway/gateway.ini"
if command -v logrotate >/dev/null; then
    logrotate -d -s "$work/logrotate.state" /etc/logrotate.d/mcp-gateway >"$work/logrotate.out" 2>&1 \
        || { cat "$work/logrotate.out"; fail "logrotate -d rejects /etc/logrotate.d/mcp-gateway"; }
    echo "logrotate -d accepts /etc/logrotate.d/mcp-gateway"
fi
# It may hold admin_token and env secrets: root's, read by the gateway through its group only.
confmode() { stat -c '%a %U:%G' /etc/mcp-gateway/gateway.ini; }
[ "$(confmode)" = "640 root:mcp-gateway" ] || fail "/etc/mcp-gateway/gateway.ini is $(confmode), not 640 root:mcp-gateway"
echo "mode: /etc/mcp-gateway/gateway.ini $(confmode)"
command -v mcp-example-server >/dev/null && fail "the example server is on PATH"
getent passwd mcp-gateway || fail "sysusers did not create the user mcp-gateway"
uid=$(id -u mcp-gateway)
[ -L /etc/systemd/system/multi-user.target.wants/mcp-gateway.service ] || fail "the unit is not enabled"
echo "enabled: /etc/systemd/system/multi-user.target.wants/mcp-gateway.service"
[ -z "$(user_procs "$uid")" ] || fail "something runs as mcp-gateway right after install"
echo "not started (enabled, no process): the operator configures it first"
zcat /usr/share/man/man8/mcp-gateway.8.gz >"$work/man8"
/usr/bin/mcp-gateway --man 8 | cmp -s - "$work/man8" || fail "the installed mcp-gateway(8) is not the binary's"
man --warnings -l "$work/man8" >/dev/null
echo "man pages: mcp-gateway(8), mcp-gateway.ini(5) installed, matching the binary"
# The installed binary knows where it lives: a bare check reads /etc/mcp-gateway/gateway.ini.
/usr/bin/mcp-gateway --version | grep -q 'default config /etc/mcp-gateway/gateway.ini)$' \
    || fail "the default config compiled in is not /etc/mcp-gateway/gateway.ini"
(cd / && /usr/bin/mcp-gateway --check-config) | grep -q '^/etc/mcp-gateway/gateway.ini: configuration OK' \
    || fail "mcp-gateway --check-config without --config does not read /etc/mcp-gateway/gateway.ini"
[ -f /lib/systemd/system/mcp-gateway@.service ] || fail "the template unit mcp-gateway@.service is not installed"
[ -e /etc/systemd/system/multi-user.target.wants/mcp-gateway@.service ] && fail "the template unit is enabled"
echo "default config: /etc/mcp-gateway/gateway.ini; template unit mcp-gateway@.service installed"

step "the installed unit: systemd-analyze verify and security"
systemd-analyze verify "$unit"
systemd-analyze verify /lib/systemd/system/mcp-gateway@test.service
systemd-analyze security --offline=true "$unit" | tail -n 1 | tee "$work/security"
score=$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p' "$work/security")
recorded=$(sed -n 's/.*`systemd-analyze security` rates the installed unit \([0-9.]*\) .*/\1/p' README.md)
[ -n "$score" ] && [ "$score" = "$recorded" ] \
    || fail "systemd-analyze security says ${score:-nothing}, the README records ${recorded:-nothing}"
drain=$(sed -n 's/^shutdown_drain_ms = //p' /etc/mcp-gateway/gateway.ini)
ladder=$(($(sed -n 's/^child_stdin_grace_ms = //p' /etc/mcp-gateway/gateway.ini) + $(sed -n 's/^child_term_grace_ms = //p' /etc/mcp-gateway/gateway.ini)))
[ $(($(ukey TimeoutStopSec) * 1000)) -gt $((drain + ladder)) ] \
    || fail "TimeoutStopSec=$(ukey TimeoutStopSec) is not above the drain and the child ladder"
echo "TimeoutStopSec=$(ukey TimeoutStopSec) s > shutdown_drain_ms $drain + child ladder $ladder ms; KillMode=$(ukey KillMode), KillSignal=$(ukey KillSignal)"

step "start /usr/bin/mcp-gateway as the unit would (no running systemd here)"
[ -d /run/systemd/system ] && echo "(systemd runs here, but the test drives the unit's steps itself so CI and this machine agree)"
unit_start
grep -q '^<[0-7]>' "$work/journal.log" || fail "the installed config does not log for the journal"
echo "log lines carry journal priorities: $(head -n 1 "$work/journal.log")"

step "the SDK client against the installed gateway ($url)"
(cd tests && node package/sdk_client.mjs "$url")

step "SDK interop tests with GW_BIN=/usr/bin/mcp-gateway, GW_EXAMPLE=/usr/lib/mcp-gateway/mcp-example-server"
GW_BIN=/usr/bin/mcp-gateway GW_EXAMPLE=/usr/lib/mcp-gateway/mcp-example-server GW_SOURCE_ROOT="$root" \
    node --test --test-reporter=spec tests/integration/sdk_interop.test.mjs tests/integration/modern_sdk.test.mjs \
    >"$work/interop.log" 2>&1 || {
    cat "$work/interop.log"
    fail "SDK interop against the installed binary"
}
grep -E '^(✔|✖|ℹ (tests|pass|fail))' "$work/interop.log"

step "upgrade to $(basename "$deb2") with requests in flight: restart with the drain"
# As an operator would: the child logs what it receives, and a shorter drain keeps CI quick. Then
# "systemctl reload" (ExecReload=: check, SIGHUP): new sessions get the new server definition.
sed -i -e 's|^command = /usr/lib/mcp-gateway/mcp-example-server$|& --log /var/lib/mcp-gateway/child.log|' \
    -e 's/^shutdown_drain_ms = .*/shutdown_drain_ms = 3000/' /etc/mcp-gateway/gateway.ini
(unit_exec /usr/bin/mcp-gateway --check-config --config /etc/mcp-gateway/gateway.ini)
kill -HUP "$gwpid"
initialize
echo "session $sid"
call='{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{"steps":%d,"interval_ms":100}}}'
# shellcheck disable=SC2059
curl_rpc "$sid" "$(printf "$call" 2 15)" "$work/short.out" &
short=$!
# shellcheck disable=SC2059
curl_rpc "$sid" "$(printf "$call" 3 100000)" "$work/long.out" &
long=$!
i=0
until [ "$(grep -c '"tools/call"' /var/lib/mcp-gateway/child.log 2>/dev/null)" = 2 ]; do
    i=$((i + 1))
    [ $i -lt 100 ] || fail "the child did not receive both calls"
    sleep 0.1
done
child=$(user_procs "$uid" | awk '/mcp-example-server/ {print $2}')
echo "in flight: id 2 (15 x 100 ms, ends within the drain), id 3 (100000 x 100 ms, outlives it); child pid $child"
dpkg -i --force-confold "$deb2"
grep -q -- '--log /var/lib/mcp-gateway/child.log' /etc/mcp-gateway/gateway.ini || fail "the upgrade replaced the edited conffile"
[ "$(confmode)" = "640 root:mcp-gateway" ] || fail "after the upgrade /etc/mcp-gateway/gateway.ini is $(confmode)"
echo "edited conffile kept; postinst: $(grep -o 'deb-systemd-invoke try-restart [^ ]*' /var/lib/dpkg/info/mcp-gateway.postinst) (systemd not running: done here)"
unit_stop
wait "$short" "$long" || true
grep -q 'done after 15 steps' "$work/short.out" || fail "the short call did not finish in the drain: $(cat "$work/short.out")"
echo "id 2 finished during the drain: $(grep -o '"text":"[^"]*"' "$work/short.out")"
grep -q 'gateway shutting down' "$work/long.out" || fail "the long call got no shutdown error: $(cat "$work/long.out")"
echo "id 3 answered: $(grep -o '"error":{[^}]*}' "$work/long.out")"
grep '"notifications/cancelled"' /var/lib/mcp-gateway/child.log | grep -q '"reason":"gateway shutting down"' \
    || fail "the child did not get notifications/cancelled with a reason"
echo "child got: $(grep '"notifications/cancelled"' /var/lib/mcp-gateway/child.log)"
[ -z "$(user_procs "$uid")" ] || fail "left running after the stop: $(user_procs "$uid")"
[ -n "$child" ] && kill -0 "$child" 2>/dev/null && fail "child $child outlived the gateway"
echo "no process of mcp-gateway left (child $child reaped)"
unit_start
dpkg-query -W mcp-gateway
case $(readlink "/proc/$gwpid/exe") in *deleted*) fail "the new gateway runs the old binary" ;; esac
(cd tests && node package/sdk_client.mjs "$url") | tail -n 2

step "remove and purge"
# What prerm's "deb-systemd-invoke stop" does under systemd: the unit's stop.
unit_stop
dpkg --purge mcp-gateway
left=""
dpkg-query -W -f='${Status}' mcp-gateway 2>/dev/null | grep -q 'installed' && left="$left package-status"
getent passwd mcp-gateway >/dev/null && left="$left user"
getent group mcp-gateway >/dev/null && left="$left group"
while read -r f; do
    if [ -e "$f" ] && { [ ! -d "$f" ] || case $f in *mcp-gateway*) true ;; *) false ;; esac; }; then
        left="$left $f"
    fi
done <"$work/files"
for f in /etc/mcp-gateway /var/lib/mcp-gateway /var/log/mcp-gateway /usr/lib/mcp-gateway \
    /etc/systemd/system/multi-user.target.wants/mcp-gateway.service; do
    [ -e "$f" ] || [ -L "$f" ] && left="$left $f"
done
owned=$(find /etc /var /usr /tmp /run /srv /opt -xdev -uid "$uid" 2>/dev/null | head -n 5)
[ -n "$owned" ] && left="$left $owned"
[ -n "$(user_procs "$uid")" ] && left="$left processes:$(user_procs "$uid")"
[ -z "$left" ] || fail "left behind after purge:$left"
echo "purged: no package, user, group, file or process of mcp-gateway left"
echo "package test passed in $(($(date +%s) - t_start)) s"
