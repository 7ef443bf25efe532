#!/usr/bin/env bash
# The device checks (bench/device/device_checks.py): hwcheck on kernels/ and kernels/external/,
# the stock float32 forward of a 2B-shaped mount against the CPU runtime's traces, and KL on text.
# Never part of the tests. TF32 is off everywhere (NVIDIA_TF32_OVERRIDE=0 and torch's flags).
#
#   bench/device/run_device_checks.sh                      # on a machine with an NVIDIA GPU
#   bench/device/run_device_checks.sh --device cpu --small # dry run on a CPU (hidden-128 base)
#
# Writes $OUT/device_checks.json and $OUT/device_checks.log when $OUT is set (the device tool's
# output folder), else bench/device/out/. Work files (base, mount: ~40 GB for the 2B run) go to
# $QWENGPU_DEVICE_WORK or /tmp/qwengpu-device-checks and are removed at the end (--keep keeps them).
# Needs: the repository installed with its dev and hw extras (no network is used).
set -euo pipefail
cd "$(dirname "$0")/../.."
out_dir="${OUT:-bench/device/out}"
mkdir -p "$out_dir"
export NVIDIA_TF32_OVERRIDE=0
export PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
limit="${DEVICE_CHECKS_LIMIT_S:-480}"
set +e
timeout --signal=TERM --kill-after=10 "$limit" \
    python bench/device/device_checks.py --out "$out_dir/device_checks.json" "$@" 2>&1 \
    | tee "$out_dir/device_checks.log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" = 124 ]; then
    echo "device checks: killed at the ${limit} s limit (see $out_dir/device_checks.log)" >&2
fi
exit "$rc"
