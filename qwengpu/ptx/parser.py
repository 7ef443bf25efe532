"""PTX text -> :mod:`qwengpu.ptx.ir`.

A two-stage parser: a scanner cuts the text into statements (``;``-terminated instructions and
directives, ``{``/``}``, labels, the line-terminated ``.loc``/``.file``, and whole ``.section``
blocks), then each statement is parsed into IR. It accepts everything NVRTC emits, with or
without line and debug information (``-lineinfo``, ``-G``): ``.loc`` with ``function_name`` and
``inlined_at`` (code inlined from a device function keeps that function's own CUDA line),
``.file`` with timestamps, DWARF ``.section`` blocks and ``@@DWARF`` lines (skipped; only
``.debug_str`` is read, for the names of inlined functions), ``.target ..., debug``. Anything
else is rejected with a ``PTXError`` naming the construct, the PTX line (as ``qwengpu ptx``
prints it) and the CUDA line when the PTX carries one.
"""

from __future__ import annotations

import os
import re
import struct

from qwengpu.errors import PTXError
from qwengpu.ptx.ir import (
    TYPE_SIZES,
    TYPES,
    Addr,
    Function,
    Imm,
    Instr,
    Label,
    Module,
    Neg,
    Operand,
    Pair,
    Param,
    Reg,
    Sink,
    SourceLoc,
    Special,
    Sym,
    Var,
    Vec,
    demangle_identifier,
)

# Every special register of the PTX ISA (chapter "Special Registers"): parsed as Special, so that
# one the interpreter does not model is refused by name instead of read as an undeclared register.
SPECIAL_BASES = {
    "tid", "ntid", "ctaid", "nctaid", "laneid", "warpid", "nwarpid", "smid", "nsmid", "gridid",
    "lanemask_eq", "lanemask_le", "lanemask_lt", "lanemask_ge", "lanemask_gt", "clock", "clock64",
    "clock_hi", "globaltimer", "globaltimer_lo", "globaltimer_hi", "warpsize", "dynamic_smem_size",
    "total_smem_size", "aggr_smem_size", "is_explicit_cluster", "clusterid", "nclusterid",
    "cluster_ctaid", "cluster_nctaid", "cluster_ctarank", "cluster_nctarank", "current_graph_exec",
    "reserved_smem_offset_begin", "reserved_smem_offset_end", "reserved_smem_offset_cap",
    "reserved_smem_offset_0", "reserved_smem_offset_1",
    *(f"pm{k}" for k in range(8)), *(f"pm{k}_64" for k in range(8)),
}  # fmt: skip
STATE_SPACES = {"global", "shared", "local", "const", "param", "tex"}
# PTX ISA "Predefined identifiers" that are constants: resolved to immediates by the parser.
PREDEFINED_CONSTANTS = {"WARP_SZ": 32}
_INT_RE = re.compile(r"^(-)?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]+|[0-9]+)[uU]?$")
_F32_RE = re.compile(r"^0[fF]([0-9a-fA-F]{8})$")
_F64_RE = re.compile(r"^0[dD]([0-9a-fA-F]{16})$")
_DEC_FLOAT_RE = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")
_IDENT_RE = re.compile(r"^[A-Za-z_$%][\w$.]*$")


class _Stmt:
    __slots__ = ("text", "line", "kind")

    def __init__(self, text: str, line: int, kind: str) -> None:
        self.text = text
        self.line = line
        self.kind = kind  # "stmt", "label", "open", "close", "loc", "file", "section"


