"""Opcode-form census of PTX text (same conventions as shared/reference/ptx-opcode-census-sm75.txt)."""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"%(?:tid|ntid|ctaid|nctaid|laneid|warpid|SPL|SP|clock|lanemask_\w+)(?:\.[xyz])?\b")
_DIRECTIVE_SKIP = {".visible", ".entry", ".func", ".extern", ".weak"}


def _strip_comments(ptx: str) -> str:
    ptx = re.sub(r"/\*.*?\*/", "", ptx, flags=re.S)
    return re.sub(r"//[^\n]*", "", ptx)


def instructions(ptx: str) -> list[str]:
    """Instruction forms in order of appearance, e.g. ``add.s32``, ``@p bra``, ``ld.global.nc.f32``."""
    text = _strip_comments(ptx)
    out = []
    depth = 0
    body = []
    for ch_line in text.splitlines():
        line = ch_line.strip()
        before = depth
        depth += line.count("{") - line.count("}")
        if before > 0 or depth > 0:
            body.append(line)
    joined = "\n".join(body)
    joined = re.sub(r"^\s*\$?[\w$]+:", "", joined, flags=re.M)  # labels
    for stmt in joined.split(";"):
        stmt = stmt.lstrip("{} \t\r\n").strip()
        if not stmt or stmt.startswith("."):
            continue
        guard = ""
        if stmt.startswith("@"):
            guard, _, stmt = stmt.partition(" ")
            stmt = stmt.strip()
        op = stmt.split()[0] if stmt.split() else ""
        if not op or op.startswith("."):
            continue
        out.append("@p " + op if guard and op.startswith("bra") else op)
    return out


def special_registers(ptx: str) -> set[str]:
    return set(m.group(0) for m in _SPECIAL.finditer(_strip_comments(ptx)))


def directives(ptx: str) -> set[str]:
    found = set()
    for m in re.finditer(r"(\.(?:param|reg|local|shared|global|const)\s+(?:\.align\s+)?\.?\w*|\.pragma)",
                         _strip_comments(ptx)):
        found.add(re.sub(r"\s+", " ", m.group(1)))
    return found


def census_forms(path: str) -> list[str]:
    """The full forms listed in the census file."""
    forms = []
    in_full = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("# full forms"):
            in_full = True
            continue
        if in_full:
            if line.startswith("#"):
                break
            parts = line.split()
            if len(parts) >= 3 and parts[0].isdigit():
                forms.append(" ".join(parts[2:]))
    return forms


def census_special_registers(path: str) -> list[str]:
    for line in open(path, encoding="utf-8"):
        if line.startswith("%tid"):
            return [p.split(":")[0] for p in line.split(", ")]
    return []
