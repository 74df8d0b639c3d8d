"""The ``specgen`` command: its registry of commands (:mod:`.commands`), one-line errors
(:mod:`.errors`), output folders (:mod:`.output`), progress lines (:mod:`.progress`) and design
files (:mod:`.design`).

``gen.cli:main`` is the installed entry point.
"""

from specgen.gen.cli.commands import main

__all__ = ["main"]
