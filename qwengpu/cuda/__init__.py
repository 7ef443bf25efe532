"""CUDA source -> PTX (NVRTC via ctypes, or nvcc on request), with a PTX cache."""

from qwengpu.cuda.nvrtc import COMPILE_OPTIONS, DEFAULT_ARCH, compile_cuda, compile_file, nvrtc_version

__all__ = ["COMPILE_OPTIONS", "DEFAULT_ARCH", "compile_cuda", "compile_file", "nvrtc_version"]
