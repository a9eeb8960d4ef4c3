#!/bin/sh
# The operator's path of deploy/README.md, walked end to end as tests/run.sh runs it in CI (root on
# Debian 12, where systemd usually does not run, so each systemctl line is done here as the
# installed unit says): build (twice: 0.2.0-1 and a newer 0.2.0-1+upgradetest1) and lintian ->
# install -> configure -> start the installed binary as the unit would (its User, Group, working,
# state and logs directory, umask, ExecStartPre) and the SDK against it -> behind Debian's nginx
# with the installed site -> probes through nginx -> reload a changed and a broken file -> log to
# a file and rotate it with the installed logrotate file -> upgrade while requests are in flight
# -> two template instances behind the installed instances site, one restarted under a stream of
# initializes, then both by postinst's restart-instances after an upgrade -> remove and purge -> no
# user, file or process left.
# Each step prints "===== package: deploy/README.md step N, TITLE =====" (N and TITLE are the
# README's); the test fails first thing when the README's steps and the ones it walks differ.
# Any failure exits non-zero (and the EXIT trap stops what it started and purges the package).
# Not root: again through sudo.
set -eu
cd "$(dirname "$0")/../.."
root=$(pwd)

fail() {
    echo "package test FAILED: $*" >&2
    exit 1
}
# The steps are deploy/README.md's "## N. TITLE" headings; this file walks each with "step N".
self=$root/tests/package/run.sh
readme=$root/deploy/README.md
readme_steps=$(sed -n 's/^## \([0-9][0-9]*\)\. .*/\1/p' "$readme" | tr '\n' ' ')
walks=$(sed -n 's/^step \([0-9][0-9]*\)\( .*\)*$/\1/p' "$self" | tr '\n' ' ')
[ -n "$readme_steps" ] && [ "$readme_steps" = "$walks" ] \
    || fail "deploy/README.md has steps ${readme_steps:-none}, this test walks ${walks:-none}: walk each step, in order"
walked=""
# step N [NOTE]: the header of deploy/README.md's step N, with its title from the README.
step() {
    title=$(sed -n "s/^## $1\. //p" "$readme")
    [ -n "$title" ] || fail "deploy/README.md has no step $1"
    walked="$walked$1 "
    printf '\n===== package: deploy/README.md step %s, %s%s =====\n' "$1" "$title" "${2:+ ($2)}"
}

# It installs and purges a package: root, or sudo as tests/deps.sh uses it. A run that cannot is a
# failure, never a silent skip.
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "it installs and purges the package: run as root, or install sudo"
    exec sudo -E sh "$self" "$@"
fi
if dpkg-query -W -f='${Status}' mcp-gateway 2>/dev/null | grep -q 'ok installed'; then
    fail "mcp-gateway is installed on this machine already: purge it first (dpkg --purge mcp-gateway)"
fi
getent passwd mcp-gateway >/dev/null && fail "a user mcp-gateway exists already"

