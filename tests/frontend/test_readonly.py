"""The read-only proof (``ptx.readonly``): what it finds on the corpus, and that it is sound there."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwengpu.cuda import COMPILE_OPTIONS, compile_cuda, compile_file
from qwengpu.ptx.inline import inline_calls
from qwengpu.ptx.parser import parse_ptx
from qwengpu.ptx.readonly import read_only_args, stored_params
from qwengpu.simt.interp import Interpreter, _find_kernel
from qwengpu.spec import bind, default_spec_path, load_spec

ROOT = Path(__file__).resolve().parents[2]
KERNELS = sorted((ROOT / "kernels").glob("*.cu")) + sorted((ROOT / "kernels" / "external").glob("*.cu"))


def _kernel(src: str):
    module = parse_ptx(compile_cuda(src, options=COMPILE_OPTIONS))
    fn = next(iter(module.kernels.values()))
    return inline_calls(module, fn)


def test_inputs_of_a_vector_add_are_read_only_and_the_output_is_not():
    fn = _kernel("""extern "C" __global__ void k(const float* a, const float* b, float* c, int n)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }""")
    assert stored_params(fn) == {2}


def test_an_index_loaded_from_memory_keeps_the_other_inputs_read_only():
    fn = _kernel("""extern "C" __global__ void k(const int* idx, const int* v, int* out)
    { int i = threadIdx.x; atomicAdd(&out[idx[i]], v[i]); }""")
    assert stored_params(fn) == {2}


def test_a_const_input_written_through_a_cast_is_writable():
    fn = _kernel("""extern "C" __global__ void k(const int* a, const int* b, long off)
    { int i = threadIdx.x; int* p = (int*)a + off; p[i] = b[i]; }""")
    written = stored_params(fn)
    assert written is not None and 0 in written and 1 not in written


def test_a_pointer_loaded_from_memory_makes_every_parameter_writable():
    fn = _kernel("""extern "C" __global__ void k(int** ptrs, const int* a)
    { int i = threadIdx.x; ptrs[0][i] = a[i]; }""")
    assert stored_params(fn) is None


def test_a_pointer_rebuilt_from_loaded_halves_makes_every_parameter_writable():
    """Two 32-bit loads joined by a shift and an ``or``: no 64-bit load and no packing ``mov``, but
    the address derives from no parameter, so it may be any of them."""
    fn = _kernel("""extern "C" __global__ void k(const unsigned* halves, const int* a)
    { int i = threadIdx.x;
      unsigned long long p = ((unsigned long long)halves[1] << 32) | halves[0];
      ((int*)p)[i] = a[i]; }""")
    assert stored_params(fn) is None


def test_a_store_into_a_module_variable_keeps_the_inputs_read_only():
    fn = _kernel("""__device__ int table[64];
    extern "C" __global__ void k(const int* a, int* out)
    { int i = threadIdx.x; table[i] = a[i]; out[i] = table[63 - i]; }""")
    assert stored_params(fn) == {1}


def test_a_store_through_a_select_between_parameters_makes_both_writable():
    fn = _kernel("""extern "C" __global__ void k(const int* a, int* b, int s)
    { int i = threadIdx.x; int* p = s ? (int*)a : b; p[i] = 7; }""")
    written = stored_params(fn)
    assert written is not None and {0, 1} <= written


@pytest.mark.parametrize("cu", KERNELS, ids=lambda p: p.stem)
def test_no_buffer_proven_read_only_changes_in_the_interpreter(cu):
    """Soundness on every corpus and external kernel: the launch leaves each buffer the proof calls
    read-only bit for bit as it was (and the proof finds some read-only input where one exists)."""
    spec = load_spec(default_spec_path(cu))
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS))
    fn = _find_kernel(module, spec.kernel)
    ro = read_only_args(spec, inline_calls(module, fn))
    if not ro:
        return
    interp = Interpreter(module, fn.name)
    bound = bind(spec, interp.fn)
    before = {name: bound.gmem.read(name) for name in ro}
    interp.launch(spec.grid, spec.block, bound.param_bytes, bound.gmem, dynamic_shared=spec.shared_bytes)
    for name in ro:
        after = bound.gmem.read(name)
        assert after == before[name], f"{cu.stem}: {name} changed"


def test_the_proof_finds_read_only_inputs_across_the_corpus():
    found = 0
    for cu in KERNELS:
        spec = load_spec(default_spec_path(cu))
        module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS))
        fn = _find_kernel(module, spec.kernel)
        found += bool(read_only_args(spec, inline_calls(module, fn)))
    assert found >= len(KERNELS) // 3, found
