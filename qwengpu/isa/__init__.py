"""The machine's instruction set, its limits and its exact 4-lane simulator.

Imports ``ptx`` (the IR a program came from) and ``simt`` (memory, float semantics); never
``codegen`` (which produces programs for it) or anything downstream."""