t_start=$(date +%s)
work=$(mktemp -d)
chmod 0711 "$work" # nginx's workers (nobody) reach their temp directories in it
gwpid=""     # the main unit's gateway
g1pid=""     # the template instances of step 10
g2pid=""
ngpid=""     # nginx
rollpid=""   # the client stream of step 10
sdpid=""     # systemd in its own namespaces (step 4)
restartpid="" # restart-instances in step 10
uid=""
cleanup() {
    status=$?
    if [ -n "$sdpid" ]; then
        sd=$(ps -o pid= --ppid "$sdpid" | tr -d ' ')
        [ -n "$sd" ] && kill -KILL "$sd" 2>/dev/null
    fi
    # nginx's workers outlive a master killed with SIGKILL, and hold the fds this shell gave it
    # (a lock on the file flock runs this test under among them): killed by pid first.
    if [ -n "$ngpid" ]; then
        for p in $(ps -o pid= --ppid "$ngpid"); do kill -KILL "$p" 2>/dev/null || true; done
    fi
    for p in $restartpid $rollpid $ngpid $gwpid $g1pid $g2pid; do
        kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
    done
    if [ $status -ne 0 ]; then
        for f in "$work"/journal*.log /var/log/mcp-gateway/gateway.log "$work/nginx/error.log"; do
            [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 40 "$f"; }
        done
        # The user did not exist before this test: whatever runs as it, the test started.
        if [ -n "$uid" ]; then
            for p in $(user_procs "$uid" | awk '{print $2}'); do kill -KILL "$p" 2>/dev/null || true; done
            sleep 0.5
        fi
        rm -f /etc/mcp-gateway/g1.ini /etc/mcp-gateway/g2.ini
        rm -rf /etc/systemd/system/mcp-gateway.service.d
        dpkg-query -W mcp-gateway >/dev/null 2>&1 && dpkg --purge mcp-gateway >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

unit=/lib/systemd/system/mcp-gateway.service
template=/lib/systemd/system/mcp-gateway@.service
conf=/etc/mcp-gateway/gateway.ini
inst="" # the template instance the unit functions drive; empty: the main unit
# ukey KEY: the unit's KEY= (the template's with %i as $inst).
ukey() {
    if [ -n "$inst" ]; then sed -n "s/^$1=//p" "$template" | sed "s/%i/$inst/g"; else sed -n "s/^$1=//p" "$unit"; fi
}
journal() { echo "$work/journal${inst:+-$inst}.log"; }
url=http://127.0.0.1:8080/mcp
public=mcp.example.com # the shipped sites' server_name

# unit_exec COMMAND...: runs (execs) a command as systemd runs the unit's: as User=/Group=, in
# WorkingDirectory=, with UMask= and the environment systemd gives a service.
unit_exec() {
    cd "$(ukey WorkingDirectory)"
    umask "$(ukey UMask)"
    exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        HOME="$(getent passwd "$(ukey User)" | cut -d: -f6)" USER="$(ukey User)" LOGNAME="$(ukey User)" \
        setpriv --reuid="$(ukey User)" --regid="$(ukey Group)" --init-groups --no-new-privs -- "$@"
}
# unit_start: what systemd does for "start": StateDirectory=, LogsDirectory=, ExecStartPre=, then
# ExecStart= in the background (its PID in $started). The gateway's stderr stands in for the journal.
unit_start() {
    install -d -o "$(ukey User)" -g "$(ukey Group)" -m 0755 "/var/lib/$(ukey StateDirectory)" \
        "/var/log/$(ukey LogsDirectory)"
    # shellcheck disable=SC2046 # the command line is split like systemd splits it (no quotes in it)
    (unit_exec $(ukey ExecStartPre)) || fail "ExecStartPre failed"
    j=$(journal)
    : >"$j"
    # shellcheck disable=SC2046
    (unit_exec $(ukey ExecStart)) >>"$j" 2>&1 &
    started=$!
    i=0
    until grep -q 'listening on' "$j"; do
        kill -0 "$started" 2>/dev/null || fail "the gateway exited at start: $(cat "$j")"
        i=$((i + 1))
        [ $i -lt 100 ] || fail "the gateway did not listen within 10 s"
        sleep 0.1
    done
    echo "started mcp-gateway${inst:+@$inst} pid $started as $(ps -o user= -p "$started") ($(readlink "/proc/$started/exe")):"
    grep 'listening on' "$j"
}
# unit_stop PID: what systemd does for "stop" with KillMode=mixed: KillSignal= to the main process
# only; SIGKILL to what is left once TimeoutStopSec= has passed, which here is a failure.
unit_stop() {
    sig=$(ukey KillSignal)
    timeout=$(ukey TimeoutStopSec)
    t0=$(date +%s%N)
    kill -s "${sig#SIG}" "$1"
    i=0
    while kill -0 "$1" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt $((timeout * 10)) ]; then
            kill -KILL "$1"
            fail "the gateway outlived TimeoutStopSec=$timeout: systemd would have sent SIGKILL"
        fi
        sleep 0.1
    done
    rc=0
    wait "$1" || rc=$?
    [ $rc -eq 0 ] || fail "the gateway exited with status $rc after $sig"
    echo "$sig: mcp-gateway${inst:+@$inst} exited 0 after $((($(date +%s%N) - t0) / 1000000)) ms (TimeoutStopSec=$timeout s)"
}
# unit_reload PID: ExecReload=: the check as the unit's user (a failure ends the reload there,
# nothing signalled), then SIGHUP. Returns the check's status.
unit_reload() {
    # shellcheck disable=SC2046
    (unit_exec $(ukey ExecReload | head -n 1)) || return 1
    kill -HUP "$1"
}
user_procs() { ps -e -o uid=,pid=,args= | awk -v u="$1" '$1 == u'; }
# wait_for DESCRIPTION COMMAND...: polls COMMAND every 0.1 s for at most 20 s.
wait_for() {
    what=$1
    shift
    i=0
    until "$@"; do
        i=$((i + 1))
        [ $i -lt 200 ] || fail "not within 20 s: $what"
        sleep 0.1
    done
}
count() {
    c=$(grep -c "$1" "$2" 2>/dev/null) || true
    echo "${c:-0}"
}
more_than() { [ "$(count "$1" "$2")" -gt "$3" ]; }
freeport() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }

