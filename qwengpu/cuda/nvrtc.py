"""CUDA C++ -> PTX without a GPU: NVRTC from the pinned ``nvidia-cuda-nvrtc`` wheel via ctypes.

NVRTC needs only glibc, so every machine (CI included) can compile kernels. ``nvcc`` is used
instead when asked for (it must be on PATH). Output is cached by source hash and options, so
repeated runs do not pay the 30-70 ms compile.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from qwengpu.errors import CompileError

# every engine compiles with line info, so errors and traces name the CUDA file and line
COMPILE_OPTIONS = ("--generate-line-info",)
DEFAULT_ARCH = "compute_75"
_lib: ctypes.CDLL | None = None


def _find_libnvrtc() -> str:
    """Locate libnvrtc.so from the pinned wheel (``nvidia/cu13/lib``), then the system."""
    candidates: list[str] = []
    for base in sys.path:
        candidates += glob.glob(os.path.join(base, "nvidia", "cu*", "lib", "libnvrtc.so*"))
        candidates += glob.glob(os.path.join(base, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*"))
    candidates = [c for c in candidates if "builtins" not in c and "alt" not in os.path.basename(c)]
    if candidates:
        return sorted(candidates)[-1]
    return "libnvrtc.so"


def _load() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        path = _find_libnvrtc()
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            raise CompileError(
                f"cannot load NVRTC ({path}): {exc}. Install it with `pip install nvidia-cuda-nvrtc==13.5.37`"
            ) from None
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        _lib = lib
    return _lib


def nvrtc_version() -> tuple[int, int]:
    """The loaded NVRTC's (major, minor) version."""
    lib = _load()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def supported_archs() -> list[int]:
    """The compute capabilities (75, 80, ...) the loaded NVRTC can target."""
    lib = _load()
    n = ctypes.c_int()
    if lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)) != 0:
        return []
    arr = (ctypes.c_int * n.value)()
    lib.nvrtcGetSupportedArchs(arr)
    return list(arr)


