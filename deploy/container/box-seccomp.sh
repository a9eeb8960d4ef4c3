#!/bin/sh
# Writes podman's default seccomp profile with one change, for a container whose gateway boxes its
# children ([server:NAME] sandbox = on, as the image's example server is):
#   sh deploy/container/box-seccomp.sh [PROFILE] >box-seccomp.json
#   podman run --security-opt seccomp=box-seccomp.json --security-opt 'unmask=/proc/*' ...
# PROFILE: podman's default, /usr/share/containers/seccomp.json (containers-common). The change:
# sethostname and setdomainname are allowed without CAP_SYS_ADMIN (the default answers EPERM).
# The kernel still asks CAP_SYS_ADMIN in the UTS namespace's own user namespace: a process of the
# container can name only a UTS namespace it made in a user namespace of its own (the box's),
# never the container's. Every other rule stays as it is. Needs python3 (its json module).
set -eu
profile=${1:-/usr/share/containers/seccomp.json}
[ -r "$profile" ] || {
    echo "usage: $0 [PROFILE]: $profile is not readable (podman's default seccomp profile)" >&2
    exit 2
}
python3 - "$profile" <<'PY'
import json
import sys

names = {"sethostname", "setdomainname"}
with open(sys.argv[1]) as f:
    profile = json.load(f)
rules = []
for rule in profile["syscalls"]:
    rest = [n for n in rule["names"] if n not in names]
    if len(rest) < len(rule["names"]):
        if not rest:
            continue
        rule = dict(rule, names=rest)
    rules.append(rule)
rules.append({"names": sorted(names), "action": "SCMP_ACT_ALLOW", "args": [], "comment": "mcp-gateway: the box names its own UTS namespace"})
profile["syscalls"] = rules
json.dump(profile, sys.stdout, indent=2)
sys.stdout.write("\n")
PY