# curl_rpc SESSION BODY [OUT]: one POST to the installed gateway, answer to OUT or stdout.
curl_rpc() {
    curl -sS -N -m 60 "$url" -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
        ${1:+-H "Mcp-Session-Id: $1"} -d "$2" -o "${3:--}"
}
# initialize [URL]: a new session (the gateway's, or through nginx by the public name); its id in $sid.
initialize() {
    curl -sS -m 20 -D "$work/init.h" -o "$work/init.body" "${1:-$url}" ${1:+-H "Host: $public"} \
        -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
        -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"package-test","version":"1"}}}'
    sid=$(sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: *\([^[:space:]]*\).*/\1/p' "$work/init.h")
    [ -n "$sid" ] || fail "initialize gave no session id: $(cat "$work/init.h" "$work/init.body")"
    grep -q '"result"' "$work/init.body" || fail "initialize gave no result: $(cat "$work/init.body")"
    [ -n "${1:-}" ] || curl_rpc "$sid" '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
}
# probe URL: HTTP status of a GET by nginx's public name.
probe() { curl -sS -m 20 -o "$work/probe.body" -w '%{http_code}' -H "Host: $public" "$1"; }
metric() { curl -sS -m 20 http://127.0.0.1:8080/metrics | sed -n "s/^$1 //p"; }

step 1 "twice: 0.2.0-1, then 0.2.0-1+upgradetest1 for step 9; lintian on each"
sh deploy/debian/build.sh "$work/v1"
MCPGW_DEB_SUFFIX=+upgradetest1 sh deploy/debian/build.sh "$work/v2"
deb1=$(ls "$work"/v1/mcp-gateway_*.deb)
deb2=$(ls "$work"/v2/mcp-gateway_*.deb)
echo "build and lintian: $(($(date +%s) - t_start)) s"
# The container image made from it (deploy/container/README.md), run by podman.
t_cont=$(date +%s)
sh tests/container/run.sh "$deb1"
t_built=$(date +%s)
echo "container image: $((t_built - t_cont)) s"

step 2 "$(basename "$deb1")"
dpkg -i "$deb1"
dpkg -L mcp-gateway | sort >"$work/files"
for f in /usr/bin/mcp-gateway /usr/lib/mcp-gateway/mcp-example-server /etc/mcp-gateway/gateway.ini \
    "$unit" /usr/lib/sysusers.d/mcp-gateway.conf /usr/share/man/man8/mcp-gateway.8.gz \
    /usr/share/man/man5/mcp-gateway.ini.5.gz /usr/share/doc/mcp-gateway/examples/mcp-gateway.conf \
    /usr/share/doc/mcp-gateway/examples/prometheus/mcp-gateway.rules.yml \
    /usr/share/doc/mcp-gateway/examples/prometheus/mcp-gateway.rules.test.yml \
    /etc/logrotate.d/mcp-gateway "$template" /usr/share/doc/mcp-gateway/examples/mcp-gateway-instances.conf; do
    [ -e "$f" ] || fail "$f is not installed"
    echo "installed: $f"
done
for d in README PROTOCOL SECURITY OPERATIONS; do
    ls /usr/share/doc/mcp-gateway/$d.md* >/dev/null 2>&1 || fail "/usr/share/doc/mcp-gateway/$d.md is not installed"
done
echo "installed: README, PROTOCOL, SECURITY and OPERATIONS (deploy/README.md) in /usr/share/doc/mcp-gateway"
dpkg-query -W -f='${Conffiles}\n' mcp-gateway | grep -q " $conf " || fail "$conf is not a conffile"
echo "conffile: $conf"
command -v logrotate >/dev/null || fail "logrotate is not installed (tests/deps.sh installs it)"
logrotate -d -s "$work/logrotate.state" /etc/logrotate.d/mcp-gateway >"$work/logrotate.out" 2>&1 \
    || { cat "$work/logrotate.out"; fail "logrotate -d rejects /etc/logrotate.d/mcp-gateway"; }
echo "logrotate -d accepts /etc/logrotate.d/mcp-gateway"
# It may hold admin_token and env secrets: root's, read by the gateway through its group only.
confmode() { stat -c '%a %U:%G' $conf; }
[ "$(confmode)" = "640 root:mcp-gateway" ] || fail "$conf is $(confmode), not 640 root:mcp-gateway"
echo "mode: $conf $(confmode)"
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
[ -e /etc/systemd/system/multi-user.target.wants/mcp-gateway@.service ] && fail "the template unit is enabled"
echo "template unit mcp-gateway@.service installed, not enabled"
echo "--- the installed units: systemd-analyze verify and security"
systemd-analyze verify "$unit"
systemd-analyze verify /lib/systemd/system/mcp-gateway@test.service
systemd-analyze security --offline=true "$unit" | tail -n 1 | tee "$work/security"
score=$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p' "$work/security")
recorded=$(sed -n 's/.*`systemd-analyze security` rates the installed unit \([0-9.]*\) .*/\1/p' "$readme")
[ -n "$score" ] && [ "$score" = "$recorded" ] \
    || fail "systemd-analyze security says ${score:-nothing}, deploy/README.md records ${recorded:-nothing}"
drain=$(sed -n 's/^shutdown_drain_ms = //p' $conf)
ladder=$(($(sed -n 's/^child_stdin_grace_ms = //p' $conf) + $(sed -n 's/^child_term_grace_ms = //p' $conf)))
[ $(($(ukey TimeoutStopSec) * 1000)) -gt $((drain + ladder)) ] \
    || fail "TimeoutStopSec=$(ukey TimeoutStopSec) is not above the drain and the child ladder"
echo "TimeoutStopSec=$(ukey TimeoutStopSec) s > shutdown_drain_ms $drain + child ladder $ladder ms; KillMode=$(ukey KillMode), KillSignal=$(ukey KillSignal)"

step 3 "nginx's public name in allowed_hosts; --check-config, --print-config"
sed -i "s/^allowed_hosts = .*/&, $public/" $conf
# The installed binary knows where it lives: a bare check reads /etc/mcp-gateway/gateway.ini.
/usr/bin/mcp-gateway --version | grep -q "default config $conf)\$" \
    || fail "the default config compiled in is not $conf"
(cd / && /usr/bin/mcp-gateway --check-config) | tee "$work/check" | grep -q "^$conf: configuration OK" \
    || fail "mcp-gateway --check-config without --config does not pass $conf: $(cat "$work/check")"
cat "$work/check"
(cd / && /usr/bin/mcp-gateway --print-config) | grep "^allowed_hosts = .*$public\$" \
    || fail "--print-config does not show $public in allowed_hosts"

step 4 "as the unit would: no running systemd here; then the SDK"
[ -d /run/systemd/system ] && echo "(systemd runs here, but the test drives the unit's steps itself so CI and this machine agree)"
unit_start
gwpid=$started
grep -q '^<[0-7]>' "$(journal)" || fail "the installed config does not log for the journal"
echo "log lines carry journal priorities: $(head -n 1 "$(journal)")"
echo "--- the SDK client against the installed gateway ($url)"
(cd tests && node package/sdk_client.mjs "$url")
echo "--- SDK interop tests with GW_BIN=/usr/bin/mcp-gateway, GW_EXAMPLE=/usr/lib/mcp-gateway/mcp-example-server"
GW_BIN=/usr/bin/mcp-gateway GW_EXAMPLE=/usr/lib/mcp-gateway/mcp-example-server GW_SOURCE_ROOT="$root" \
    node --test --test-reporter=spec tests/integration/sdk_interop.test.mjs tests/integration/stateless_sdk.test.mjs \
    >"$work/interop.log" 2>&1 || {
    cat "$work/interop.log"
    fail "SDK interop against the installed binary"
}
grep -E '^(✔|✖|ℹ (tests|pass|fail))' "$work/interop.log"
t_sdk=$(date +%s)
# The installed unit under systemd itself, with the installed file's boxed example server
# (deploy/README.md, "A box around each child"). No systemd runs here: systemd 252 runs as PID 1
# of a new PID and mount namespace (its own /run; units from /lib and /etc as installed), told to
# start only mcp-gateway.service. As installed, a session's call is answered by a boxed child (PID
# 1 in its own PID namespace); with the shipped drop-in for a gateway that boxes nothing, the same
# file is refused. Then the emulated unit starts again for the next steps.
echo "--- sandbox = on under systemd itself: the unit as installed, then with the unboxed drop-in"
t_box=$(date +%s)
unit_stop "$gwpid"
gwpid=""
[ "$(grep -c '^sandbox = on$' "$conf")" = 1 ] || fail "the installed $conf does not box its example server (sandbox = on)"
dropin=/etc/systemd/system/mcp-gateway.service.d/unboxed.conf
# systemd_box LOG: systemd as PID 1 of new namespaces, starting mcp-gateway.service with its output
# (no journald there) appended to LOG; the unshare's PID in $sdpid.
systemd_box() {
    : >"$1"
    unshare --pid --fork --mount --mount-proc --propagation private sh -c '
        mount -t tmpfs -o mode=0755 tmpfs /run
        mkdir -p /run/systemd/system/mcp-gateway.service.d
        printf "[Unit]\nDefaultDependencies=no\n[Service]\nStandardOutput=append:%s\nStandardError=append:%s\n" \
            "$1" "$1" >/run/systemd/system/mcp-gateway.service.d/zz-package-test.conf
        printf "[Unit]\nDefaultDependencies=no\nWants=mcp-gateway.service\n" >/run/systemd/system/package-test.target
        export container=package-test
        exec /lib/systemd/systemd --system --unit=package-test.target --log-target=console --log-level=warning' \
        sh "$1" >"$1.systemd" 2>&1 &
    sdpid=$!
}
systemd_box_stop() {
    # SIGKILL to the namespace's PID 1 ends every process in it (the gateway, its children).
    sd=$(ps -o pid= --ppid "$sdpid" | tr -d ' ')
    [ -n "$sd" ] && kill -KILL "$sd"
    wait "$sdpid" 2>/dev/null || true
    sdpid=""
    # Its cgroups (init.scope, system.slice) went under this shell's own: removed, now that the
    # namespace's processes are gone (rmdir refuses a cgroup with a process or a child in it).
    for d in $(systemd_cgroups); do
        grep -qxF "$d" "$work/cgroups.before" || find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
}
systemd_cgroups() { find /sys/fs/cgroup -maxdepth 4 -type d \( -name init.scope -o -name system.slice \) 2>/dev/null | sort; }
systemd_cgroups >"$work/cgroups.before"
systemd_box "$work/journal-box.log"
wait_for "the boxed gateway listens under systemd" grep -q 'listening on' "$work/journal-box.log"
grep 'sandbox: namespaces user, mount, pid, ipc, uts' "$work/journal-box.log" || fail "no sandbox: line at start: $(cat "$work/journal-box.log")"
initialize
curl_rpc "$sid" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"boxed"}}}' >"$work/box.call"
grep -q '"text":"boxed"' "$work/box.call" || fail "the boxed server did not answer: $(cat "$work/box.call")"
kids=$(user_procs "$uid" | awk '/mcp-example-server/ {print $2}')
[ -n "$kids" ] || fail "no example server runs as mcp-gateway"
for k in $kids; do
    nspid=$(sed -n 's/^NSpid:[[:space:]]*//p' "/proc/$k/status")
    [ "${nspid##*[[:space:]]}" = 1 ] || fail "child $k is not PID 1 of its own namespace (NSpid $nspid)"
    echo "example server pid $k: NSpid $nspid (PID 1 in its box)"
