"""Compare the interpreter with a real NVIDIA GPU, bit for bit, over a folder of kernels.

For users who have a GPU: the same PTX the interpreter runs is JIT-loaded through the CUDA
driver API (``cuda-bindings``, the ``hw`` extra), launched with the same spec, and every output
bit is compared with the interpreter's. Kernels flagged approximate are reported separately,
since their hardware bits are not public. Without a GPU or driver it says so and exits 12
(``ExitCode.NO_GPU``).
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import numpy as np

from qwengpu.cuda import DEFAULT_ARCH, compile_file
from qwengpu.errors import ExitCode, QwenGPUError
from qwengpu.ptx.parser import parse_ptx
from qwengpu.runner import COMPILE_OPTIONS, corpus, run_kernel
from qwengpu.simt.interp import _find_kernel
from qwengpu.spec import ELEM_TYPES, _bits, bind, load_spec

NO_GPU_EXIT = ExitCode.NO_GPU


class NoGPU(QwenGPUError):
    exit_code = NO_GPU_EXIT


def _driver():
    """Import the driver API and create a context; raise NoGPU with the reason otherwise."""
    try:
        from cuda.bindings import driver as cu  # type: ignore[import-not-found]
    except ImportError:
        raise NoGPU(
            "hwcheck needs the CUDA driver API bindings: pip install 'qwengpu[hw]' (cuda-bindings) "
            "on a machine with an NVIDIA GPU and driver"
        ) from None
    try:
        (err,) = cu.cuInit(0)
    except Exception as exc:  # libcuda.so missing raises inside the bindings
        raise NoGPU(f"no NVIDIA driver found (libcuda could not be loaded: {exc})") from None
    if int(err) != 0:
        raise NoGPU(f"no usable NVIDIA GPU/driver: cuInit failed with {err}")
    err, count = cu.cuDeviceGetCount()
    if int(err) != 0 or count == 0:
        raise NoGPU("no NVIDIA GPU present (cuDeviceGetCount returned 0)")
    err, dev = cu.cuDeviceGet(0)
    _ok(cu, err, "cuDeviceGet")
    err, name = cu.cuDeviceGetName(128, dev)
    err, major = cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev
    )
    err, minor = cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev
    )
    err, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    _ok(cu, err, "cuDevicePrimaryCtxRetain")
    (err,) = cu.cuCtxSetCurrent(ctx)
    _ok(cu, err, "cuCtxSetCurrent")
    label = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
    return cu, f"{label} (sm_{major}{minor})", (major, minor)


def _ok(cu, err, what: str) -> None:
    if int(err) != 0:
        _, msg = cu.cuGetErrorString(err)
        raise QwenGPUError(f"{what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")


def run_on_gpu(cu, cu_path: Path, spec_path: Path, arch: str) -> dict[str, np.ndarray]:
    """Launch one kernel on the GPU; return its output buffers."""
    spec = load_spec(spec_path)
    ptx = compile_file(cu_path, arch=arch, options=COMPILE_OPTIONS)
    module = parse_ptx(ptx)
    fn = _find_kernel(module, spec.kernel)
    bind(spec, fn)  # validates values exactly as the interpreter does
    err, mod = cu.cuModuleLoadData(ptx.encode() + b"\0")
    _ok(cu, err, f"loading PTX of {cu_path.name}")
    devptrs: dict[str, int] = {}
    try:
        err, func = cu.cuModuleGetFunction(mod, fn.name.encode())
        _ok(cu, err, "cuModuleGetFunction")
        holders = []
        for a, p in zip(spec.args, fn.params, strict=True):
            if a.is_ptr:
                data = np.ascontiguousarray(a.data)
                nbytes = max(data.nbytes, 4)
                err, dptr = cu.cuMemAlloc(nbytes)
                _ok(cu, err, "cuMemAlloc")
                devptrs[a.name] = int(dptr)
                if data.nbytes:
                    (err,) = cu.cuMemcpyHtoD(dptr, data.ctypes.data, data.nbytes)
                    _ok(cu, err, "cuMemcpyHtoD")
                holders.append(ctypes.c_uint64(int(dptr)))
            else:
                raw = np.ascontiguousarray(a.value).tobytes()
                size = p.size
                if len(raw) < size:
                    raw = (int(a.value) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
                holders.append((ctypes.c_ubyte * size).from_buffer_copy(raw[:size]))
        ptrs = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
        (err,) = cu.cuLaunchKernel(
            func, *spec.grid, *spec.block, spec.shared_bytes, 0, ctypes.addressof(ptrs), 0
        )
        _ok(cu, err, f"launching {spec.kernel}")
        (err,) = cu.cuCtxSynchronize()
        _ok(cu, err, f"running {spec.kernel}")
        out = {}
        for name in spec.outputs:
            a = spec.arg(name)
            host = np.zeros(len(a.data), dtype=ELEM_TYPES[a.elem])
            if host.nbytes:
                (err,) = cu.cuMemcpyDtoH(host.ctypes.data, devptrs[name], host.nbytes)
                _ok(cu, err, "cuMemcpyDtoH")
            out[name] = host
        return out
    finally:
        for d in devptrs.values():
            cu.cuMemFree(d)
        cu.cuModuleUnload(mod)


def hwcheck(
    dirpath: str, *, pattern: str | None = None, as_json: bool = False, arch: str | None = None
) -> int:
    """Run every kernel of ``dirpath`` on the interpreter and the GPU; exit 1 on any bit difference."""
    cu, gpu, (major, minor) = _driver()
    arch = arch or DEFAULT_ARCH
    items = corpus(dirpath)
    if pattern:
        items = [(c, j) for c, j in items if pattern in c.name]
    rows = []
    for cu_path, spec_path in items:
        try:
            ref = run_kernel(cu_path, spec_path, engine="interp", arch=arch)
            hw = run_on_gpu(cu, cu_path, spec_path, arch)
            diffs = []
            for name, arr in ref.outputs.items():
                bad = np.nonzero(_bits(arr) != _bits(hw[name]))[0]
                for i in bad[:3]:
                    diffs.append(f"{name}[{i}]: interp {arr[i]!r} vs gpu {hw[name][i]!r}")
            if not diffs:
                status = "match"
            else:
                status = "approx-diff" if ref.approximate else "DIFF"
            rows.append({"kernel": cu_path.stem, "status": status, "detail": "; ".join(diffs)})
        except QwenGPUError as exc:
            rows.append({"kernel": cu_path.stem, "status": "ERROR", "detail": str(exc).splitlines()[0]})
        if not as_json:
            r = rows[-1]
            print(f"{r['status']:11s} {r['kernel']:28s} {r['detail']}", flush=True)
    nmatch = sum(r["status"] == "match" for r in rows)
    ndiff = sum(r["status"] in ("DIFF", "ERROR") for r in rows)
    if as_json:
        print(json.dumps({"gpu": gpu, "arch": arch, "matched": nmatch, "total": len(rows), "results": rows}))
    else:
        print(
            f"\n{gpu}: {nmatch}/{len(rows)} kernels bit-identical to the interpreter"
            f" ({ndiff} differ or failed, {len(rows) - nmatch - ndiff} approximate-only differences)",
            file=sys.stdout,
        )
    return int(ExitCode.MISMATCH) if ndiff else int(ExitCode.OK)
