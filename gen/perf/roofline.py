"""Physical ceilings of one speculative decoding step: memory, compute, and the smaller of the two.

A decode pass reads every weight once (the memory ceiling) and every linear-layer MAC
needs a multiplier slot (the compute ceiling). :func:`roofline` places each phase of a
modeled step (:class:`gen.perf.system.StepResult`) under

* the **memory ceiling**: its weight bytes at the board's sustained bandwidth, the
  model's dense bytes (an array's padded tiles are the design's cost, not the limit's;
  state traffic is design-dependent and could stay on chip, so it is not part of it);
* the **state ports**: its SSM-state traffic on the design's state ports
  (:class:`gen.perf.system.StateTraffic`, ``Accelerator.state_ports``), which the
  ``state_limit`` adds to ``limit`` and the design's compute ceiling includes;
* the **device compute ceiling**: its linear-layer MACs on every DSP58 of the part, one
  FP16 MAC per slice per cycle at the board clock (a DSP58 holds one FP16 significand
  product: AMD AM004 "Versal DSP Engine"), the SPEQ draft's nibble-plane products
  counted as full MACs (each still takes a slot);
* the **design's compute ceiling**: the same MACs on the design's own MAC slots
  (``linear.rows × linear.cols``, ``quant_lanes`` draft products per exact PE), its
  weights through its weight ports (a DSP array: ``weight_ports`` column beats of
  ``rows`` weights a cycle, ``Phase.t_feed``; what bounds a pass of fewer tokens than
  ``cols / weight_ports``) and its state updates on the SSM unit's lanes
  (one element per lane per cycle), the units overlapping perfectly;
* **LUT-built MACs**: the device ceiling with extra FP16 MACs built from LUTs
  (:data:`LUT_PER_FP16_MAC`, an assumption).

A phase cannot beat ``max(t_memory, t_compute)``; the step's ceiling is the sum of
those over its phases, so a step whose draft is memory-bound and whose verify is
compute-bound sits below both single ceilings. This is how an independent review
arrived at its VHK158 table (tree of 15 nodes + 370M draft: 482 tok/s memory,
192 tok/s with compute; ``tests/test_perf_roofline.py`` recomputes it from the model
dimensions alone).

The SSM recurrence (binary32 EMU updates) is not part of the device ceiling, as in
that review: it runs on the SSM unit's own slices and is reported as
``state_updates``.
"""

from dataclasses import dataclass

from specgen.golden.validate import check_float, check_int

from specgen.gen.perf.system import StepResult

__all__ = ["LUT_PER_FP16_MAC", "LUT_SHARE_FOR_MACS", "PhaseCeiling", "Roofline", "roofline",
           "lut_macs", "format_roofline"]

#: Assumption (no AMD figure found): LUTs of one FP16 × FP16 MAC built without a DSP58,
#: with a binary32 accumulator, as DSPFP32 accumulates: an 11 × 11 significand array
#: multiplier with exponent add and normalization (about 100 LUT6) and a pipelined
#: binary32 adder (about 250 LUT6).
LUT_PER_FP16_MAC = 350

#: Assumption: share of the part's LUTs free for LUT-built MACs (the rest holds the
#: design's control, SSM datapath and memory system).
LUT_SHARE_FOR_MACS = 0.5


def lut_macs(board, *, lut_per_mac=LUT_PER_FP16_MAC, share=LUT_SHARE_FOR_MACS):
    """FP16 MACs per cycle that ``share`` of ``board``'s LUTs would add at ``lut_per_mac`` each."""
    check_int("lut_macs", "lut_per_mac", lut_per_mac, min=1)
    check_float("lut_macs", "share", share, min=0.0, max=1.0)
    return int(board.lut * share) // lut_per_mac


