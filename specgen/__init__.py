"""specgen: a generator of speculative-decoding accelerators for Mamba on AMD Versal.

The code lives in the top-level packages ``golden`` (the numerical
specification), ``hw`` (Amaranth RTL), ``sim`` (cocotb benches) and ``gen``
(the generator and this CLI). This package holds the entry point:
``python -m specgen`` is the ``specgen`` command.
"""

from gen.cli.output import specgen_version

__all__ = ["__version__"]

#: The installed distribution's version (package metadata), as ``specgen --version`` prints it.
__version__ = specgen_version()
