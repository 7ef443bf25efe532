"""What the model is told: the ``run_cuda`` tool and a system prompt with the machine's real limits.

The tool goes through the base's own chat template (``apply_chat_template(tools=...)``), so a real
Qwen3.5 sees it in the format it was trained on; the system prompt adds what no template knows:
NVRTC's header-less dialect, the machine's limits and the launch-spec format.
"""

from __future__ import annotations

TOOL_NAME = "run_cuda"

RUN_CUDA_TOOL: dict = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Compile a CUDA C++ kernel and run it exactly on the GPU inside this model. "
            "Returns the output buffers' values, or the compiler's / launcher's error message."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "source": {
                    "type": "string",
                    "description": 'CUDA source: one or more extern "C" __global__ kernels, no #include.',
                },
                "launch": {
                    "type": "string",
                    "description": (
                        'Launch spec as JSON: {"kernel": NAME, "grid": G, "block": B, "args": '
                        '[{"name": ..., "type": "i32*", "data": [...]} | {"name": ..., "type": "i32", '
                        '"value": V}], "outputs": [NAME, ...]}'
                    ),
                },
            },
            "required": ["source", "launch"],
        },
    },
}


def machine_limits() -> dict[str, int]:
    """The limits of the machine in the weights (the same numbers ``qwengpu machine info`` prints)."""
    from qwengpu.isa.limits import LIMITS
    from qwengpu.machine.shape import MachineShape

    s = MachineShape()
    return {
        "threads_per_block": LIMITS.threads_per_block,
        "threads_with_barriers": s.threads,
        "blocks": s.blocks,
        "global_words": s.gmem_words,
        "registers": s.nregs,
        "program_rows": s.rom_rows,
    }


EXAMPLE_SOURCE = """extern "C" __global__ void vsum(const int *a, int n, int *out) {
    int i = threadIdx.x;
    if (i < n) atomicAdd(out, a[i]);
}"""

EXAMPLE_LAUNCH = (
    '{"kernel": "vsum", "grid": 1, "block": 4, "args": [{"name": "a", "type": "i32*", '
    '"data": [1, 2, 3, 4]}, {"name": "n", "type": "i32", "value": 4}, '
    '{"name": "out", "type": "i32*", "data": [0]}], "outputs": ["out"]}'
)


def system_prompt(gpu: bool = True) -> str:
    """The system message. With ``gpu=False`` (the ``--no-gpu`` comparison) it has no tool."""
    answer_rule = (
        'End your final answer with a line "Answer: VALUE" (for several values: '
        '"Answer: V1, V2, ..."), giving numbers in full, without rounding.'
    )
    if not gpu:
        return "You are a helpful assistant. Work the question out carefully.\n" + answer_rule
    lim = machine_limits()
    return f"""You are a helpful assistant with an exact GPU inside your own layers.
When a question needs exact computation (arithmetic on many digits, sums, products, counting,
sorting, number theory, bit tricks, float32 results), do not compute it in your head: call the
tool {TOOL_NAME} with a CUDA kernel that computes it, then answer from the values it returns.
For ordinary questions, answer directly.

The CUDA dialect (NVRTC, no headers):
- write kernels as extern "C" __global__ void NAME(...); no #include, no std::, no printf;
- built-ins such as threadIdx, blockIdx, blockDim, atomicAdd, atomicMin, __syncthreads,
  __shfl_down_sync, __popc, __clz, __brev, sqrtf, fminf work without headers;
- no sinf, cosf, logf, tanhf (refused by the machine); int, unsigned, float, long long work.

The machine's limits: at most {lim["threads_per_block"]} threads per block
({lim["threads_with_barriers"]} when the kernel calls __syncthreads), at most {lim["blocks"]} blocks,
{lim["global_words"]} 32-bit words of global memory for all buffers together, {lim["registers"]}
registers per thread, {lim["program_rows"]} machine instructions of program. Every warp instruction
costs the model about 100 tokens to execute (integer ones 10-30, float division, square roots and
transcendentals thousands): keep kernels small (a few threads, short loops, integer arithmetic where
it will do).

The launch spec (the "launch" argument) is JSON:
{{"kernel": NAME, "grid": G, "block": B,
 "args": [ {{"name": PARAM, "type": "i32*" | "u32*" | "f32*" | ..., "data": [values]}}  (a buffer)
         | {{"name": PARAM, "type": "i32" | "u32" | "f32" | ..., "value": V}}         (a scalar)
         | {{"name": PARAM, "type": "i32*", "size": N}} ],                             (zeroed)
 "outputs": [buffer names to read back]}}
The args follow the kernel's parameters in order, with the same names. Example:
source:
{EXAMPLE_SOURCE}
launch:
{EXAMPLE_LAUNCH}

If the tool returns an error, fix the kernel or the launch spec and call it again.
The GPU runs your program exactly, but it cannot tell whether the program computes what was
asked: check that it does. {answer_rule}"""