def _strip_comments(text: str) -> str:
    """Remove // and /* */ comments, keeping newlines so line numbers stay right."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = text.find('"', i + 1)
            j = n - 1 if j < 0 else j
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _scan(text: str) -> list[_Stmt]:
    """Cut PTX into statements, each with the line it starts on."""
    lines = _strip_comments(text).split("\n")
    # .loc/.file are line-terminated: give them a ';' so one scanner handles everything
    for k, ln in enumerate(lines):
        s = ln.strip()
        if s.startswith("@@DWARF"):  # old-style debug lines (PTX ISA: @@dwarf dwarf-string)
            lines[k] = ""
        elif s.startswith((".loc", ".file", ".version", ".target", ".address_size")) and not s.endswith(";"):
            lines[k] = ln + ";"
    text = "\n".join(lines)
    stmts: list[_Stmt] = []
    buf: list[str] = []
    start_line = 1
    line = 1
    i, n = 0, len(text)

    def pending() -> str:
        return "".join(buf).strip()

    def flush() -> None:
        nonlocal buf
        s = pending()
        if s:
            kind = "stmt"
            if s.startswith(".loc") and s[4:5].isspace():
                kind = "loc"
            elif s.startswith(".file") and s[5:6].isspace():
                kind = "file"
            stmts.append(_Stmt(s, start_line, kind))
        buf = []

    while i < n:
        c = text[i]
        if not buf or not pending():
            if c.isspace():
                if c == "\n":
                    line += 1
                i += 1
                continue
            start_line = line
        if c == '"':
            j = text.find('"', i + 1)
            j = n - 1 if j < 0 else j
            buf.append(text[i : j + 1])
            i = j + 1
            continue
        if c == "\n":
            line += 1
            buf.append(" ")
        elif c == ";":
            flush()
        elif c == "{":
            p = pending()
            if p.startswith(".section"):
                # a debug section: keep its whole body (labels, .b8/.b32/.b64 data) as one statement
                depth, j = 1, i + 1
                while j < n and depth:
                    if text[j] == '"':
                        k = text.find('"', j + 1)
                        j = n if k < 0 else k + 1
                        continue
                    depth += {"{": 1, "}": -1}.get(text[j], 0)
                    j += 1
                chunk = text[i:j]
                stmts.append(_Stmt(f"{p} {chunk}", start_line, "section"))
                line += chunk.count("\n")
                buf = []
                i = j
                continue
            if p and not (p.startswith(".") and not p.endswith("=")):
                # a vector operand or an initializer: keep the braces inside the statement
                depth, j = 1, i + 1
                while j < n and depth:
                    depth += {"{": 1, "}": -1}.get(text[j], 0)
                    j += 1
                chunk = text[i:j]
                line += chunk.count("\n")
                buf.append(chunk.replace("\n", " "))
                i = j
                continue
            flush()
            stmts.append(_Stmt("{", line, "open"))
        elif c == "}":
            flush()
            stmts.append(_Stmt("}", line, "close"))
        elif c == ":" and re.fullmatch(r"[$A-Za-z_][\w$]*", pending()):
            stmts.append(_Stmt(pending(), start_line, "label"))
            buf = []
        else:
            buf.append(c)
        i += 1
    flush()
    return stmts


def _split_top(s: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside (), [] and {}."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    tail = "".join(cur).strip()
    if tail or parts:
        parts.append(tail)
    return parts


def parse_int(tok: str) -> int | None:
    m = _INT_RE.match(tok)
    if not m:
        return None
    neg, body = m.group(1), m.group(2)
    if body[:2] in ("0x", "0X"):
        v = int(body[2:], 16)
    elif body[:2] in ("0b", "0B"):
        v = int(body[2:], 2)
    elif len(body) > 1 and body[0] == "0":
        v = int(body, 8)
    else:
        v = int(body)
    return -v if neg else v


def parse_operand(tok: str) -> Operand:
    """Parse one operand token (raises ValueError on garbage)."""
    tok = tok.strip()
    if not tok:
        raise ValueError("empty operand")
    if tok == "_":
        return Sink()
    if tok.startswith("!"):
        inner = parse_operand(tok[1:])
        if not isinstance(inner, Reg):
            raise ValueError(f"cannot negate {tok!r}")
        return Neg(inner)
    if "|" in tok and not tok.startswith(("[", "{")):
        a, b = tok.split("|", 1)
        return Pair(parse_operand(a), parse_operand(b))
    if tok.startswith("["):
        if not tok.endswith("]"):
            raise ValueError(f"bad address {tok!r}")
        return _parse_addr(tok[1:-1].strip())
    if tok.startswith("{"):
        if not tok.endswith("}"):
            raise ValueError(f"bad vector {tok!r}")
        return Vec(tuple(parse_operand(t) for t in _split_top(tok[1:-1])))
    if tok.startswith("%"):
        base = tok[1:].split(".")[0]
        if base in SPECIAL_BASES or base.startswith("envreg"):
            return Special(tok[1:])
        return Reg(tok)
    m = _F32_RE.match(tok)
    if m:
        return Imm(int(m.group(1), 16), "f32")
    m = _F64_RE.match(tok)
    if m:
        return Imm(int(m.group(1), 16), "f64")
    v = parse_int(tok)
    if v is not None:
        return Imm(v, "int")
    if _DEC_FLOAT_RE.match(tok):
        return Imm(struct.unpack("<Q", struct.pack("<d", float(tok)))[0], "f64")
    if tok in PREDEFINED_CONSTANTS:  # WARP_SZ: a plain immediate for every consumer
        return Imm(PREDEFINED_CONSTANTS[tok], "int")
    if _IDENT_RE.match(tok):
        return Sym(tok)
    raise ValueError(f"cannot parse operand {tok!r}")


def _parse_addr(inner: str) -> Addr:
    inner = inner.replace(" ", "")
    m = re.fullmatch(r"([^+\-]+?)?(?:([+-])(-?\w+))?", inner)
    if not m or (m.group(1) is None and m.group(3) is None):
        # absolute address
        v = parse_int(inner)
        if v is None:
            raise ValueError(f"bad address [{inner}]")
        return Addr(None, v)
    base_tok, sign, off_tok = m.group(1), m.group(2), m.group(3)
    offset = 0
    if off_tok is not None:
        off = parse_int(off_tok)
        if off is None:
            raise ValueError(f"bad address offset in [{inner}]")
        offset = -off if sign == "-" else off
    if base_tok is None:
        return Addr(None, offset)
    iv = parse_int(base_tok)
    if iv is not None:
        return Addr(None, iv + offset)
    base = parse_operand(base_tok)
    if not isinstance(base, Reg | Sym):
        raise ValueError(f"bad address base in [{inner}]")
    return Addr(base, offset)


def _parse_decl_names(rest: str) -> list[tuple[str, list[int | None]]]:
    """Parse ``name[4][2], other`` into (name, dims)."""
    out = []
    for part in _split_top(rest):
        m = re.fullmatch(r"([%$\w.]+)((?:\[\s*\d*\s*\])*)", part.strip())
        if not m:
            raise ValueError(f"bad declarator {part!r}")
        dims = [int(d) if d.strip() else None for d in re.findall(r"\[\s*(\d*)\s*\]", m.group(2))]
        out.append((m.group(1), dims))
    return out


def _parse_var(text: str, line: int) -> list[Var]:
    """``[.extern] .shared .align 4 .b8 name[256] [= {...}]`` -> Var(s)."""
    init_text = None
    if "=" in text:
        text, init_text = text.split("=", 1)
    words = text.split()
    space = None
    align = 0
    vtype = None
    extern = False
    vec = 1
    i = 0
    while i < len(words) and words[i].startswith("."):
        w = words[i][1:]
        if w in STATE_SPACES:
            space = w
        elif w == "align":
            align = int(words[i + 1])
            i += 1
        elif w in TYPES:
            vtype = w
        elif w in ("extern",):
            extern = True
        elif w in ("v2", "v4", "v8"):
            vec = int(w[1:])
        elif w in ("visible", "weak", "common", "ptr", "global"):
            pass
        else:
            raise ValueError(f"unsupported variable attribute .{w}")
        i += 1
    if space is None or vtype is None:
        raise ValueError("variable declaration needs a state space and a type")
    names = _parse_decl_names(" ".join(words[i:]))
    out = []
    esize = TYPE_SIZES[vtype] * vec
    for name, dims in names:
        count = 1
        for d in dims:
            count *= 0 if d is None else d
        init = None
        if init_text is not None:
            init = _parse_init(init_text, vtype, count if dims else 1)
        out.append(
            Var(
                name,
                space,
                vtype,
                esize * count,
                align or esize,
                extern or (bool(dims) and dims[0] is None),
                init,
            )
        )
    return out


def _parse_init(text: str, vtype: str, count: int) -> bytes:
    vals = [v for v in re.split(r"[{},\s]+", text) if v]
    fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[TYPE_SIZES[vtype]]
    out = bytearray()
    for v in vals:
        if v.startswith("generic(") or _IDENT_RE.match(v) and not isinstance(parse_operand(v), Imm):
            raise ValueError(
                f"an initializer holding the address of {v!r} (a function pointer or a pointer to a "
                "variable) is not supported"
            )
        op = parse_operand(v)
        if not isinstance(op, Imm):
            raise ValueError(f"unsupported initializer {v!r}")
        val = op.value
        if op.kind == "f64" and vtype == "f32":
            val = struct.unpack("<I", struct.pack("<f", struct.unpack("<d", struct.pack("<Q", val))[0]))[0]
        out += struct.pack("<" + fmt, val & ((1 << (8 * TYPE_SIZES[vtype])) - 1))
    size = TYPE_SIZES[vtype] * count
    out += bytes(max(0, size - len(out)))
    return bytes(out[:size])


def _parse_params(text: str) -> list[Param]:
    params = []
    for part in _split_top(text):
        if not part:
            continue
        words = part.split()
        ptype = None
        align = 0
        ptr = False
        name = None
        i = 0
        while i < len(words):
            w = words[i]
            if w == ".param" or w == ".reg":
                pass
            elif w == ".align":
                align = int(words[i + 1])
                i += 1
            elif w == ".ptr":
                ptr = True
            elif w.startswith(".") and w[1:] in TYPES:
                ptype = w[1:]
            elif w.startswith(".") and w[1:] in STATE_SPACES:
                pass
            else:
                name = w
            i += 1
        if ptype is None or name is None:
            raise ValueError(f"bad parameter {part!r}")
        dims = _parse_decl_names(name)[0]
        n = 1
        for d in dims[1]:
            n *= d or 0
        params.append(Param(dims[0], ptype, TYPE_SIZES[ptype] * n, align, ptr))
    return params


_HEADER_RE = re.compile(
    r"^((?:\.(?:visible|extern|weak|entry|func)\s*)+)"
    r"(?:\((?P<ret>[^)]*)\)\s*)?(?P<name>[\w$]+)\s*(?:\((?P<params>.*?)\))?\s*(?P<tail>.*)$",
    re.S,
)


_LOC_RE = re.compile(r"\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_FN_NAME_RE = re.compile(r"\bfunction_name\s+([$\w.]+)")
_INLINED_RE = re.compile(r"\binlined_at\s+(\d+)\s+(\d+)\s+(\d+)")
_FILE_RE = re.compile(r"\.file\s+(\d+)\s+\"([^\"]*)\"(?:\s*,?\s*\"([^\"]*)\")?")


def _display_path(path: str) -> str:
    """NVRTC writes absolute paths into ``.file``: show them relative to the working directory."""
    if os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except ValueError:
            return path
        if not rel.startswith(".."):
            return rel
    return path


def _debug_strings(body: str) -> dict[str, str]:
    """``label: .b8 95,90,...,0`` entries of a ``.debug_str`` section -> {label: string}."""
    out: dict[str, str] = {}
    for m in re.finditer(r"([$\w]+)\s*:\s*((?:\.b8\s+[\d,\s]+)+)", body):
        data = bytes(int(x) & 0xFF for x in re.findall(r"\d+", re.sub(r"\.b8", " ", m.group(2))))
        out[m.group(1)] = data.split(b"\0", 1)[0].decode("utf-8", errors="replace")
    return out


def _parse_loc(t: str) -> SourceLoc | None:
    """``.loc 1 5 3[, function_name $L__info_string0][, inlined_at 1 9 7]`` (names resolved later)."""
    m = _LOC_RE.match(t)
    if not m:
        return None
    fn = _FN_NAME_RE.search(t)
    at = _INLINED_RE.search(t)
    inlined = SourceLoc(at.group(1), int(at.group(2)), int(at.group(3))) if at else None
    return SourceLoc(m.group(1), int(m.group(2)), int(m.group(3)), fn.group(1) if fn else "", inlined)


def _name_loc(loc: SourceLoc, files: dict[int, str], strings: dict[str, str]) -> SourceLoc:
    """Replace ``.file`` indices by file names and ``function_name`` labels by demangled names."""
    f = files.get(int(loc.file), loc.file) if loc.file.isdigit() else loc.file
    fn = loc.function
    if fn in strings:
        fn = demangle_identifier(strings[fn])
    at = _name_loc(loc.inlined_at, files, strings) if loc.inlined_at is not None else None
    return SourceLoc(f, loc.line, loc.col, fn, at)


def parse_ptx(text: str, *, source_name: str = "<ptx>") -> Module:
    """Parse PTX text into a :class:`Module`; raise ``PTXError`` naming the line on failure."""
    stmts = _scan(text)
    version, target, address_size = "", "", 64
    functions: dict[str, Function] = {}
    globals_: list[Var] = []
    # .file and the .debug_str section come after the code in NVRTC output: read them first so
    # every error (parse errors included) can name the CUDA file and line
    files: dict[int, str] = {}
    strings: dict[str, str] = {}
    for st in stmts:
        if st.kind == "file":
            m = _FILE_RE.match(st.text)
            if m:
                name = os.path.join(m.group(2), m.group(3)) if m.group(3) else m.group(2)
                files[int(m.group(1))] = _display_path(name)
        elif st.kind == "section" and st.text.split()[1:2] == [".debug_str"]:
            strings.update(_debug_strings(st.text))
    cur: Function | None = None
    depth = 0
    pending: Function | None = None
    declared: dict[str, Function] = {}  # declarations and .extern prototypes (no body)
    scopes: list[dict[str, str]] = []  # per open block: declared name -> its unique name
    loc: SourceLoc | None = None
    prev = ""

    def err(msg: str, line: int) -> PTXError:
        where = f"PTX line {line}"
        if cur is not None and loc is not None:
            where += f", {_name_loc(loc, files, strings)}"
        return PTXError(f"{source_name}: {where}: {msg}")

    for st in stmts:
        t = st.text
        try:
            if st.kind == "file":
                continue
            if st.kind == "loc":
                loc = _parse_loc(t)
                if loc is None:
                    raise err(f"cannot parse line-info directive `{t[:80]}`", st.line)
                continue
            if st.kind == "section":
                if cur is not None:
                    raise err(f"a `{' '.join(t.split()[:2])}` block inside function {cur.name}", st.line)
                continue  # DWARF data: nothing a launch needs (.debug_str was read above)
            if st.kind == "open":
                if cur is None:
                    if pending is None:
                        after = f" after `{prev[:60]}`" if prev else ""
                        raise err(
                            f"unexpected '{{' at module level{after}: a block that opens no function body",
                            st.line,
                        )
                    cur, pending = pending, None
                    depth = 1
                    scopes = [{}]
                else:
                    depth += 1
                    scopes.append({})
                continue
            if st.kind == "close":
                if cur is None:
                    raise err("unexpected '}' at module level (no block is open)", st.line)
                depth -= 1
                scopes.pop()
                if depth == 0:
                    functions[cur.name] = cur
                    cur = None
                continue
            if st.kind == "label":
                if cur is None:
                    raise err(f"label {t} outside a function", st.line)
                cur.labels[t] = len(cur.body)
                continue
            prev = t
            if cur is None:
                # module level
                if pending is not None:  # the header ended with ';': a declaration (recursion emits one)
                    declared.setdefault(pending.name, pending)
                    pending = None
                if t.startswith(".version"):
                    version = t.split()[1]
                elif t.startswith(".target"):
                    target = t.split(None, 1)[1].split(",")[0].strip()  # ", debug" etc.: options
                elif t.startswith(".address_size"):
                    address_size = int(t.split()[1])
                    if address_size != 64:
                        raise err(f".address_size {address_size} is not supported (only 64)", st.line)
                elif t.startswith(".pragma") or t.startswith(".section"):
                    pass
                elif re.match(r"^(\.(visible|extern|weak)\s+)*\.(entry|func)\b", t):
                    m = _HEADER_RE.match(t)
                    if not m:
                        raise err(f"cannot parse function header: {t[:80]}", st.line)
                    is_entry = ".entry" in m.group(1)
                    fn = Function(
                        m.group("name"),
                        is_entry,
                        _parse_params(m.group("params") or ""),
                        _parse_params(m.group("ret") or ""),
                        {},
                        [],
                        [],
                        {},
                        st.line,
                    )
                    for dm in re.finditer(
                        r"\.(maxntid|reqntid|minnctapersm|maxnreg|maxclusterrank|reqnctapercluster)"
                        r"\s+([\d,\s]+)",
                        m.group("tail") or "",
                    ):
                        fn.directives[dm.group(1)] = tuple(int(x) for x in re.findall(r"\d+", dm.group(2)))
                    pending = fn
                    if ".extern" in m.group(1):
                        pending = None  # prototype only: calls to it are refused (vprintf, malloc, ...)
                        declared.setdefault(fn.name, fn)
                elif re.match(r"^(\.(visible|extern|weak)\s+)*\.(global|shared|const)\b", t):
                    globals_.extend(_parse_var(t, st.line))
                else:
                    raise err(f"unsupported module-level statement `{t[:80]}`", st.line)
                continue
            # function body
            if t.startswith(".reg"):
                for name, rtype in _parse_reg_decl(t):
                    cur.regs[_scoped(cur, scopes, name)] = rtype
            elif re.match(r"^\.(local|shared|param|const|global)\b", t):
                for v in _parse_var(t, st.line):
                    v.name = _scoped(cur, scopes, v.name)
                    cur.vars.append(v)
            elif t.startswith(".pragma"):
                pass
            elif t.startswith(".callprototype"):
                pass  # the prototype of an indirect call; the call itself is refused by the inliner
            elif t.startswith("."):
                raise err(f"unsupported directive {t.split()[0]} in `{t[:80]}`", st.line)
            else:
                ins = _parse_instr(t, st.line, loc, files)
                if len(scopes) > 1 and any(scopes[1:]):
                    _apply_scopes(ins, scopes)
                _bare_registers(ins, cur.regs)
                cur.body.append(ins)
        except PTXError:
            raise
        except (ValueError, KeyError, IndexError) as exc:
            raise err(f"{exc} in `{t[:100]}`", st.line) from None
    if cur is not None:
        raise PTXError(f"{source_name}: unexpected end of PTX inside function {cur.name}")
    if pending is not None:
        declared.setdefault(pending.name, pending)
    for fn in functions.values():
        _resolve_labels(fn, source_name)
        for ins in fn.body:
            if ins.loc is not None:
                ins.loc = _name_loc(ins.loc, files, strings)
    externs = {k: f for k, f in declared.items() if k not in functions}
    return Module(version, target, address_size, functions, globals_, files, externs)


def _scoped(fn: Function, scopes: list[dict[str, str]], name: str) -> str:
    """The unique name of a declaration in the innermost open block.

    PTX scopes declarations by block: NVRTC's ``{ // callseq }`` blocks (``-G`` especially)
    declare ``param0`` again and again, with different types. A name already declared in the
    function gets a fresh suffix, and the block's instructions are renamed to match."""
    taken = name in fn.regs or any(v.name == name for v in fn.vars) or any(p.name == name for p in fn.params)
    new = name
    if taken and len(scopes) > 1:
        k = 1
        while new in fn.regs or any(v.name == new for v in fn.vars):
            new = f"{name}__b{k}"
            k += 1
    scopes[-1][name] = new
    return new


