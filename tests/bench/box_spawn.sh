#!/bin/sh
# The cost of the box around a child (src/README.md, section 6): N sequential initialize requests,
# each a new session and so a new child, through a gateway whose server is the example server
# unboxed (off), boxed by the gateway (on), boxed with sandbox_tcp_connect_ports = 443, 5432
# (ports: Landlock's TCP rules too), and boxed by Debian's bubblewrap as its command (bwrap, the
# same view made by bwrap 0.8.0). Prints each mode's median and 90th percentile round
# trip, and the gateway's own mean spawn time (mcpgw_spawn_duration_seconds: clone to exec).
#   sh tests/bench/box_spawn.sh [BUILD_DIR [N [PORT]]]      (default: build 300 18940)
set -eu
B=$(cd "${1:-build}" && pwd)
n=${2:-300}
port=${3:-18940}
EX=$B/tests/fixtures/mcp-example-server
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
for mode in off on ports bwrap; do
    ports=
    case $mode in
    off | on) cmd="$EX" box=$mode ;;
    ports) cmd="$EX" box=on ports='sandbox_tcp_connect_ports = 443, 5432' ;;
    bwrap)
        command -v bwrap >/dev/null || { echo "bwrap: not installed (apt-get install bubblewrap)"; continue; }
        cmd="bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts --unshare-net
  --die-with-parent --new-session --ro-bind /usr /usr --symlink usr/bin /bin
  --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin
  --ro-bind /etc /etc --proc /proc --dev /dev --tmpfs /tmp
  --ro-bind $B/tests/fixtures $B/tests/fixtures $EX" box=off ;;
    esac
    printf '[gateway]\nlisten = 127.0.0.1:%s\nmax_sessions = 100000\n[server:ex]\npath = /mcp\ncommand = %s\nsandbox = %s\n%s\n' \
        "$port" "$cmd" "$box" "$ports" >"$dir/gw.ini"
    "$B/src/mcp-gateway" --config "$dir/gw.ini" >"$dir/gw.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.05; done
    for _ in $(seq "$n"); do
        curl -s -o /dev/null -w '%{time_total}\n' -H 'Content-Type: application/json' \
            -H 'Accept: application/json, text/event-stream' \
            -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' \
            "http://127.0.0.1:$port/mcp"
    done | sort -n | awk -v m="$mode" '{a[NR]=$1} END {printf "%-5s initialize round trip: median %.2f ms, p90 %.2f ms (n=%d)\n", m, a[int(NR/2)+1]*1000, a[int(NR*0.9)]*1000, NR}'
    curl -s "http://127.0.0.1:$port/metrics" | awk '/^mcpgw_spawn_duration_seconds_sum/ {s+=$2} /^mcpgw_spawn_duration_seconds_count/ {c+=$2} END {if (c) printf "      spawn in the gateway (clone to exec): mean %.3f ms\n", s*1000/c}'
    kill "$pid"
    wait "$pid" 2>/dev/null || true
done