done
systemd_box_stop
install -D -m 0644 /usr/share/doc/mcp-gateway/examples/systemd/unboxed.conf "$dropin"
systemd_box "$work/journal-box-unboxed.log"
wait_for "the unboxed drop-in refuses the box" grep -q 'sandbox = on: the kernel refuses a new user namespace' "$work/journal-box-unboxed.log"
systemd_box_stop
echo "with the unboxed drop-in: $(grep -m 1 -o 'sandbox = on: the kernel refuses a new user namespace: [^(]*' "$work/journal-box-unboxed.log")"
rm -f "$dropin"
rmdir /etc/systemd/system/mcp-gateway.service.d
echo "the installed unit under systemd: a boxed server served; refused with the unboxed drop-in: $(($(date +%s) - t_box)) s"
unit_start
gwpid=$started
# systemd starts nginx (Before=nginx.service) once the gateway's READY=1 says readiness has a
# verdict; here that is /readyz answering 200.
wait_for "/readyz 200 after the restart" sh -c "curl -sS -m 5 -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/readyz | grep -qx 200"

step 5 "the installed site, Debian's nginx with a private prefix, its listen on a free loopback port"
# What sites-enabled/ is to Debian's nginx.conf: a file included inside http {}. Only the listen
# line (443 ssl, a free loopback port here) and the TLS placeholders change.
command -v nginx >/dev/null || fail "nginx is not installed (tests/deps.sh installs nginx-light)"
ng=$work/nginx
mkdir -p "$ng/sites-enabled"
chmod 0755 "$ng"
ngport=$(freeport)
# site FILE: the installed site FILE into sites-enabled/mcp-gateway, listening on $ngport without
# TLS, with its upstream ports swapped as "8081:PORT 8082:PORT" in $2.
site() {
    grep -q 'listen 443 ssl http2;' "$1" || fail "$1 has no 'listen 443 ssl http2;'"
    sed -e "s/listen 443 ssl http2;/listen 127.0.0.1:$ngport;/" -e '/^[[:space:]]*ssl_certificate/d' "$1" >"$ng/site"
    for map in ${2:-}; do
        grep -q "127\.0\.0\.1:${map%%:*}\b" "$ng/site" || fail "$1 has no 127.0.0.1:${map%%:*}"
        sed -i "s/127\.0\.0\.1:${map%%:*}\b/127.0.0.1:${map#*:}/g" "$ng/site"
    done
    mv "$ng/site" "$ng/sites-enabled/mcp-gateway"
}
cat >"$ng/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $ng/nginx.pid;
error_log $ng/error.log info;
events { worker_connections 256; }
http {
    access_log $ng/access.log;
    client_body_temp_path $ng/body;
    proxy_temp_path $ng/proxy;
    fastcgi_temp_path $ng/fastcgi;
    uwsgi_temp_path $ng/uwsgi;
    scgi_temp_path $ng/scgi;
    include $ng/sites-enabled/*;
}
NGINX
site /usr/share/doc/mcp-gateway/examples/mcp-gateway.conf
nginx -t -q -p "$ng" -c "$ng/nginx.conf" -e "$ng/error.log" || fail "nginx -t rejects the installed site"
echo "nginx -t: the installed mcp-gateway.conf is accepted (upstream 127.0.0.1:8080, listen 127.0.0.1:$ngport)"
nginx -p "$ng" -c "$ng/nginx.conf" -e "$ng/error.log" &
ngpid=$!
via=http://127.0.0.1:$ngport
nginx_up() { kill -0 "$ngpid" 2>/dev/null || fail "nginx exited: $(cat "$ng/error.log")"; curl -s -o /dev/null "$via/"; }
wait_for "nginx to listen on $ngport" nginx_up
echo "nginx pid $ngpid on $via"

step 6 "by the public name $public"
for p in /healthz /readyz; do
    [ "$(probe "$via$p")" = 200 ] || fail "GET $p through nginx: $(cat "$work/probe.body")"
    echo "GET $p through nginx: 200 $(cat "$work/probe.body")"
done
grep -q '"ready":true' "$work/probe.body" || fail "/readyz is not ready"
initialize "$via/mcp"
echo "initialize through nginx: session $sid"
[ "$(probe "$via/metrics")" = 404 ] || fail "nginx proxies /metrics"
[ "$(metric mcpgw_ready)" = 1 ] || fail "mcpgw_ready on the loopback listener is not 1"
echo "/metrics: 404 through nginx; on 127.0.0.1:8080 mcpgw_ready 1"
grep -q "host refused\|not in \[gateway\] allowed_hosts" "$(journal)" && fail "the gateway refused nginx's Host"

step 7 "a changed file, then a broken one"
# As an operator would: the child logs what it receives, and a shorter drain keeps step 9 quick.
# The child is boxed: it writes only where sandbox_writable_paths says, here a directory of its own
# in the unit's LogsDirectory (writable under ProtectSystem=strict; the state directory
# /var/lib/mcp-gateway is hidden from every box).
childlog=/var/log/mcp-gateway/example/child.log
install -d -o mcp-gateway -g mcp-gateway -m 0750 "${childlog%/*}"
sed -i -e "s|^command = /usr/lib/mcp-gateway/mcp-example-server\$|& --log $childlog|" \
    -e "s|^; sandbox_writable_paths =\$|sandbox_writable_paths = ${childlog%/*}|" \
    -e 's/^shutdown_drain_ms = .*/shutdown_drain_ms = 3000/' $conf
grep -qx "sandbox_writable_paths = ${childlog%/*}" $conf || fail "no sandbox_writable_paths line for the child's log in $conf"
n=$(count 'configuration reloaded' "$(journal)")
unit_reload "$gwpid" || fail "systemctl reload: the check refused the changed file"
wait_for "the reload to be logged" more_than 'configuration reloaded' "$(journal)" "$n"
grep 'configuration reloaded' "$(journal)" | tail -n 1
initialize "$via/mcp"
wait_for "the new session's child to log its initialize" grep -q '"initialize"' "$childlog"
echo "a new session runs the changed command: its boxed child logs to $childlog"
cp -p $conf "$work/good.ini"
sed -i 's/^max_sessions = .*/max_sessions = 0/' $conf
unit_reload "$gwpid" 2>"$work/reload.err" && fail "systemctl reload: the check passed a broken file"
grep -q 'max_sessions' "$work/reload.err" || fail "the check did not name the broken key: $(cat "$work/reload.err")"
echo "systemctl reload refuses it, nothing signalled: $(cat "$work/reload.err")"
kill -HUP "$gwpid"
wait_for "the refused reload to be logged" grep -q 'the running configuration stays' "$(journal)"
grep 'the running configuration stays' "$(journal)"
[ "$(metric mcpgw_config_last_reload_successful)" = 0 ] || fail "mcpgw_config_last_reload_successful is not 0"
initialize "$via/mcp"
echo "a SIGHUP anyway: logged, mcpgw_config_last_reload_successful 0, still serving (session $sid)"
cp -p "$work/good.ini" $conf
n=$(count 'configuration reloaded' "$(journal)")
unit_reload "$gwpid" || fail "systemctl reload refuses the repaired file"
wait_for "the reload to be logged" more_than 'configuration reloaded' "$(journal)" "$n"
[ "$(metric mcpgw_config_last_reload_successful)" = 1 ] || fail "mcpgw_config_last_reload_successful is not 1"
echo "repaired and reloaded: mcpgw_config_last_reload_successful 1"

step 8 "log_file, then the installed logrotate file"
log=/var/log/mcp-gateway/gateway.log
cp -p $conf "$work/good.ini"
sed -i "s|^log_file =\$|log_file = $log|" $conf
unit_reload "$gwpid" || fail "systemctl reload refuses log_file"
wait_for "the gateway to log to $log" grep -q 'configuration reloaded' $log
echo "$log: $(stat -c '%a %U:%G' $log), $(wc -l <$log) lines"
# Its postrotate signals through systemd (systemctl kill --kill-whom=main), which does not run
# here: that one line becomes a kill of the gateway's PID; the rest is the installed file.
sed "s|^\([[:space:]]*\)systemctl kill --kill-whom=main --signal=SIGUSR1 .*|\1kill -USR1 $gwpid|" \
    /etc/logrotate.d/mcp-gateway >"$work/logrotate.conf"
[ "$(diff /etc/logrotate.d/mcp-gateway "$work/logrotate.conf" | grep -c '^>')" = 1 ] \
    || fail "the installed logrotate file has no postrotate systemctl kill line to stand in for"
grep -q 'kill -USR1' "$work/logrotate.conf" || fail "no kill line"
logrotate -f -s "$work/logrotate.state" "$work/logrotate.conf"
[ -f $log.1 ] && grep -q 'configuration reloaded' $log.1 || fail "$log was not rotated to $log.1"
wait_for "the gateway to reopen $log" grep -q 'log file reopened' $log
initialize "$via/mcp"
wait_for "new lines in the new $log" grep -q "session=$sid\|$sid" $log
echo "rotated: $log.1 ($(wc -l <$log.1) lines); $log reopened, $(stat -c '%a %U:%G' $log), $(wc -l <$log) lines: $(tail -n 1 $log)"
cp -p "$work/good.ini" $conf
n=$(count 'configuration reloaded' "$(journal)")
unit_reload "$gwpid" || fail "systemctl reload refuses the file without log_file"
wait_for "the log back in the journal" more_than 'configuration reloaded' "$(journal)" "$n"
echo "log_file emptied and reloaded: the log is back on stderr (the journal)"

step 9 "to $(basename "$deb2") with requests in flight: restart with the drain"
initialize
echo "session $sid"
call='{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{"steps":%d,"interval_ms":100}}}'
# shellcheck disable=SC2059
curl_rpc "$sid" "$(printf "$call" 2 15)" "$work/short.out" &
short=$!
# shellcheck disable=SC2059
curl_rpc "$sid" "$(printf "$call" 3 100000)" "$work/long.out" &
long=$!
calls() { [ "$(count '"tools/call"' "$childlog")" -ge 2 ]; }
wait_for "the child to receive both calls" calls
child=$(user_procs "$uid" | awk '/mcp-example-server/ {print $2}' | tr '\n' ' ')
echo "in flight: id 2 (15 x 100 ms, ends within the drain), id 3 (100000 x 100 ms, outlives it); children: $child"
dpkg -i --force-confold "$deb2"
grep -q -- "--log $childlog" $conf || fail "the upgrade replaced the edited conffile"
[ "$(confmode)" = "640 root:mcp-gateway" ] || fail "after the upgrade $conf is $(confmode)"
echo "edited conffile kept; postinst: $(grep -o 'deb-systemd-invoke try-restart [^ ]*' /var/lib/dpkg/info/mcp-gateway.postinst) (systemd not running: done here)"
unit_stop "$gwpid"
gwpid=""
wait "$short" "$long" || true
grep -q 'done after 15 steps' "$work/short.out" || fail "the short call did not finish in the drain: $(cat "$work/short.out")"
echo "id 2 finished during the drain: $(grep -o '"text":"[^"]*"' "$work/short.out")"
grep -q 'gateway shutting down' "$work/long.out" || fail "the long call got no shutdown error: $(cat "$work/long.out")"
echo "id 3 answered: $(grep -o '"error":{[^}]*}' "$work/long.out")"
grep '"notifications/cancelled"' "$childlog" | grep -q '"reason":"gateway shutting down"' \
    || fail "the child did not get notifications/cancelled with a reason"
echo "child got: $(grep '"notifications/cancelled"' "$childlog")"
[ -z "$(user_procs "$uid")" ] || fail "left running after the stop: $(user_procs "$uid")"
for c in $child; do kill -0 "$c" 2>/dev/null && fail "child $c outlived the gateway"; done
echo "no process of mcp-gateway left (children reaped: $child)"
unit_start
gwpid=$started
dpkg-query -W mcp-gateway
case $(readlink "/proc/$gwpid/exe") in *deleted*) fail "the new gateway runs the old binary" ;; esac
(cd tests && node package/sdk_client.mjs "$url") | tail -n 2

step 10 "mcp-gateway@g1 and @g2 behind the installed instances site; g1 restarted, then an upgrade restarts both, under a stream of initializes"
p1=$(freeport)
p2=$(freeport)
for i in g1 g2; do
    [ $i = g1 ] && p=$p1 || p=$p2
    sed -e "s/^listen = .*/listen = 127.0.0.1:$p/" -e "s/^instance_id =.*/instance_id = $i/" $conf >/etc/mcp-gateway/$i.ini
    chgrp mcp-gateway /etc/mcp-gateway/$i.ini
    chmod 0640 /etc/mcp-gateway/$i.ini
done
# systemctl disable --now mcp-gateway: the main unit's stop (the symlinks are systemd's business).
unit_stop "$gwpid"
gwpid=""
inst=g1
unit_start
g1pid=$started
inst=g2
unit_start
g2pid=$started
inst=""
site /usr/share/doc/mcp-gateway/examples/mcp-gateway-instances.conf "8081:$p1 8082:$p2"
nginx -t -q -p "$ng" -c "$ng/nginx.conf" -e "$ng/error.log" || fail "nginx -t rejects the installed instances site"
# systemctl reload nginx. The reload is done once the old worker has exited: until then it may
# still take a new connection, with the old site (whose gateway was just stopped: a 502).
old_workers=$(pgrep -P "$ngpid" | tr '\n' ' ')
[ -n "$old_workers" ] || fail "nginx (pid $ngpid) has no worker"
kill -HUP "$ngpid"
old_workers_gone() {
    for w in $old_workers; do kill -0 "$w" 2>/dev/null && return 1; done
    return 0
}
wait_for "nginx's old worker ($old_workers) to exit after the reload" old_workers_gone
# The new site answers once an initialize through nginx gets a session id of g1 or g2.
instance_site() {
    curl -s -m 20 -D - -o /dev/null "$via/mcp" -H "Host: $public" -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' \
        -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"package-test","version":"1"}}}' \
        | grep -qi '^mcp-session-id: g[12]\.'
}
wait_for "nginx to route by the instances site" instance_site
initialize "$via/mcp"
echo "nginx reloaded with the installed mcp-gateway-instances.conf: g1 on $p1, g2 on $p2 (session $sid)"
stream=$work/rolling.json
(cd tests && exec node package/rolling.mjs "$via/mcp" "$public" "$stream" "$work/rolling.stop") >"$work/rolling.out" 2>&1 &
rollpid=$!
# field NAME: a count the client stream wrote last.
field() { [ -f "$stream" ] && node -e "const j=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'));console.log(j[process.argv[2]]??0)" "$stream" "$1" || echo 0; }
# end_stream WHEN: stops the client stream of step 10, prints what it counted, fails the run if
# any of its requests failed.
end_stream() {
    touch "$work/rolling.stop"
    rc=0
    wait "$rollpid" || rc=$?
    rollpid=""
    cat "$work/rolling.out"
    [ $rc -eq 0 ] || fail "requests failed $1"
}
both() { [ "$(field g1)" -ge 3 ] && [ "$(field g2)" -ge 3 ]; }
wait_for "new sessions on both instances" both
echo "before: $(cat "$stream")"
inst=g1
unit_stop "$g1pid" # systemctl restart mcp-gateway@g1: the stop ...
g1pid=""
atstop=$(field ok)
past() { [ "$(field "$1")" -ge "$2" ]; }
wait_for "new sessions while g1 is down" past ok $((atstop + 10))
echo "while g1 is down: $(cat "$stream")"
unit_start # ... and the start
g1pid=$started
inst=""
g1before=$(field g1)
wait_for "new sessions on the restarted g1" past g1 $((g1before + 3))
end_stream "during the rolling restart"
echo "rolling restart of g1: no initialize failed"

echo "--- an upgrade with both instances running (step 9): postinst restarts each, one at a time"
# dpkg -i of the newer package again: a reinstall replaces every file and runs postinst configure
# with the installed version, as an upgrade does. With systemd, postinst then runs
# /usr/lib/mcp-gateway/restart-instances; here it is run as postinst would, with systemctl and
# deb-systemd-invoke stood in for by $work/stub: list-units names the instances this test runs,
# show gives an instance's ExecStart= as systemd shows it, try-restart asks this shell (through $work/ctl) to stop and start that instance as the unit
# would, and returns once it listens again, as systemctl does.
grep -q '^ */usr/lib/mcp-gateway/restart-instances' /var/lib/dpkg/info/mcp-gateway.postinst \
    || fail "the installed postinst does not restart the template's instances"
mkdir -p "$work/stub" "$work/ctl"
cat >"$work/stub/systemctl" <<STUB
#!/bin/sh
# systemctl and deb-systemd-invoke for restart-instances, where no systemd runs.
case "\$1" in
list-units)
    for i in g1 g2; do
        [ -f $work/ctl/\$i.pid ] && kill -0 "\$(cat $work/ctl/\$i.pid)" 2>/dev/null \
            && echo "mcp-gateway@\$i.service loaded active running mcp-gateway \$i"
    done ;;
