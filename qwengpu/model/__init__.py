"""Checkpoints: build and cache the standalone machine model, mount it on a base, verify.

Imports ``compiler`` and ``machine``; never ``runtime`` or the CLI."""