def _apply_scopes(ins: Instr, scopes: list[dict[str, str]]) -> None:
    """Rename an instruction's registers and symbols to the declarations its block sees."""
    names: dict[str, str] = {}
    for sc in scopes:  # outer first, inner wins
        names.update(sc)

    def ren(op: Operand) -> Operand:
        if isinstance(op, Reg):
            return Reg(names.get(op.name, op.name))
        if isinstance(op, Sym):
            return Sym(names.get(op.name, op.name))
        if isinstance(op, Addr) and op.base is not None:
            return Addr(ren(op.base), op.offset)  # type: ignore[arg-type]
        if isinstance(op, Vec):
            return Vec(tuple(ren(o) for o in op.items))
        if isinstance(op, Neg):
            return Neg(ren(op.inner))  # type: ignore[arg-type]
        if isinstance(op, Pair):
            return Pair(ren(op.first), ren(op.second))
        return op

    ins.operands = tuple(ren(o) for o in ins.operands)
    if ins.guard is not None:
        ins.guard = Reg(names.get(ins.guard.name, ins.guard.name))


def _bare_registers(ins: Instr, regs: dict[str, str]) -> None:
    """Registers need no ``%`` (inline asm writes ``.reg .pred p; setp.eq.u32 p, ...``): a bare
    identifier that names a declared register is that register, not a symbol."""

    def fix(op: Operand) -> Operand:
        if isinstance(op, Sym) and op.name in regs:
            return Reg(op.name)
        if isinstance(op, Addr) and isinstance(op.base, Sym) and op.base.name in regs:
            return Addr(Reg(op.base.name), op.offset)
        if isinstance(op, Vec):
            return Vec(tuple(fix(o) for o in op.items))
        if isinstance(op, Pair):
            return Pair(fix(op.first), fix(op.second))
        return op

    if any(isinstance(o, Sym | Addr | Vec | Pair) for o in ins.operands):
        ins.operands = tuple(fix(o) for o in ins.operands)