def cuda_include_dirs() -> list[str]:
    """CUDA toolkit headers for NVRTC, which has no search path of its own: ``cuda_fp16.h``,
    ``cooperative_groups.h`` (and the CCCL headers it needs) from ``$CUDA_HOME``/``$CUDA_PATH``,
    else the newest ``/usr/local/cuda*``. Empty when no toolkit headers are installed."""
    roots = [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    roots += ["/usr/local/cuda"]
    versioned = glob.glob("/usr/local/cuda-*")
    roots += sorted(versioned, key=lambda p: [int(x) for x in re.findall(r"\d+", p)], reverse=True)
    for root in roots:
        inc = os.path.join(root, "include")
        if os.path.isfile(os.path.join(inc, "cuda_fp16.h")):
            dirs = [inc]
            if os.path.isdir(os.path.join(inc, "cccl")):
                dirs.append(os.path.join(inc, "cccl"))
            return dirs
    return []


def _check(lib: ctypes.CDLL, status: int, what: str) -> None:
    if status != 0:
        raise CompileError(f"NVRTC {what} failed: {lib.nvrtcGetErrorString(status).decode()}")


def _nvrtc_compile(source: str, filename: str, options: list[str]) -> str:
    lib = _load()
    prog = ctypes.c_void_p()
    _check(
        lib,
        lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), filename.encode(), 0, None, None),
        "nvrtcCreateProgram",
    )
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        status = lib.nvrtcCompileProgram(prog, len(options), opts)
        log_size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(log_size))
        log = ctypes.create_string_buffer(log_size.value)
        lib.nvrtcGetProgramLog(prog, log)
        log_text = log.value.decode(errors="replace").strip()
        if status != 0:
            raise CompileError(f"{filename}: CUDA compilation failed\n{log_text}")
        size = ctypes.c_size_t()
        _check(lib, lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        buf = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
        return buf.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _nvcc_compile(source: str, filename: str, options: list[str]) -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise CompileError("--nvcc was requested but no `nvcc` is on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / Path(filename).name
        if src.suffix != ".cu":
            src = src.with_suffix(".cu")
        src.write_text(source)
        out = Path(tmp) / "out.ptx"
        cmd = [nvcc, "--ptx", *options, "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            log = (proc.stderr + proc.stdout).replace(str(src), filename).strip()
            raise CompileError(f"{filename}: CUDA compilation failed (nvcc)\n{log}")
        return out.read_text()


def cache_dir() -> Path:
    """PTX cache folder: :func:`qwengpu.paths.cache_home` / ptx (``$QWENGPU_CACHE``, else
    ``$XDG_CACHE_HOME/qwengpu``, else ``~/.cache/qwengpu``)."""
    from qwengpu.paths import cache_home

    return cache_home() / "ptx"


def ptx_cache_usage() -> tuple[int, int]:
    """(files, bytes) of the PTX cache."""
    d = cache_dir()
    if not d.is_dir():
        return 0, 0
    files = [p for p in d.iterdir() if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def clear_ptx_cache() -> tuple[int, int]:
    """Remove every cached PTX file (the cache refills itself); returns (files, bytes) removed."""
    d = cache_dir()
    n = size = 0
    if not d.is_dir():
        return 0, 0
    for p in d.iterdir():
        if p.is_file() and p.suffix in (".ptx", ".tmp"):
            try:
                st = p.stat().st_size
                p.unlink()
            except OSError:
                continue
            n, size = n + 1, size + st
    return n, size


def compile_cuda(
    source: str,
    *,
    filename: str = "kernel.cu",
    arch: str = DEFAULT_ARCH,
    options: tuple[str, ...] = (),
    use_nvcc: bool = False,
    use_cache: bool = True,
) -> str:
    """Compile CUDA C++ source to PTX text (cached by source hash, arch, options and compiler).

    Raises ``CompileError`` carrying the compiler log (``file(line): error: ...``).
    """
    if not re.fullmatch(r"(compute|sm)_\d+[af]?", arch):
        raise CompileError(f"bad --arch {arch!r}: expected e.g. compute_75 or sm_86")
    if use_nvcc:
        opts = [f"-arch={arch}", *options]
        tool = "nvcc"
    else:
        major, minor = nvrtc_version()
        num = int(re.findall(r"\d+", arch)[0])
        archs = supported_archs()
        if archs and num not in archs:
            raise CompileError(
                f"NVRTC {major}.{minor} cannot compile for {arch}: it targets "
                f"{', '.join(f'compute_{a}' for a in archs)} (older GPUs need an older CUDA; "
                "`--nvcc` uses the nvcc on PATH)"
            )
        opts = [f"--gpu-architecture={arch}", *options]
        if "#include" in source and not any(o.startswith(("-I", "--include-path")) for o in options):
            opts += [f"--include-path={d}" for d in cuda_include_dirs()]  # NVRTC searches nowhere itself
        tool = f"nvrtc-{major}.{minor}"
    # the file name is part of the PTX (``.file``, made absolute by NVRTC, hence every CUDA line an
    # error names): key on the absolute name too
    key = hashlib.sha256("\0".join([tool, os.path.abspath(filename), source, *opts]).encode()).hexdigest()
    path = cache_dir() / f"{key}.ptx"
    if use_cache and path.is_file():
        return path.read_text()
    ptx = _nvcc_compile(source, filename, opts) if use_nvcc else _nvrtc_compile(source, filename, opts)
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                fh.write(ptx)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache is not an error
    return ptx


def compile_file(path: str | os.PathLike, **kwargs) -> str:
    """Compile a ``.cu`` file; errors name the file as the user gave it."""
    p = Path(path)
    try:
        source = p.read_text()
    except OSError as exc:
        raise CompileError(f"cannot read {p}: {exc.strerror}") from None
    return compile_cuda(source, filename=str(path), **kwargs)
