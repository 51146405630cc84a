#!/bin/sh
# Build etcd, kube-apiserver, kube-scheduler and kube-controller-manager from the pinned
# wrapper modules in this directory into ~/.cache/gpu-lab/bin (see README.md).
# Arguments are passed through: --components kube-apiserver,etcd --cache-dir DIR --force
set -eu
cd "$(dirname "$0")/.."
exec nice -n "${NICE:-10}" python3 -m gpu_lab.backends.local.buildcli "$@"