def _parse_reg_decl(t: str) -> list[tuple[str, str]]:
    """``.reg .b32 %r<4>, %x;`` -> [(name, type), ...]."""
    out: list[tuple[str, str]] = []
    words = t.split(None, 2)
    rtype = words[1].lstrip(".")
    vec = 1
    rest = words[2] if len(words) > 2 else ""
    if rtype in ("v2", "v4"):
        vec = int(rtype[1])
        w2 = rest.split(None, 1)
        rtype, rest = w2[0].lstrip("."), w2[1]
    if rtype not in TYPES or vec != 1:
        raise ValueError(f"unsupported register type .{rtype}")
    for part in _split_top(rest):
        m = re.fullmatch(r"(%?[\w$]+)<(\d+)>", part)
        if m:
            out += [(f"{m.group(1)}{k}", rtype) for k in range(int(m.group(2)))]
        else:
            out.append((part, rtype))
    return out


def _parse_instr(t: str, line: int, loc: SourceLoc | None, files: dict[int, str]) -> Instr:
    guard = None
    neg = False
    text = t
    if t.startswith("@"):
        g, t = t.split(None, 1)
        g = g[1:]
        if g.startswith("!"):
            neg, g = True, g[1:]
        guard = Reg(g)
    parts = t.split(None, 1)
    opcode = parts[0]
    rest = parts[1] if len(parts) > 1 else ""
    op, *mods = opcode.split(".")
    if op == "call":
        operands = _parse_call(rest)
    else:
        operands = tuple(parse_operand(x) for x in _split_top(rest)) if rest.strip() else ()
    return Instr(op, tuple(mods), operands, guard, neg, line, loc, " ".join(text.split()))


