"""Write ``questions.jsonl``: questions whose answers need exact computation, each with its true
answer computed here in plain Python (float32 results with NumPy's float32 arithmetic, which is
correctly rounded per operation) -- never by qwenGPU's interpreter or machine.

Run ``python bench/advanced/make_questions.py`` to rewrite the file, ``--check`` to verify it is
in sync (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "questions.jsonl"


def f32(x: float | np.float32) -> np.float32:
    return np.float32(x)


def f32_answer(x: np.float32) -> dict:
    """A float32 answer: its shortest round-trip decimal and its bits (scored by the bits)."""
    x = np.float32(x)
    return {"type": "f32", "answer": [str(x)], "bits": [f"0x{int(x.view(np.uint32)):08x}"]}


def ints(*vals: int) -> dict:
    return {"type": "int", "answer": [int(v) for v in vals]}


def is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


def collatz_steps(n: int) -> int:
    k = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        k += 1
    return k


def brev32(x: int) -> int:
    return int(f"{x:032b}"[::-1], 2)


def clz32(x: int) -> int:
    return 32 - x.bit_length()


def f32_seq_sum(vals: list[float]) -> np.float32:
    s = np.float32(0)
    for v in vals:
        s = np.float32(s + np.float32(v))
    return s


def f32_dot(a: list[float], b: list[float]) -> np.float32:
    """Left to right, one rounding per multiply and per add (no fused multiply-add)."""
    s = np.float32(0)
    for x, y in zip(a, b, strict=True):
        s = np.float32(s + np.float32(np.float32(x) * np.float32(y)))
    return s


def matmul(a: list[list[int]], b: list[list[int]]) -> list[int]:
    n, m, p = len(a), len(b), len(b[0])
    return [sum(a[i][k] * b[k][j] for k in range(m)) for i in range(n) for j in range(p)]


def questions() -> list[dict]:
    """Every question with its category and true answer."""
    q: list[dict] = []

    def add(qid: str, cat: str, text: str, ans: dict) -> None:
        q.append({"id": qid, "category": cat, "question": text, **ans})

    # integer arithmetic
    add("mul_big", "int", "What is 48271 * 69621 exactly?", ints(48271 * 69621))
    add(
        "sum_1_1000",
        "reduction",
        "What is the sum of the integers from 1 to 1000?",
        ints(sum(range(1, 1001))),
    )
    add(
        "sum_squares",
        "reduction",
        "What is the sum of the squares of the integers from 1 to 100?",
        ints(sum(k * k for k in range(1, 101))),
    )
    add("factorial_12", "int", "What is 12 factorial?", ints(math.factorial(12)))
    add("fib_40", "int", "What is the 40th Fibonacci number (F(1) = F(2) = 1)?", ints(_fib(40)))
    add("mod_mersenne", "number theory", "What is (2^31 - 1) mod 97?", ints((2**31 - 1) % 97))
    add("modpow", "number theory", "What is 7^222 mod 1009?", ints(pow(7, 222, 1009)))
    add(
        "gcd",
        "number theory",
        "What is the greatest common divisor of 123456 and 7890?",
        ints(math.gcd(123456, 7890)),
    )
    add(
        "lcm_1_20",
        "number theory",
        "What is the least common multiple of the integers 1 to 20?",
        ints(math.lcm(*range(1, 21))),
    )
    add(
        "primes_below_1000",
        "counting",
        "How many prime numbers are there below 1000?",
        ints(sum(is_prime(n) for n in range(1000))),
    )
    add(
        "prime_100th",
        "number theory",
        "What is the 100th prime number?",
        ints([n for n in range(2, 1000) if is_prime(n)][99]),
    )
    add(
        "divisors_720",
        "counting",
        "How many positive divisors does 720 have?",
        ints(sum(720 % d == 0 for d in range(1, 721))),
    )
    add(
        "sigma_496",
        "number theory",
        "What is the sum of all positive divisors of 496?",
        ints(sum(d for d in range(1, 497) if 496 % d == 0)),
    )
    add(
        "isqrt", "int", "What is the integer square root (floor) of 1000000007?", ints(math.isqrt(1000000007))
    )
    add(
        "collatz_27",
        "counting",
        "How many steps does the Collatz sequence starting at 27 take to reach 1?",
        ints(collatz_steps(27)),
    )
    add(
        "mult_3_5",
        "reduction",
        "What is the sum of all natural numbers below 1000 that are multiples of 3 or 5?",
        ints(sum(n for n in range(1000) if n % 3 == 0 or n % 5 == 0)),
    )
    add(
        "digit_sum",
        "int",
        "What is the sum of the decimal digits of 2^31?",
        ints(sum(int(c) for c in str(2**31))),
    )
    # bit manipulation
    add(
        "popcount",
        "bits",
        "How many 1 bits are in the 32-bit number 0xDEADBEEF?",
        ints(bin(0xDEADBEEF).count("1")),
    )
    add(
        "brev",
        "bits",
        "What is the 32-bit bit-reversal of 12345, as an unsigned decimal number?",
        ints(brev32(12345)),
    )
    add("clz", "bits", "How many leading zero bits does the 32-bit number 1000 have?", ints(clz32(1000)))
    add(
        "xor_1_100",
        "bits",
        "What is the bitwise XOR of all integers from 1 to 100?",
        ints(_xor_all(range(1, 101))),
    )
    add(
        "bits_0_255",
        "bits",
        "What is the total number of 1 bits in all integers from 0 to 255?",
        ints(sum(bin(n).count("1") for n in range(256))),
    )
    add(
        "rotl",
        "bits",
        "What is 0x12345678 rotated left by 8 bits (32-bit), as an unsigned decimal number?",
        ints(((0x12345678 << 8) | (0x12345678 >> 24)) & 0xFFFFFFFF),
    )
    # arrays: reductions, scans, counting, sorting
    arr = [5, 3, 9, 1, 7, 2, 8, 6]
    add("sort", "sorting", f"Sort the array {arr} in ascending order.", ints(*sorted(arr)))
    arr2 = [3, 1, 4, 1, 5, 9, 2, 6]
    add(
        "scan",
        "scan",
        f"What are the inclusive prefix sums of {arr2}?",
        ints(*[sum(arr2[: i + 1]) for i in range(len(arr2))]),
    )
    arr3 = [12, -7, 33, 0, -45, 18, 27, -3]
    add(
        "max_min",
        "reduction",
        f"What are the maximum and the minimum of {arr3} (in that order)?",
        ints(max(arr3), min(arr3)),
    )
    arr4 = [4, 8, 15, 16, 23, 42, 7, 9, 11, 30]
    add(
        "count_gt",
        "counting",
        f"How many elements of {arr4} are greater than 10?",
        ints(sum(x > 10 for x in arr4)),
    )
    perm = [3, 7, 1, 8, 2, 6, 4, 5]
    add(
        "inversions",
        "counting",
        f"How many inversions does the sequence {perm} have?",
        ints(sum(perm[i] > perm[j] for i in range(8) for j in range(i + 1, 8))),
    )
    a, b = [3, -1, 4, 1, -5, 9], [2, 6, -5, 3, 5, -8]
    add(
        "dot_int",
        "reduction",
        f"What is the dot product of {a} and {b}?",
        ints(sum(x * y for x, y in zip(a, b, strict=True))),
    )
    m1, m2 = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], [[9, 8, 7], [6, 5, 4], [3, 2, 1]]
    add(
        "matmul_3x3",
        "matrix",
        f"What is the matrix product {m1} x {m2}? Give the 9 entries row by row.",
        ints(*matmul(m1, m2)),
    )
    m3, m4 = [[2, -1], [0, 3]], [[4, 5], [-2, 7]]
    add(
        "matmul_2x2",
        "matrix",
        f"What is the matrix product {m3} x {m4}? Give the 4 entries row by row.",
        ints(*matmul(m3, m4)),
    )
    # float32
    add(
        "f32_tenth_x10",
        "float",
        "In float32 arithmetic, starting from 0, add 0.1f ten times. What is the "
        "float32 result (all significant digits)?",
        f32_answer(f32_seq_sum([0.1] * 10)),
    )
    add(
        "f32_sqrt2",
        "float",
        "What is sqrtf(2.0f), the correctly rounded float32 square root of 2?",
        f32_answer(np.sqrt(f32(2.0))),
    )
    add(
        "f32_third",
        "float",
        "What is 1.0f / 3.0f in float32 (all significant digits)?",
        f32_answer(f32(1.0) / f32(3.0)),
    )
    add(
        "f32_dot",
        "float",
        "In float32, what is the dot product of [1.5, 2.25, -0.5, 0.1] and [4, 0.5, 8, 3] "
        "(multiply, then add left to right)?",
        f32_answer(f32_dot([1.5, 2.25, -0.5, 0.1], [4, 0.5, 8, 3])),
    )
    add(
        "f32_square",
        "float",
        "What is 1.1f * 1.1f in float32 (all significant digits)?",
        f32_answer(f32(1.1) * f32(1.1)),
    )
    add(
        "f32_harmonic",
        "float",
        "In float32, what is 1/1 + 1/2 + ... + 1/10, each term 1.0f/k rounded to "
        "float32 and added left to right?",
        f32_answer(f32_seq_sum([f32(1.0) / f32(k) for k in range(1, 11)])),
    )
    add(
        "f32_mean",
        "float",
        "What is the float32 mean of [2.5, 3.75, 1.25, 8.5]?",
        f32_answer(f32_seq_sum([2.5, 3.75, 1.25, 8.5]) / f32(4)),
    )
    return q


def _fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def _xor_all(xs) -> int:
    r = 0
    for x in xs:
        r ^= x
    return r


def render() -> str:
    return "".join(json.dumps(x) + "\n" for x in questions())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if questions.jsonl is out of date")
    args = ap.parse_args()
    text = render()
    if args.check:
        ok = OUT.exists() and OUT.read_text() == text
        print("questions.jsonl is in sync" if ok else "questions.jsonl is out of date: rerun the generator")
        return 0 if ok else 1
    tmp = OUT.with_suffix(".jsonl.tmp")
    tmp.write_text(text)
    tmp.replace(OUT)
    print(f"wrote {OUT} ({len(questions())} questions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
