"""Progress on a terminal and the summary every writing command ends with.

Progress goes to stderr and only when stderr is a terminal and ``--quiet`` is
not given, so logs and pipes stay clean; a bar appears only after
:data:`BAR_DELAY_S`, so a one-second job draws none. The summary (files
written, and for a board design the DSP58 fit and the timing budget) goes to
stdout unless ``--quiet``.
"""

import sys
from pathlib import Path

__all__ = ["Progress", "summary_lines", "summarize", "BAR_DELAY_S"]

#: Seconds before a progress bar is drawn.
BAR_DELAY_S = 2.0


def _size(n):
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0


class Progress:
    """Where a command reports while it runs, and how it ends.

    Parameters
    ----------
    command : str
        ``"verilog"``, ...: the prefix of status lines.
    quiet : bool
        ``--quiet``: no progress and no summary.
    stream : file, optional
        Progress stream (default ``sys.stderr``); progress shows only if it
        is a terminal.
    out : file, optional
        Summary stream (default ``sys.stdout``).
    """

    def __init__(self, command, *, quiet=False, stream=None, out=None):
        self.command = command
        self.quiet = bool(quiet)
        self.stream = sys.stderr if stream is None else stream
        self.out = sys.stdout if out is None else out
        isatty = getattr(self.stream, "isatty", None)
        self.live = not self.quiet and bool(isatty and isatty())

    @classmethod
    def from_args(cls, args):
        """The progress of parsed CLI ``args`` (their ``command`` and ``quiet``)."""
        return cls(args.command, quiet=getattr(args, "quiet", False))

    def bar(self, iterable, *, desc, total=None, unit="it"):
        """``iterable``, with a tqdm bar on a terminal (after :data:`BAR_DELAY_S`)."""
        if not self.live:
            return iterable
        from tqdm import tqdm
        return tqdm(iterable, desc=f"specgen {self.command}: {desc}", total=total, unit=unit,
                    file=self.stream, leave=False, delay=BAR_DELAY_S, dynamic_ncols=True)

    def status(self, message):
        """One status line on a terminal (a step of a long command)."""
        if self.live:
            print(f"specgen {self.command}: {message}", file=self.stream, flush=True)

    def summary(self, lines):
        """The closing summary, unless quiet."""
        if not self.quiet:
            for line in lines:
                print(line, file=self.out)


def summary_lines(command, paths, *, root=None, notes=()):
    """``["specgen verilog: wrote 9 files (1.2 MB) to build/sim", *notes]``.

    Parameters
    ----------
    command : str
    paths : iterable of path
        Files written.
    root : path, optional
        The output folder, named instead of each file.
    notes : iterable of str
        Further lines (a fit verdict).
    """
    paths = [Path(p) for p in paths]
    size = sum(p.stat().st_size for p in paths if p.is_file())
    n = len(paths)
    where = f" to {root}" if root is not None else (f": {', '.join(map(str, paths))}"
                                                    if n <= 3 else "")
    head = f"specgen {command}: wrote {n} file{'s' if n != 1 else ''} ({_size(size)}){where}"
    return [head, *(f"  {note}" for note in notes)]


def summarize(args, command, paths, **kwargs):
    """Print the summary of a command run with parsed ``args`` (nothing with ``--quiet``):
    :func:`summary_lines` of ``command`` and ``paths``."""
    Progress.from_args(args).summary(summary_lines(command, paths, **kwargs))