show) # show -p ExecStart --value mcp-gateway@NAME.service: the template's, with %i as NAME
    i=\${5#mcp-gateway@}
    i=\${i%.service}
    cmd=\$(sed -n 's/^ExecStart=//p' $template | sed "s/%i/\$i/g")
    echo "{ path=\${cmd%% *} ; argv[]=\$cmd ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }" ;;
try-restart)
    echo "\$2" >$work/ctl/req.tmp && mv $work/ctl/req.tmp $work/ctl/req
    i=0
    until [ -f $work/ctl/done ]; do
        i=\$((i + 1)); [ \$i -lt 600 ] || exit 1
        sleep 0.1
    done
    rm $work/ctl/done ;;
*) echo "stub systemctl: \$*: not stood in for" >&2; exit 1 ;;
esac
STUB
chmod 0755 "$work/stub/systemctl"
ln -s systemctl "$work/stub/deb-systemd-invoke"
echo "$g1pid" >"$work/ctl/g1.pid"
echo "$g2pid" >"$work/ctl/g2.pid"
rm -f "$work/rolling.stop" "$stream"
(cd tests && exec node package/rolling.mjs "$via/mcp" "$public" "$stream" "$work/rolling.stop") >"$work/rolling.out" 2>&1 &
rollpid=$!
wait_for "new sessions on both instances" both
dpkg -i --force-confold "$deb2"
for i in g1 g2; do
    eval "p=\$${i}pid"
    case $(readlink "/proc/$p/exe") in
    *deleted*) echo "mcp-gateway@$i (pid $p) runs the replaced binary: $(readlink "/proc/$p/exe")" ;;
    *) fail "dpkg -i did not replace the binary mcp-gateway@$i runs: $(readlink "/proc/$p/exe")" ;;
    esac
