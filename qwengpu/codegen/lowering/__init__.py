"""The lowering of PTX (after ``.func`` inlining) to machine instructions, by instruction family.

``table.RULES`` maps each PTX opcode to a short rule function ``(cx, ins) -> None`` in a family
module; the rules emit through the shared ``context.LowerCtx`` (see ``qwengpu.codegen.lower``).
"""