@dataclass(frozen=True)
class PhaseCeiling:
    """One phase of a step under its ceilings (seconds per step, expected values).

    Attributes
    ----------
    name : str
    t_actual : float
        The modeled time of the phase (after any hidden share).
    t_memory : float
        Its weight bytes at the sustained bandwidth.
    t_device : float
        Its linear MACs on every DSP58 of the part.
    t_design : float
        Its linear MACs on the design's slots, its state updates on the SSM lanes.
    t_lut : float
        Its linear MACs on every DSP58 plus the LUT-built MACs.
    t_state : float
        Its SSM-state traffic on the design's state ports.
    """

    name: str
    t_actual: float
    t_memory: float
    t_device: float
    t_design: float
    t_lut: float
    t_state: float = 0.0

    @property
    def t_roof(self):
        """The phase's limit: ``max(t_memory, t_device)``."""
        return max(self.t_memory, self.t_device)

    @property
    def t_state_roof(self):
        """The limit with the state ports: ``max(t_memory, t_device, t_state)``."""
        return max(self.t_roof, self.t_state)

    @property
    def t_design_roof(self):
        """The design's own limit: ``max(t_memory, t_design)``."""
        return max(self.t_memory, self.t_design)

    @property
    def bound(self):
        """``"memory"`` or ``"compute"``: which ceiling limits the phase (device budget);
        ``"none"`` for a phase with neither weights nor linear MACs (restore)."""
        if self.t_memory == self.t_device == 0:
            return "none"
        return "memory" if self.t_memory >= self.t_device else "compute"

    def to_dict(self):
        return {"name": self.name, "t_actual_s": self.t_actual, "t_memory_s": self.t_memory,
                "t_device_s": self.t_device, "t_design_s": self.t_design, "t_lut_s": self.t_lut,
                "t_state_s": self.t_state, "t_roof_s": self.t_roof,
                "t_state_roof_s": self.t_state_roof, "t_design_roof_s": self.t_design_roof,
                "bound": self.bound}


@dataclass(frozen=True)
class Roofline:
    """The ceilings of one step; rates in tokens/s (:func:`roofline`)."""

    result: StepResult
    phases: tuple
    device_macs_per_cycle: int
    design_macs_per_cycle: int
    lut_macs_per_cycle: int
    lut_per_mac: int
    lut_share: float

    def _rate(self, seconds):
        return self.result.tokens_per_step / seconds if seconds > 0 else float("inf")

    @property
    def tokens_per_s(self):
        return self.result.tokens_per_s

    @property
    def memory(self):
        """Memory ceiling: every phase only streams its weights."""
        return self._rate(sum(p.t_memory for p in self.phases))

    @property
    def compute(self):
        """Compute ceiling on every DSP58 of the part (no memory limit)."""
        return self._rate(sum(p.t_device for p in self.phases))

    @property
    def limit(self):
        """The step's physical limit: per phase the smaller of the two ceilings."""
        return self._rate(sum(p.t_roof for p in self.phases))

    @property
    def state_limit(self):
        """The limit with the design's state ports: per phase the largest of memory,
        compute and state traffic."""
        return self._rate(sum(p.t_state_roof for p in self.phases))

    @property
    def design_compute(self):
        """Compute ceiling on the design's MAC slots and SSM lanes, the SSM taking at least its
        state traffic (no limit from the shared memory)."""
        return self._rate(sum(p.t_design for p in self.phases))

    @property
    def design_limit(self):
        """Per phase the smaller of the memory and the design's compute ceiling."""
        return self._rate(sum(p.t_design_roof for p in self.phases))

    @property
    def lut_limit(self):
        """The physical limit with LUT-built MACs beside the DSP58 (assumed LUT cost)."""
        return self._rate(sum(max(p.t_memory, p.t_lut) for p in self.phases))

    def ratio(self, ceiling):
        """The design's modeled tokens/s over ``ceiling`` (a property name of this class)."""
        return self.tokens_per_s / getattr(self, ceiling)

    CEILINGS = ("memory", "compute", "limit", "state_limit", "design_compute", "design_limit",
                "lut_limit")

    def to_dict(self):
        d = {c + "_tokens_per_s": getattr(self, c) for c in self.CEILINGS}
        d.update({c + "_ratio": self.ratio(c) for c in self.CEILINGS})
        d.update(phases=[p.to_dict() for p in self.phases],
                 device_macs_per_cycle=self.device_macs_per_cycle,
                 design_macs_per_cycle=self.design_macs_per_cycle,
                 lut_macs_per_cycle=self.lut_macs_per_cycle,
                 lut_per_mac_assumed=self.lut_per_mac, lut_share_assumed=self.lut_share)
        return d


