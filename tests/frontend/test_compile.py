"""What users pass to the compiler: every -arch NVRTC knows, a clear refusal for the ones it does
not, and CUDA headers (cooperative groups) found without an include path."""

from __future__ import annotations

import pytest

from qwengpu.cuda import compile_cuda
from qwengpu.cuda.nvrtc import cuda_include_dirs, supported_archs
from qwengpu.errors import CompileError

SRC = 'extern "C" __global__ void k(int* o) { o[threadIdx.x] = threadIdx.x * warpSize; }\n'
SPEC = {"kernel": "k", "grid": 1, "block": 3, "args": [{"name": "o", "type": "i32*", "size": 3}]}


@pytest.mark.parametrize("arch", [f"compute_{a}" for a in supported_archs()] + ["sm_86", "compute_90a"])
def test_every_supported_arch_runs(compile_run, arch):
    assert compile_run(SRC, SPEC, arch=arch)["o"].tolist() == [0, 32, 64]


@pytest.mark.parametrize("arch", ["compute_50", "compute_61", "sm_70"])
def test_old_arch_is_refused_with_the_list(arch):
    with pytest.raises(CompileError, match=rf"cannot compile for {arch}: it targets compute_75, "):
        compile_cuda(SRC, filename="k.cu", arch=arch)


CG = r"""#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
extern "C" __global__ void cgr(const int* in, int* out) {
  cg::thread_block b = cg::this_thread_block();
  cg::thread_block_tile<32> t = cg::tiled_partition<32>(b);
  int v = in[b.thread_rank()];
  int s = cg::reduce(t, v, cg::plus<int>());
  b.sync();
  if (t.thread_rank() == 0) atomicAdd(out, s);
  out[1 + b.thread_rank()] = t.shfl_down(v, 1) + t.meta_group_rank();
}
"""


@pytest.mark.skipif(not cuda_include_dirs(), reason="no CUDA toolkit headers on this machine")
@pytest.mark.parametrize("arch", ["compute_75", "compute_80"])
def test_cooperative_groups_with_toolkit_headers(compile_run, arch):
    n = 64
    xs = [(k * 37) % 101 - 50 for k in range(n)]
    args = [{"name": "in", "type": "i32*", "data": xs}, {"name": "out", "type": "i32*", "size": n + 1}]
    spec = {"kernel": "cgr", "grid": 1, "block": n, "args": args}
    out = compile_run(CG, spec, arch=arch)["out"].tolist()
    shifted = [(xs[i + 1] if i % 32 != 31 else xs[i]) + i // 32 for i in range(n)]
    assert out == [sum(xs), *shifted]
