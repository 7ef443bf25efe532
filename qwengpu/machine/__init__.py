"""The GPU as one per-token circuit (``circuit.py``) and its token protocol (``protocol.py``).

Imports ``compiler``; the ISA lives in ``qwengpu.isa``, the code generator in ``qwengpu.codegen``."""
