"""PTX IR -> machine program: lowering, register allocation, and the integer sequences (soft*)
that expand what the datapath in the weights lacks.

Imports ``ptx``, ``simt`` and ``isa``; never ``machine``, ``model``, ``runtime`` or the CLI."""
