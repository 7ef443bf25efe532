"""Write ``reference_replies.json``: for every question of ``questions.jsonl``, the replies of an
ideal model -- one ``run_cuda`` call with a kernel written by hand for the question, then a final
answer ``Answer: {values}`` that the scripted replier fills with the values of the last tool
result (a perfect transcription of what the GPU computed).

Why: ``qwengpu eval bench/advanced --replies bench/advanced/reference_replies.json`` then measures
the set itself -- every question has a kernel that fits the machine and computes the true answer
(``program_right``), and how long each takes on an engine -- without any model. The true answers
stay in ``questions.jsonl`` (computed in plain Python by ``make_questions.py``); nothing here
knows them.

``python bench/advanced/make_reference_replies.py [--check]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "reference_replies.json"


def i32(name: str, v: int) -> dict:
    return {"name": name, "type": "i32", "value": v}


def u32(name: str, v: int) -> dict:
    return {"name": name, "type": "u32", "value": v}


def buf(name: str, data: list, t: str = "i32*") -> dict:
    return {"name": name, "type": t, "data": data}


def out(n: int = 1, t: str = "i32*") -> dict:
    return {"name": "out", "type": t, "data": [0] * n}


def one(kernel: str, source: str, args: list[dict], block: int = 1) -> tuple[str, dict]:
    return source, {"kernel": kernel, "grid": 1, "block": block, "args": args, "outputs": ["out"]}


G = 'extern "C" __global__ void'

KERNELS: dict[str, tuple[str, dict]] = {
    "mul_big": one(
        "k",
        f"{G} k(unsigned a, unsigned b, unsigned *out) {{ out[0] = a * b; }}",
        [u32("a", 48271), u32("b", 69621), out(1, "u32*")],
    ),
    "sum_1_1000": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int s = 0;
    for (int i = threadIdx.x + 1; i <= n; i += blockDim.x) s += i;
    atomicAdd(out, s);
}}""",
        [i32("n", 1000), out()],
        block=32,
    ),
    "sum_squares": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int s = 0;
    for (int i = threadIdx.x + 1; i <= n; i += blockDim.x) s += i * i;
    atomicAdd(out, s);
}}""",
        [i32("n", 100), out()],
        block=32,
    ),
    "factorial_12": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int f = 1;
    for (int i = 2; i <= n; i++) f *= i;
    out[0] = f;
}}""",
        [i32("n", 12), out()],
    ),
    "fib_40": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int a = 0, b = 1;
    for (int i = 0; i < n; i++) {{ int t = a + b; a = b; b = t; }}
    out[0] = a;
}}""",
        [i32("n", 40), out()],
    ),
    "mod_mersenne": one(
        "k",
        f"{G} k(unsigned m, unsigned *out) {{ out[0] = 2147483647u % m; }}",
        [u32("m", 97), out(1, "u32*")],
    ),
    "modpow": one(
        "k",
        f"""{G} k(unsigned b, unsigned e, unsigned m, unsigned *out) {{
    unsigned r = 1; b %= m;
    while (e) {{ if (e & 1) r = r * b % m; b = b * b % m; e >>= 1; }}
    out[0] = r;
}}""",
        [u32("b", 7), u32("e", 222), u32("m", 1009), out(1, "u32*")],
    ),
    "gcd": one(
        "k",
        f"""{G} k(int a, int b, int *out) {{
    while (b) {{ int t = a % b; a = b; b = t; }}
    out[0] = a;
}}""",
        [i32("a", 123456), i32("b", 7890), out()],
    ),
    "lcm_1_20": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int l = 1;
    for (int i = 2; i <= n; i++) {{
        int a = l, b = i;
        while (b) {{ int t = a % b; a = b; b = t; }}
        l = l / a * i;
    }}
    out[0] = l;
}}""",
        [i32("n", 20), out()],
    ),
    "primes_below_1000": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int c = 0;
    for (int x = threadIdx.x; x < n; x += blockDim.x) {{
        int p = x >= 2;
        for (int d = 2; d * d <= x && p; d++) if (x % d == 0) p = 0;
        c += p;
    }}
    atomicAdd(out, c);
}}""",
        [i32("n", 1000), out()],
        block=64,
    ),
    "prime_100th": one(
        "k",
        f"""{G} k(int want, int limit, int *flag, int *out) {{
    for (int x = threadIdx.x; x < limit; x += blockDim.x) {{
        int p = x >= 2;
        for (int d = 2; d * d <= x && p; d++) if (x % d == 0) p = 0;
        flag[x] = p;
    }}
    __syncthreads();
    if (threadIdx.x == 0) {{
        int c = 0, x = 0;
        while (c < want && x < limit) c += flag[x++];
        out[0] = c == want ? x - 1 : -1;
    }}
}}""",
        [i32("want", 100), i32("limit", 600), {"name": "flag", "type": "i32*", "size": 600}, out()],
        block=64,
    ),
    "divisors_720": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int c = 0;
    for (int d = threadIdx.x + 1; d <= n; d += blockDim.x) c += (n % d == 0);
    atomicAdd(out, c);
}}""",
        [i32("n", 720), out()],
        block=64,
    ),
    "sigma_496": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int s = 0;
    for (int d = threadIdx.x + 1; d <= n; d += blockDim.x) if (n % d == 0) s += d;
    atomicAdd(out, s);
}}""",
        [i32("n", 496), out()],
        block=64,
    ),
    "isqrt": one(
        "k",
        f"""{G} k(unsigned n, unsigned *out) {{
    unsigned lo = 0, hi = 65536;
    while (hi - lo > 1) {{ unsigned m = (lo + hi) / 2; if (m * m <= n) lo = m; else hi = m; }}
    out[0] = lo;
}}""",
        [u32("n", 1000000007), out(1, "u32*")],
    ),
    "collatz_27": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int k = 0;
    while (n != 1) {{ n = (n & 1) ? 3 * n + 1 : n / 2; k++; }}
    out[0] = k;
}}""",
        [i32("n", 27), out()],
    ),
    "mult_3_5": one(
        "k",
        f"""{G} k(int n, int *out) {{
    // residues mod 3 and 5 kept as counters: four divisions per thread instead of two per number
    int i = threadIdx.x, s = 0, r3 = i % 3, r5 = i % 5;
    int d3 = blockDim.x % 3, d5 = blockDim.x % 5;
    for (; i < n; i += blockDim.x) {{
        if (r3 == 0 || r5 == 0) s += i;
        r3 += d3; if (r3 >= 3) r3 -= 3;
        r5 += d5; if (r5 >= 5) r5 -= 5;
    }}
    atomicAdd(out, s);
}}""",
        [i32("n", 1000), out()],
        block=64,
    ),
    "digit_sum": one(
        "k",
        f"""{G} k(unsigned x, unsigned *out) {{
    unsigned s = 0;
    while (x) {{ s += x % 10; x /= 10; }}
    out[0] = s;
}}""",
        [u32("x", 2147483648), out(1, "u32*")],
    ),
    "popcount": one(
        "k", f"{G} k(unsigned x, int *out) {{ out[0] = __popc(x); }}", [u32("x", 0xDEADBEEF), out()]
    ),
    "brev": one(
        "k", f"{G} k(unsigned x, unsigned *out) {{ out[0] = __brev(x); }}", [u32("x", 12345), out(1, "u32*")]
    ),
    "clz": one("k", f"{G} k(unsigned x, int *out) {{ out[0] = __clz(x); }}", [u32("x", 1000), out()]),
    "xor_1_100": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int x = 0;
    for (int i = threadIdx.x + 1; i <= n; i += blockDim.x) x ^= i;
    atomicXor(out, x);
}}""",
        [i32("n", 100), out()],
        block=16,
    ),
    "bits_0_255": one(
        "k",
        f"""{G} k(int n, int *out) {{
    int c = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) c += __popc(i);
    atomicAdd(out, c);
}}""",
        [i32("n", 256), out()],
        block=64,
    ),
    "rotl": one(
        "k",
        f"{G} k(unsigned x, unsigned *out) {{ out[0] = (x << 8) | (x >> 24); }}",
        [u32("x", 0x12345678), out(1, "u32*")],
    ),
    "sort": one(
        "k",
        f"""{G} k(const int *a, int n, int *out) {{
    int i = threadIdx.x;
    if (i < n) {{
        int r = 0;
        for (int j = 0; j < n; j++) r += (a[j] < a[i]) || (a[j] == a[i] && j < i);
        out[r] = a[i];
    }}
}}""",
        [buf("a", [5, 3, 9, 1, 7, 2, 8, 6]), i32("n", 8), out(8)],
        block=8,
    ),
    "scan": one(
        "k",
        f"""{G} k(const int *a, int n, int *out) {{
    int i = threadIdx.x;
    if (i < n) {{ int s = 0; for (int j = 0; j <= i; j++) s += a[j]; out[i] = s; }}
}}""",
        [buf("a", [3, 1, 4, 1, 5, 9, 2, 6]), i32("n", 8), out(8)],
        block=8,
    ),
    "max_min": one(
        "k",
        f"""{G} k(const int *a, int n, int *out) {{
    int i = threadIdx.x;
    if (i < n) {{ atomicMax(&out[0], a[i]); atomicMin(&out[1], a[i]); }}
}}""",
        [
            buf("a", [12, -7, 33, 0, -45, 18, 27, -3]),
            i32("n", 8),
            {"name": "out", "type": "i32*", "data": [-2147483648, 2147483647]},
        ],
        block=8,
    ),
    "count_gt": one(
        "k",
        f"""{G} k(const int *a, int n, int t, int *out) {{
    int i = threadIdx.x;
    if (i < n && a[i] > t) atomicAdd(out, 1);
}}""",
        [buf("a", [4, 8, 15, 16, 23, 42, 7, 9, 11, 30]), i32("n", 10), i32("t", 10), out()],
        block=10,
    ),
    "inversions": one(
        "k",
        f"""{G} k(const int *a, int n, int *out) {{
    int i = threadIdx.x, c = 0;
    if (i < n) for (int j = i + 1; j < n; j++) c += a[i] > a[j];
    atomicAdd(out, c);
}}""",
        [buf("a", [3, 7, 1, 8, 2, 6, 4, 5]), i32("n", 8), out()],
        block=8,
    ),
    "dot_int": one(
        "k",
        f"""{G} k(const int *a, const int *b, int n, int *out) {{
    int i = threadIdx.x;
    if (i < n) atomicAdd(out, a[i] * b[i]);
}}""",
        [buf("a", [3, -1, 4, 1, -5, 9]), buf("b", [2, 6, -5, 3, 5, -8]), i32("n", 6), out()],
        block=8,
    ),
    "matmul_3x3": one(
        "k",
        f"""{G} k(const int *a, const int *b, int n, int *out) {{
    int t = threadIdx.x;
    if (t < n * n) {{
        int r = t / n, c = t % n, s = 0;
        for (int k = 0; k < n; k++) s += a[r * n + k] * b[k * n + c];
        out[t] = s;
    }}
}}""",
        [buf("a", [1, 2, 3, 4, 5, 6, 7, 8, 9]), buf("b", [9, 8, 7, 6, 5, 4, 3, 2, 1]), i32("n", 3), out(9)],
        block=9,
    ),
    "matmul_2x2": one(
        "k",
        f"""{G} k(const int *a, const int *b, int n, int *out) {{
    int t = threadIdx.x;
    if (t < n * n) {{
        int r = t / n, c = t % n, s = 0;
        for (int k = 0; k < n; k++) s += a[r * n + k] * b[k * n + c];
        out[t] = s;
    }}
}}""",
        [buf("a", [2, -1, 0, 3]), buf("b", [4, 5, -2, 7]), i32("n", 2), out(4)],
        block=4,
    ),
    "f32_tenth_x10": one(
        "k",
        f"""{G} k(float x, int n, float *out) {{
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x;
    out[0] = s;
}}""",
        [{"name": "x", "type": "f32", "value": 0.1}, i32("n", 10), out(1, "f32*")],
    ),
    "f32_sqrt2": one(
        "k",
        f"{G} k(float x, float *out) {{ out[0] = sqrtf(x); }}",
        [{"name": "x", "type": "f32", "value": 2.0}, out(1, "f32*")],
    ),
    "f32_third": one(
        "k",
        f"{G} k(float a, float b, float *out) {{ out[0] = a / b; }}",
        [
            {"name": "a", "type": "f32", "value": 1.0},
            {"name": "b", "type": "f32", "value": 3.0},
            out(1, "f32*"),
        ],
    ),
    "f32_dot": one(
        "k",
        f"""{G} k(const float *a, const float *b, int n, float *out) {{
    float s = 0.0f;  // one rounding per multiply and per add: no fused multiply-add
    for (int i = 0; i < n; i++) s = __fadd_rn(s, __fmul_rn(a[i], b[i]));
    out[0] = s;
}}""",
        [
            buf("a", [1.5, 2.25, -0.5, 0.1], "f32*"),
            buf("b", [4, 0.5, 8, 3], "f32*"),
            i32("n", 4),
            out(1, "f32*"),
        ],
    ),
    "f32_square": one(
        "k",
        f"{G} k(float x, float *out) {{ out[0] = x * x; }}",
        [{"name": "x", "type": "f32", "value": 1.1}, out(1, "f32*")],
    ),
    "f32_harmonic": one(
        "k",
        f"""{G} k(int n, float *out) {{
    float s = 0.0f;
    for (int k = 1; k <= n; k++) s += 1.0f / (float)k;
    out[0] = s;
}}""",
        [i32("n", 10), out(1, "f32*")],
    ),
    "f32_mean": one(
        "k",
        f"""{G} k(const float *a, int n, float *out) {{
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i];
    out[0] = s / (float)n;
}}""",
        [buf("a", [2.5, 3.75, 1.25, 8.5], "f32*"), i32("n", 4), out(1, "f32*")],
    ),
}


def call(source: str, spec: dict) -> str:
    return (
        f"I will compute this exactly on the GPU.\n<tool_call>\n<function=run_cuda>\n"
        f"<parameter=source>\n{source}\n</parameter>\n<parameter=launch>\n{json.dumps(spec)}\n"
        f"</parameter>\n</function>\n</tool_call>"
    )


def render() -> str:
    qs = [json.loads(x) for x in (HERE / "questions.jsonl").read_text().splitlines() if x.strip()]
    missing = [q["id"] for q in qs if q["id"] not in KERNELS]
    if missing:
        raise SystemExit(f"no reference kernel for {missing}")
    rep = {q["id"]: {"gpu": [call(*KERNELS[q["id"]]), "The GPU computed it.\nAnswer: {values}"]} for q in qs}
    return json.dumps(rep, indent=1) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if reference_replies.json is out of date")
    args = ap.parse_args()
    text = render()
    if args.check:
        ok = OUT.exists() and OUT.read_text() == text
        print("reference_replies.json is in sync" if ok else "reference_replies.json is out of date")
        return 0 if ok else 1
    tmp = OUT.with_suffix(".json.tmp")
    tmp.write_text(text)
    tmp.replace(OUT)
    print(f"wrote {OUT} ({len(KERNELS)} questions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
