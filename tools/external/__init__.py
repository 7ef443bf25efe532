"""Generator modules of the external conformance suite (see tools/gen_external.py): one per source."""

from . import k_hecbench, k_polybench, k_rodinia, k_samples, k_shoc

ALL_MODULES = [k_samples, k_hecbench, k_rodinia, k_polybench, k_shoc]
