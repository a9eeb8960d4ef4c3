#!/bin/sh
# The container image end to end, as tests/package/run.sh runs it in CI with the .deb it built:
#   sh tests/container/run.sh DEB
# deploy/container/build.sh makes the image of DEB (mmdebstrap, podman import) -> under podman's
# defaults it exits, refusing its example server's box -> podman runs it with the two options
# deploy/container/README.md names for the box, the port published on loopback and a bearer token
# mounted -> /readyz answers 200 -> an MCP session (initialize, tools/call echo; no token: 401) ->
# every process in it runs as the package's user, with no capability, the child boxed -> podman stop with a call in flight: SIGTERM, the drain, the
# call answered "gateway shutting down", exit 0 within podman's default stop timeout -> the
# container and the image are removed. Each step prints a "===== container: ..." header and its
# time. Any failure (podman or mmdebstrap missing included) exits non-zero; the EXIT trap shows the
# container's log and removes what the test made (by name), nothing else.
set -eu
cd "$(dirname "$0")/../.."

step_t=0
step() {
    [ "$step_t" -eq 0 ] || echo "($(($(date +%s) - step_t)) s)"
    step_t=$(date +%s)
    printf '\n===== container: %s =====\n' "$*"
}
fail() {
    echo "container test FAILED: $*" >&2
    exit 1
}
[ $# -eq 1 ] && [ -f "$1" ] || fail "usage: $0 DEB"
deb=$1
for tool in podman runc mmdebstrap curl; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool is not installed (tests/deps.sh installs it)"
done

t_start=$(date +%s)
work=$(mktemp -d)
name=mcpgw-test-$$
image=localhost/$name:1
made_image=""
made_ctr=""
cleanup() {
    status=$?
    if [ -n "$made_ctr" ]; then
        if [ $status -ne 0 ]; then
            echo "--- podman logs $name (tail)"
            podman logs "$name" 2>&1 | tail -n 40
        fi
        podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
    fi
    [ -z "$made_image" ] || podman rmi -f "$image" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

step "build the image $image from $(basename "$deb") (deploy/container/build.sh)"
made_image=1
sh deploy/container/build.sh "$deb" "$image"
user=$(podman image inspect --format '{{.Config.User}}' "$image")
echo "image: User $user, Entrypoint $(podman image inspect --format '{{.Config.Entrypoint}} Cmd {{.Config.Cmd}} StopSignal {{.Config.StopSignal}} WorkingDir {{.Config.WorkingDir}}' "$image")"
case $user in
    [1-9]*:[1-9]*) ;;
    *) fail "the image's user is '$user', not a non-root uid:gid" ;;
esac

# runc, and limits within this shell's hard ones (the test's own, as /proc shows them): crun needs cgroup v2 only (the test machine may
# have a hybrid hierarchy), and podman's own defaults for RLIMIT_NOFILE and RLIMIT_NPROC are above
# what a runtime without CAP_SYS_RESOURCE may set. nproc counts the gateway's user's processes:
# the test needs a few.
nofile=$(awk '/^Max open files/ { print $5 }' /proc/self/limits)
if [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; then nofile=65536; fi
nproc=$(awk '/^Max processes/ { print $4 }' /proc/self/limits)
if [ "$nproc" = unlimited ] || [ "$nproc" -gt 4096 ]; then nproc=4096; fi

step "podman's defaults refuse the example server's box; the options container/README.md names"
# The image's file boxes its example server (sandbox = on). Under podman's defaults the gateway
# does not start and says why (the masked /proc); container/README.md's two options give the box
# what it needs and nothing else of the host.
sh deploy/container/box-seccomp.sh >"$work/box-seccomp.json"
made_ctr=1
podman --runtime runc run --name "$name" --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" \
    "$image" >"$work/defaults.log" 2>&1 && fail "the image started under podman's defaults: $(tail -n 5 "$work/defaults.log")"
grep -F "the kernel refuses the box: mounting /proc (its PID namespace's): Operation not permitted" "$work/defaults.log" \
    || fail "under podman's defaults, not the masked /proc's refusal: $(tail -n 5 "$work/defaults.log")"
podman rm "$name" >/dev/null
made_ctr=""
echo "under podman's defaults: $(grep -o "the kernel refuses the box: mounting /proc[^(]*" "$work/defaults.log" | head -n 1)"

step "podman run: the port published on 127.0.0.1, a bearer token mounted over /etc/mcp-gateway/tokens"
token=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
printf 'sha256:%s ci\n' "$(printf %s "$token" | sha256sum | cut -d' ' -f1)" >"$work/tokens"
chmod 0644 "$work/tokens"
made_ctr=1
podman --runtime runc run -d --name "$name" --security-opt "seccomp=$work/box-seccomp.json" \
    --security-opt 'unmask=/proc/*' --ulimit "nofile=$nofile:$nofile" \
    --ulimit "nproc=$nproc:$nproc" -p 127.0.0.1::8080 -v "$work/tokens:/etc/mcp-gateway/tokens:ro" \
    "$image" >/dev/null
hostport=$(podman port "$name" 8080/tcp | head -n 1)
case $hostport in
    127.0.0.1:[0-9]*) ;;
    *) fail "podman port gave '$hostport'" ;;
