"""CUDA source -> PTX (NVRTC via ctypes, or nvcc on request), with a PTX cache."""

from qwengpu.cuda.nvrtc import DEFAULT_ARCH, compile_cuda, compile_file, nvrtc_version

__all__ = ["DEFAULT_ARCH", "compile_cuda", "compile_file", "nvrtc_version"]
