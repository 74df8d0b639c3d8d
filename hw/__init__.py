"""Amaranth RTL of the SpecMamba and SPEQ blocks.

Components read their configs and tables from :mod:`golden`; ``golden`` never
imports ``hw``.
"""