done
PATH=$work/stub:$PATH /usr/lib/mcp-gateway/restart-instances >"$work/restart.out" 2>&1 &
restartpid=$!
n=0
while kill -0 "$restartpid" 2>/dev/null || [ -f "$work/ctl/req" ]; do
    if [ -f "$work/ctl/req" ]; then
        u=$(cat "$work/ctl/req")
        rm "$work/ctl/req"
        inst=${u#mcp-gateway@}
        inst=${inst%.service}
        case $inst in g1 | g2) ;; *) fail "restart-instances asked to restart $u" ;; esac
        eval "p=\$${inst}pid"
        unit_stop "$p"
        unit_start
        eval "${inst}pid=$started"
        echo "$started" >"$work/ctl/$inst.pid"
        echo "restarted $u at $(date +%T.%N | cut -c1-12): $(cat "$stream")"
        inst=""
        touch "$work/ctl/done"
    fi
    n=$((n + 1))
    [ $n -lt 1500 ] || fail "restart-instances did not end within 150 s: $(cat "$work/restart.out")"
    sleep 0.1
done
rc=0
wait "$restartpid" || rc=$?
cat "$work/restart.out"
[ $rc -eq 0 ] || fail "restart-instances failed"
[ "$(grep -c 'is ready$' "$work/restart.out")" = 2 ] || fail "restart-instances did not wait for both instances to be ready"
for i in g1 g2; do
    eval "p=\$${i}pid"
    [ "$(readlink "/proc/$p/exe")" = /usr/bin/mcp-gateway ] \
        || fail "mcp-gateway@$i (pid $p) does not run the installed binary: $(readlink "/proc/$p/exe")"