esac
base=http://$hostport
echo "container $name: 8080/tcp published on $hostport (nofile $nofile, nproc $nproc)"

step "GET $base/readyz until 200 (deadline 30 s)"
deadline=$(($(date +%s) + 30))
until curl -fsS -m 2 -o "$work/ready" "$base/readyz" 2>/dev/null; do
    [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] \
        || fail "the container exited at start: $(podman logs "$name" 2>&1 | tail -n 20)"
    [ "$(date +%s)" -lt "$deadline" ] || fail "/readyz did not answer 200 within 30 s"
    sleep 0.1
done
echo "/readyz: $(cat "$work/ready")"
podman logs "$name" 2>&1 | grep 'listening on 0.0.0.0:8080' || fail "no 'listening on' line in podman logs"
podman logs "$name" 2>&1 | grep '\[server:example\] sandbox: namespaces user, mount, pid, ipc, uts' \
    || fail "no sandbox: line for the example server in podman logs"

step "MCP: initialize and tools/call echo with the token; without it 401"
url=$base/mcp
# rpc OUT BODY [HEADER...]: one POST to the gateway in the container, the answer to OUT.
rpc() {
    out=$1 body=$2
    shift 2
    curl -sS -N -m 60 "$url" -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' "$@" -d "$body" -o "$out" -w '%{http_code}'
}
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"container-test","version":"1"}}}'
code=$(rpc /dev/null "$init")
[ "$code" = 401 ] || fail "initialize without a token got $code, not 401"
echo "no token: 401"
auth="Authorization: Bearer $token"
code=$(rpc "$work/init.out" "$init" -H "$auth" -D "$work/init.h")
[ "$code" = 200 ] || fail "initialize got $code: $(cat "$work/init.out")"
sid=$(sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: *\([^[:space:]]*\).*/\1/p' "$work/init.h")
[ -n "$sid" ] || fail "initialize gave no session id"
grep -q '"serverInfo":{"name":"mcp-example-server"' "$work/init.out" || fail "initialize: $(cat "$work/init.out")"
set -- -H "$auth" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-06-18'
code=$(rpc /dev/null '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$@")
[ "$code" = 202 ] || fail "notifications/initialized got $code"
code=$(rpc "$work/echo.out" \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the container"}}}' "$@")
[ "$code" = 200 ] && grep -q '"text":"hello from the container"' "$work/echo.out" \
    || fail "tools/call echo got $code: $(cat "$work/echo.out")"
echo "session $sid: tools/call echo answered $(grep -o '"content":\[[^]]*\]' "$work/echo.out")"

step "every process in the container runs as the image's user, without capabilities"
pid=$(podman inspect --format '{{.State.Pid}}' "$name")
[ -n "$pid" ] && [ "$pid" -gt 0 ] && [ -r "/proc/$pid/status" ] || fail "no pid for the container"
# Uid: and Gid: list the real, effective, saved and filesystem ids.
uids=$(awk '$1 == "Uid:" { print $2, $3, $4, $5 }' "/proc/$pid/status")
gids=$(awk '$1 == "Gid:" { print $2, $3, $4, $5 }' "/proc/$pid/status")
u=${user%:*} g=${user#*:}
[ "$uids" = "$u $u $u $u" ] && [ "$gids" = "$g $g $g $g" ] \
    || fail "pid 1 of the container (host pid $pid) has uids $uids, gids $gids; the image says $user"
capeff=$(awk '$1 == "CapEff:" { print $2 }' "/proc/$pid/status")
[ "$capeff" = 0000000000000000 ] || fail "pid 1 of the container has capabilities $capeff"
echo "host pid $pid ($(readlink "/proc/$pid/exe")): uids $uids, gids $gids, CapEff $capeff"
podman top "$name" huser user pid args | tee "$work/top"
awk 'NR > 1 && ($1 == "0" || $2 == "root")' "$work/top" | grep . && fail "a process in the container runs as root"
grep -q 'mcp-example-server' "$work/top" || fail "the session's child is not in podman top"
# The session's child is boxed: PID 1 of a PID namespace of its own, inside the container's.
kid=$(ps -o pid= --ppid "$pid" | tr -d ' ' | head -n 1)
[ -n "$kid" ] || fail "the gateway (host pid $pid) has no child"
nspid=$(sed -n 's/^NSpid:[[:space:]]*//p' "/proc/$kid/status")
case $nspid in
    *[[:space:]]*[[:space:]]1) ;;
    *) fail "the session's child (host pid $kid) is not PID 1 of a namespace inside the container's (NSpid $nspid)" ;;
esac
echo "the session's child: host pid $kid, NSpid $nspid (host, container, its box)"

step "podman stop with a call in flight: SIGTERM, the drain, exit 0 within the stop timeout"
# The slow call outlives the image's shutdown_drain_ms (5 s): it is answered "gateway shutting
# down". Its progress notifications show it under way before the stop.
rpc "$work/long.out" \
    '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{"steps":100000,"interval_ms":100},"_meta":{"progressToken":"p3"}}}' \
    "$@" >"$work/long.code" &
long=$!
i=0
until grep -q '"notifications/progress"' "$work/long.out" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 300 ] || fail "the slow call sent no progress within 30 s"
    sleep 0.1
done
echo "in flight: id 3 (100000 x 100 ms), progress under way"
# 10 s: podman's and docker's default; the image's drain and child ladder take at most 8 s.
bound=10
t0=$(date +%s%N)
podman stop -t "$bound" "$name" >/dev/null
ms=$((($(date +%s%N) - t0) / 1000000))
state=$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$name")
[ "$state" = "exited 0" ] || fail "after podman stop the container is '$state' (137: SIGKILL after $bound s)"
[ $ms -lt $((bound * 1000)) ] || fail "podman stop took $ms ms, the bound is $bound s"
echo "podman stop: exited 0 after $ms ms (bound $bound s)"
wait "$long" || fail "the slow call's curl failed: $(tail -c 300 "$work/long.out")"
grep -q '"error":{"code":-32603,"message":"session ended: gateway shutting down"}' "$work/long.out" \
    || fail "the slow call was not answered 'gateway shutting down': $(tail -c 300 "$work/long.out")"
echo "id 3 answered: $(grep -o '"error":{[^}]*}' "$work/long.out")"
podman logs "$name" >"$work/log" 2>&1
for line in 'SIGTERM: draining: no new sessions or requests; 1 requests in flight get up to 5000 ms' \
    'shutting down (shutdown_drain_ms passed' 'cancelled 3 reason=gateway shutting down' \
    'exited with status 0' 'info stopped'; do
    grep -F "$line" "$work/log" || fail "podman logs has no line with '$line'"
done

step "remove the container and the image"
podman rm "$name" >/dev/null
made_ctr=""
podman rmi "$image" >/dev/null
made_image=""
podman image exists "$image" && fail "$image is still there"
echo "removed $name and $image"
echo "($(($(date +%s) - step_t)) s)"
echo "container test passed in $(($(date +%s) - t_start)) s"
