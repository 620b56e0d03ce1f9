#!/usr/bin/env bash
# Create the class's learners as system users for the hub (run as root):
#   sudo deploy/hub/add_learners.sh alice bob carol
# Each gets a home of their own with mode 0700 (no learner can read another's files), a login
# shell, membership of the group the hub lets in (KIT_HUB_GROUP, default kitlearners), and a
# random password, printed once as "name password" for the instructor to hand out.
# A name that already exists is left as it is (its password is not changed).
# Remove a learner and their files after the course: sudo userdel -r NAME
set -euo pipefail
GROUP="${KIT_HUB_GROUP:-kitlearners}"
[ "$(id -u)" -eq 0 ] || { echo "add_learners.sh: run as root (sudo)" >&2; exit 1; }
[ "$#" -gt 0 ] || { echo "usage: add_learners.sh NAME..." >&2; exit 2; }
getent group "$GROUP" >/dev/null || groupadd "$GROUP"
for name in "$@"; do
    if id "$name" >/dev/null 2>&1; then
        echo "$name: exists, left as it is" >&2
        continue
    fi
    useradd --create-home --shell /bin/bash --groups "$GROUP" "$name"
    chmod 0700 "$(getent passwd "$name" | cut -d: -f6)"
    pw="$(head -c 12 /dev/urandom | base64 | tr -d '/+=' | head -c 12)"
    echo "$name:$pw" | chpasswd
    echo "$name $pw"
done
