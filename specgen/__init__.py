"""specgen: a generator of speculative-decoding accelerators for Mamba on AMD Versal.

One import namespace over the folders of the layout: ``specgen.golden`` (the
numerical specification, ``golden/``), ``specgen.hw`` (Amaranth RTL, ``hw/``),
``specgen.sim`` (cocotb benches, ``sim/``) and ``specgen.gen`` (the generator and
its CLI, ``gen/``). An installed wheel holds them under ``specgen/`` (setuptools'
``package-dir`` mapping in ``pyproject.toml``); in a checkout the folders sit next
to this package, and :data:`__path__` reaches them. ``python -m specgen`` is the
``specgen`` command.
"""

from pathlib import Path as _Path

# A checkout: the rooms are siblings of this folder. Installed, they are inside it
# (already on __path__), and the sibling folder holds no rooms.
_CHECKOUT = _Path(__file__).resolve().parent.parent
if (_CHECKOUT / "golden" / "__init__.py").is_file() and str(_CHECKOUT) not in __path__:
    __path__.append(str(_CHECKOUT))

from specgen.gen.cli.output import specgen_version  # noqa: E402  (needs __path__ above)

__all__ = ["__version__"]

#: The installed distribution's version (package metadata), as ``specgen --version`` prints it.
__version__ = specgen_version()