done
echo "after restart-instances: g1 (pid $g1pid) and g2 (pid $g2pid) run the new /usr/bin/mcp-gateway"
after=$(field ok)
wait_for "new sessions on both upgraded instances" past ok $((after + 10))
end_stream "while the upgrade restarted the instances"
echo "upgrade of both instances, one at a time: no initialize failed"

step 11 "the instances stopped, then the package's unit stop (prerm) and purge"
inst=g1
unit_stop "$g1pid"
inst=g2
unit_stop "$g2pid"
inst=""
g1pid=""
g2pid=""
rm /etc/mcp-gateway/g1.ini /etc/mcp-gateway/g2.ini
grep -E '\[(alert|emerg|crit)\]' "$ng/error.log" && fail "nginx logged the above"
rm "$ng/sites-enabled/mcp-gateway"
kill -QUIT "$ngpid" # nginx stopped here: it was the test's
wait "$ngpid" || true
ngpid=""
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

[ "$walked" = "$readme_steps" ] || fail "walked steps $walked, deploy/README.md has $readme_steps"
echo "walked deploy/README.md steps $walked"
echo "package test passed in $(($(date +%s) - t_start)) s (build $((t_cont - t_start)) s; container $((t_built - t_cont)) s; SDK interop $((t_sdk - t_built)) s with install; the rest $(($(date +%s) - t_sdk)) s)"
