"""Cycle-accurate behavioural model of :class:`hw.ring_fifo.RingFIFO`.

The model is the specification: the bench compares every output of the RTL
with it in every cycle.
"""

from collections import deque

from .validate import check_int

__all__ = ["RingFIFOModel"]


class RingFIFOModel:
    """First-word-fall-through FIFO with ``level`` and ``peak_level``.

    Use it one clock cycle at a time: read :meth:`outputs` (what the RTL
    drives during the cycle, a function of the state only), then call
    :meth:`clock` with the inputs sampled at the rising edge.

    Parameters
    ----------
    depth : int
        Capacity in items (≥ 1).
    """

    def __init__(self, *, depth):
        self.depth = check_int("RingFIFOModel", "depth", depth, min=1)
        self.reset()

    def reset(self):
        """Synchronous reset: empty, ``peak_level`` cleared."""
        self.items = deque()
        self.peak_level = 0

    @property
    def level(self):
        return len(self.items)

    def outputs(self):
        """Outputs during the current cycle, as a dict keyed by port name."""
        return {
            "w_ready": int(self.level < self.depth),
            "r_valid": int(self.level > 0),
            "r_payload": self.items[0] if self.items else None,
            "level": self.level,
            "peak_level": self.peak_level,
        }

    def clock(self, *, w_valid, w_payload, r_ready, rst=False):
        """Advance one rising edge.

        Returns
        -------
        (pushed, popped) : (int or None, int or None)
            The items transferred on each port at this edge.
        """
        if rst:
            self.reset()
            return None, None
        out = self.outputs()
        popped = self.items.popleft() if (out["r_valid"] and r_ready) else None
        pushed = w_payload if (out["w_ready"] and w_valid) else None
        if pushed is not None:
            self.items.append(pushed)
        self.peak_level = max(self.peak_level, self.level)
        return pushed, popped
