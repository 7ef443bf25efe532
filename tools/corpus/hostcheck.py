"""Second opinion on the corpus: compile the kernels whose threads are independent (no shared
memory, barriers or warp operations) as host C++ with g++, run every thread of the launch one after
another, and compare with the JSON specs written by the generator.

This catches transcription slips between a kernel's C source and its Python ``expected`` function,
and checks the Fraction-based float32 helpers against the host's IEEE hardware and glibc (add, mul,
div, sqrt and fmaf in all four rounding modes via fesetround). It is not a GPU: where the host and
PTX differ by design (listed in KNOWN_HOST_DIFFERENCES) those elements are skipped, and canonical
NaN expectations accept any host NaN.

    python tools/corpus/hostcheck.py          # needs g++ with -mfma on an x86-64 host
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"

# every kernel without approximate instructions (those carry a tolerance and are left out)
HOST_KERNELS = """
dot vec_add saxpy square iota_scale copy_nc grid_stride char_short mixed_width int64_arith mulhi
int_divmod div_s64 int_edges bit_count bitfield byte_perm funnel_shift logic_ops shifts float_specials
add_ties mul_ties fma_ties div_rn sqrt_rn rounding_add_mul rounding_fma rounding_div_rcp round_to_int
float_to_int int_to_float saturate minmax_abs fcompare branch_nested switch_case early_return loop_break
collatz gcd prime_count device_call local_hist horner_nounroll matmul transpose_2d atomic_add_contention
atomic_minmax atomic_inc_dec atomic_cas atomic_exch histogram atomic_float_add atomic_bitwise layernorm
smem_reduce scan_hillis_steele scan_blelloch dyn_smem_reverse smem_transpose block_reduce_atomic
stencil_1d smem_histogram shfl_reduce shfl_broadcast shfl_scan_up shfl_xor_butterfly vote
syncwarp_exchange warp_reduce_2warps
""".split()


def _float_to_int_cast_column(spec: dict) -> set[tuple[str, int]]:
    """(int)x of a NaN or out-of-range float is undefined in C; x86 returns INT_MIN, PTX saturates."""
    skip = set()
    for k, v in enumerate(spec["args"][0]["data"]):
        if isinstance(v, str) or not (-2147483648.0 <= float(v) < 2147483648.0):
            skip.add(("si", 5 * k + 4))
    return skip


KNOWN_HOST_DIFFERENCES = {"float_to_int": _float_to_int_cast_column}

CTYPE = {"i8": "signed char", "u8": "unsigned char", "i16": "short", "u16": "unsigned short",
         "i32": "int", "u32": "unsigned int", "i64": "long long", "u64": "unsigned long long",
         "f32": "float", "f64": "double"}

SHIM = (Path(__file__).with_name("host_shim.h")).read_text(encoding="utf-8")


def _dims(v) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return v + [1] * (3 - len(v))


def _f32_bits(v) -> int:
    import numpy as np

    sys.path.insert(0, str(ROOT / "tools"))
    from corpus import f32 as F
    from corpus.spec import coerce_f32

    if isinstance(v, str):
        return F.bits(coerce_f32(v))
    return F.bits(np.float32(float(v)))


def _literal(t: str, v) -> str:
    if t == "f32":
        return f"bitsf(0x{_f32_bits(v):08x}u)"
    if t in ("i64",):
        return f"{int(v)}LL" if int(v) != -(1 << 63) else "(-9223372036854775807LL - 1)"
    if t == "u64":
        return f"{int(v)}ULL"
    if t == "i32" and int(v) == -(1 << 31):
        return "(-2147483647 - 1)"
    if t == "u32":
        return f"{int(v)}u"
    return str(int(v))


def _program(names: list[str]) -> str:
    parts = [SHIM]
    mains = []
    for name in names:
        spec = json.loads((KERNELS / f"{name}.json").read_text())
        src = (KERNELS / f"{name}.cu").read_text()
        src = src.replace('extern "C"', "")
        src = re.sub(r"extern\s+__shared__\s+(\w+)\s+(\w+)\[\];", r"static \1 \2[1024];", src)
        parts.append(f"namespace k_{name} {{\n{src}\n}}\n")
        lines = [f"  {{ // {name}"]
        call = []
        for a in spec["args"]:
            t = a["type"].rstrip("*")
            if a["type"].endswith("*"):
                vals = ", ".join(_literal(t, v) for v in a["data"])
                lines.append(f"    static {CTYPE[t]} {a['name']}_[] = {{{vals}}};")
                call.append(f"{a['name']}_")
            else:
                call.append(_literal(t, a["value"]))
        gx, gy, gz = _dims(spec["grid"])
        bx, by, bz = _dims(spec["block"])
        lines.append(f"    gridDim = {{{gx}u, {gy}u, {gz}u}}; blockDim = {{{bx}u, {by}u, {bz}u}};")
        lines.append(f"    g_block_threads = {bx * by * bz};")
        lines.append(f"    for (unsigned z = 0; z < {gz}; ++z) for (unsigned y = 0; y < {gy}; ++y)"
                     f" for (unsigned x = 0; x < {gx}; ++x) {{")
        lines.append("      blockIdx = {x, y, z}; std::vector<std::thread> threads;")
        lines.append(f"      for (unsigned tz = 0; tz < {bz}; ++tz) for (unsigned ty = 0; ty < {by}; ++ty)"
                     f" for (unsigned tx = 0; tx < {bx}; ++tx)")
        lines.append("        threads.emplace_back([=] { threadIdx = {tx, ty, tz}; "
                     f"k_{name}::{spec['kernel']}({', '.join(call)}); }});")
        lines.append("      for (auto& t : threads) t.join();")
        lines.append("    }")
        types = {a["name"]: a["type"].rstrip("*") for a in spec["args"]}
        sizes = {a["name"]: len(a["data"]) for a in spec["args"] if a["type"].endswith("*")}
        for o in spec["outputs"]:
            fn = "print_f32" if types[o] == "f32" else "print_int"
            lines.append(f'    {fn}("{name}", "{o}", {o}_, {sizes[o]});')
        lines.append("  }")
        mains.append("\n".join(lines))
    parts.append("int main() {\n" + "\n".join(mains) + "\n  return 0;\n}\n")
    return "\n".join(parts)


def run(names: list[str] | None = None) -> list[str]:
    """Mismatches as readable lines (empty when the host agrees with every spec)."""
    names = names or HOST_KERNELS
    cxx = shutil.which("g++")
    if cxx is None:
        raise RuntimeError("g++ not found")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "corpus_host.cpp"
        exe = Path(tmp) / "corpus_host"
        src.write_text(_program(names))
        subprocess.run([cxx, "-std=gnu++17", "-O2", "-pthread", "-mfma", "-ffp-contract=fast",
                        "-fwrapv", "-fno-strict-aliasing", "-w", str(src), "-o", str(exe)], check=True)
        out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    got: dict[tuple[str, str, int], str] = {}
    for line in out.splitlines():
        k, o, i, *vals = line.split()
        got[(k, o, int(i))] = vals
    problems = []
    for name in names:
        spec = json.loads((KERNELS / f"{name}.json").read_text())
        skip = KNOWN_HOST_DIFFERENCES.get(name, lambda s: set())(spec)
        types = {a["name"]: a["type"].rstrip("*") for a in spec["args"]}
        for o in spec["outputs"]:
            for i, e in enumerate(spec["expected"][o]):
                if (o, i) in skip:
                    continue
                vals = got[(name, o, i)]
                if types[o] == "f32":
                    h = int(vals[0][1:], 16)
                    want = _f32_bits(e)
                    host_nan = (h & 0x7F800000) == 0x7F800000 and h & 0x7FFFFF
                    if want == 0x7FFFFFFF and host_nan:
                        continue
                    if h != want:
                        problems.append(f"{name}.{o}[{i}]: host 0x{h:08x}, spec 0x{want:08x}")
                else:
                    signed, unsigned = int(vals[0]), int(vals[1])
                    if int(e) not in (signed, unsigned):
                        problems.append(f"{name}.{o}[{i}]: host {signed}, spec {e}")
    return problems


def main() -> int:
    problems = run(sys.argv[1:] or None)
    for p in problems:
        print(p)
    print(f"{len(problems)} mismatch(es) over {len(sys.argv[1:] or HOST_KERNELS)} kernels")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