def _parse_call(rest: str) -> tuple[Operand, ...]:
    """``(ret), fname, (a, b)`` -> (Vec(rets), Sym(fname), Vec(args))."""
    parts = _split_top(rest)
    rets: tuple[Operand, ...] = ()
    if parts and parts[0].startswith("("):
        rets = tuple(parse_operand(x) for x in _split_top(parts[0][1:-1]) if x)
        parts = parts[1:]
    fname = parse_operand(parts[0])
    args: tuple[Operand, ...] = ()
    if len(parts) > 1 and parts[1].startswith("("):
        args = tuple(parse_operand(x) for x in _split_top(parts[1][1:-1]) if x)
    return (Vec(rets), fname, Vec(args))


def _resolve_labels(fn: Function, source_name: str) -> None:
    for ins in fn.body:
        if ins.op in ("bra", "brx"):
            ops = list(ins.operands)
            for k, o in enumerate(ops):
                if isinstance(o, Sym):
                    if o.name not in fn.labels:
                        raise PTXError(
                            f"{source_name}: {ins.where()}: unknown label {o.name} in `{ins.text}`"
                        )
                    ops[k] = Label(o.name)
            ins.operands = tuple(ops)


def source_line(ins: Instr, files: dict[int, str]) -> str:
    """``file:line`` of an instruction using the module's ``.file`` table."""
    if ins.loc is None:
        return ""
    name = files.get(int(ins.loc.file), ins.loc.file)
    return f"{name}:{ins.loc.line}"
