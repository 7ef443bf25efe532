#!/usr/bin/env bash
# The device checks (bench/device/device_checks.py): hwcheck on kernels/ and kernels/external/,
# the stock float32 forward of a 2B-shaped mount against the CPU runtime's traces, and KL on text.
# Never part of the tests. TF32 is off everywhere (NVIDIA_TF32_OVERRIDE=0 and torch's flags).
#
#   bench/device/run_device_checks.sh                      # on a machine with an NVIDIA GPU
#   bench/device/run_device_checks.sh --device cpu --small # dry run on a CPU (hidden-128 base)
#
# Writes device_checks.json and device_checks.log into $OUT when it is set (the device tool's
# output folder), else /tmp/qwengpu-device-checks-out. Work files (base, mount: ~25 GB, ~45 GB with
# --full) go to $QWENGPU_DEVICE_WORK or /tmp/qwengpu-device-checks, removed at the end (--keep).
# No network is used. Wheels in .whl/ (carried with the device tool's `carry: [".whl"]`) are
# installed into /tmp/site first: the H200 image has transformers 5.17, the repo pins 5.24.0:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 -d .whl transformers==5.24.0
set -euo pipefail
cd "$(dirname "$0")/../.."
py="${PYTHON:-python3}"
out_dir="${OUT:-/tmp/qwengpu-device-checks-out}"
mkdir -p "$out_dir"
if compgen -G ".whl/*.whl" > /dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
export NVIDIA_TF32_OVERRIDE=0
export PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
limit="${DEVICE_CHECKS_LIMIT_S:-480}"
set +e
timeout --signal=TERM --kill-after=10 "$limit" \
    "$py" bench/device/device_checks.py --out "$out_dir/device_checks.json" "$@" 2>&1 \
    | tee "$out_dir/device_checks.log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" = 124 ]; then
    echo "device checks: killed at the ${limit} s limit (see $out_dir/device_checks.log)" >&2
fi
exit "$rc"