def roofline(result, *, lut_per_mac=LUT_PER_FP16_MAC, lut_share=LUT_SHARE_FOR_MACS):
    """The ceilings of a modeled step (module docstring).

    Parameters
    ----------
    result : gen.perf.system.StepResult
    lut_per_mac : int
        Assumed LUTs per LUT-built FP16 MAC (:data:`LUT_PER_FP16_MAC`).
    lut_share : float
        Assumed share of the part's LUTs for them (:data:`LUT_SHARE_FOR_MACS`).

    Returns
    -------
    Roofline
    """
    if not isinstance(result, StepResult):
        raise TypeError(f"roofline.result must be a StepResult, not {result!r}")
    acc = result.accel
    clk, bw, board = acc.clock_hz, acc.bandwidth, acc.board
    lin = acc.linear
    # An exact PE does quant_lanes draft products a cycle; a DSPFP32 slot one MAC of either.
    quant_per_slot = lin.quant_lanes if lin.contract == "exact" else 1
    lanes = acc.ssm_emus
    extra = lut_macs(board, lut_per_mac=lut_per_mac, share=lut_share)
    phases = []
    for p in result.phases:
        t_lin = (p.full_macs + p.quant_macs / quant_per_slot) / (lin.pes * clk)
        t_ssm = p.state_updates / (lanes * clk)
        phases.append(PhaseCeiling(
            name=p.name, t_actual=p.time, t_memory=p.dense_weight_bytes / bw,
            t_device=p.linear_macs / (board.dsp58 * clk) if board.dsp58 else float("inf"),
            t_design=max(t_lin, p.t_feed, t_ssm, p.t_state), t_state=p.t_state * (1 - p.hidden),
            t_lut=p.linear_macs / ((board.dsp58 + extra) * clk) if board.dsp58 + extra
            else float("inf")))
    return Roofline(result, tuple(phases), board.dsp58, lin.pes, extra, lut_per_mac, lut_share)


def feed_label(acc):
    """``"N weight ports, "`` of a DSP array (the design ceiling's weight feed), else ``""``."""
    return f"{acc.weight_ports} weight ports, " if acc.linear.contract == "dspfp32" else ""


def _ms(s):
    return f"{s * 1e3:,.2f}"


def format_roofline(roof):
    """The ceilings table that ``specgen perf`` prints under the step."""
    acc = roof.result.accel
    b = acc.board
    tmacs = roof.device_macs_per_cycle * acc.clock_hz / 1e12
    lines = [
        "",
        "ceilings (model): seconds per step if the phase ran at each limit",
        f"{'phase':<8} {'ours ms':>10} {'memory ms':>10} {'DSP58 ms':>10} {'limit ms':>10} "
        f"{'design ms':>10} {'state ms':>10} {'bound':>8}",
    ]
    for p in roof.phases:
        lines.append(f"{p.name:<8} {_ms(p.t_actual):>10} {_ms(p.t_memory):>10} "
                     f"{_ms(p.t_device):>10} {_ms(p.t_roof):>10} {_ms(p.t_design):>10} "
                     f"{_ms(p.t_state):>10} {p.bound:>8}")

    def row(label, ceiling):
        return (f"{label:<44} {getattr(roof, ceiling):>9,.1f} tok/s   ours = "
                f"{100 * roof.ratio(ceiling):5.1f} %")

    lines += [
        "",
        row(f"memory ceiling ({b.mem_bw_gbs:g} GB/s, weights once)", "memory"),
        row(f"compute ceiling ({b.dsp58:,} DSP58, {tmacs:.2f} TMAC/s)", "compute"),
        row("limit: min(memory, compute) per phase", "limit"),
        row(f"with the state on {acc.state_ports} + {acc.state_ports} state ports", "state_limit"),
        row(f"design's slots ({acc.linear.pes:,} MAC, {feed_label(acc)}"
            f"{acc.ssm_emus} SSM lanes)", "design_compute"),
        row("design limit: min(memory, design) per phase", "design_limit"),
        row(f"with +{roof.lut_macs_per_cycle:,} LUT MACs (assumed)", "lut_limit"),
        f"  (LUT MACs: assumption, {roof.lut_per_mac} LUT per FP16 MAC with a binary32 "
        f"accumulator, {100 * roof.lut_share:g} % of {b.lut:,} LUT)",
    ]
    return "\n".join(lines)
