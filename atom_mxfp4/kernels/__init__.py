"""Backends: one folder each (`torch` reference, `triton`, `flydsl`), one op family per file.

Installed as ``atom_mxfp4.kernels``; never import it as a top-level ``kernels`` package.
Backends receive arguments already validated by :mod:`atom_mxfp4.ops` and never import each other.
"""
