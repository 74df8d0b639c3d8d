"""The host runtime: one API that turns a prompt into tokens, over interchangeable engines.

::

    rt = Runtime(config=preset("sim"), engine="golden")
    rt.load_model("target")                 # shipped name, seeded preset or weight file
    rt.load_draft("speq")                   # SPEQ self-speculation, or a draft model
    result = rt.generate(prompt_ids, tokens=32, tree=(2, 2, 1, 1))
    result.tokens, result.tokens_per_step

Engines (:data:`ENGINES`):

``golden``
    :class:`GoldenEngine`: :func:`golden.speculative.speculative_generate`,
    greedy, the draft tree verified in SpecMamba's FIFO schedule (arXiv
    2509.19873) with the tile size and ring depth of the design's
    ``TreeConfig``, states restored by the backtracking policy the memory map
    is laid out for (:data:`golden.memory_map.DEFAULT_POLICY`). The reference
    every other engine must match token for token.
``hw``
    :class:`HardwareEngine`: the same speculative decoding over
    :class:`golden.decoder.HardwareLM` models, the decoder in the accelerator's
    numerics (every stage its block's golden contract: DSPFP32 dots on the BSFP
    planes, the conv1d, norms, residual and SSM unit in the design's SSM
    contract and tables). These are the tokens and logits an RTL run must
    reproduce bit for bit; on the shipped models they equal ``golden``'s
    (``tests/test_golden_decoder.py``).
``rtl``
    :class:`RtlEngine`: every target pass on a simulated
    :class:`hw.decoder.DecoderCore` (cocotb on Verilator, :mod:`gen.runtime.rtl_host`):
    the prompt, each step's tree (the gather of the nodes' embedding rows, then
    the logits and argmax of every node) and the commit of the accepted path,
    from programs in memory (:mod:`hw.step_program`); the host writes only the
    node table and the programs. The draft's passes run on the core too (a depth
    at a time; the runtime picks each node's top-k children from its logits in
    memory), or on the host (``draft_on="host"``); greedy acceptance runs on the
    core, and the runtime reads the accepted path from memory. It fills ``cycles_per_token`` and the whole-step model's
    ``model_cycles_per_token`` (:mod:`gen.perf.program`). A board back-end (:mod:`gen.runtime.regbus`,
    :mod:`gen.runtime.image`) is not built.

An engine is any object with ``name`` and ``generate(*, target, draft,
prompt, tokens, tree, gamma, source, speq) -> GenerateResult`` (``source``: the
model as loaded; ``speq``: the draft is SPEQ self-speculation on it).

SPEQ self-speculation (arXiv 2510.18525) builds both models from one FP16
weight copy in the design's BSFP v1 format (:func:`golden.lm.speq_pair`): the
target reads both planes, the draft only the nibble plane. With a separate
draft model the target is the model as loaded.
"""

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

# How the RTL engine's draft passes run on the core (RtlEngine's draft_flow), which the
# performance model prices too.
from specgen.hw.step_program import DRAFT_FLOWS

__all__ = ["ENGINES", "SPEQ", "DEFAULT_TREE", "GenerateResult", "GoldenEngine", "HardwareEngine",
           "RtlEngine", "rtl_design", "make_engine", "Runtime"]

#: Engines :class:`Runtime` knows, in the order of ``specgen generate --help``.
ENGINES = ("rtl", "hw", "golden")
#: The ``draft`` that asks for SPEQ self-speculation instead of a draft model.
SPEQ = "speq"
#: Default per-depth branching: the tree SpecMamba's notes use (branching 2, depth 4).
DEFAULT_TREE = (2, 2, 1, 1)


@dataclass(frozen=True)
class GenerateResult:
    """What :meth:`Runtime.generate` returns.

    Attributes
    ----------
    tokens : tuple of int
        The generated tokens (the prompt excluded).
    tokens_per_step : tuple of int
        Tokens each target pass committed (accepted draft tokens + 1).
    engine : str
        The engine that ran.
    cycles_per_token : float or None
        Accelerator cycles per generated token (RTL engine); ``None`` for golden.
    accepted_per_step, nodes_per_step : tuple of int
        Accepted draft tokens and drafted tree nodes (root included) per step.
    clock_mhz : float or None
        The fabric clock the cycles count (RTL engine).
    steps : tuple of dict
        Per step (RTL engine): ``nodes``, ``accepted``, ``tokens``, ``tree_cycles``,
        ``commit_cycles`` and ``draft_cycles`` (the draft's programs and its commit; 0
        when the draft runs on the host), the step's tree (``parents``, ``draft``) and
        accepted ``path``, and the whole-step model's ``model_tree_cycles``,
        ``model_commit_cycles`` and ``model_draft_cycles``.
    model_cycles_per_token : float or None
        The whole-step model's cycles per generated token for the same programs
        (:mod:`gen.perf.program`, RTL engine): set beside ``cycles_per_token``.
    draft_on_core : bool or None
        The draft's passes ran on the core (RTL engine), so ``cycles_per_token`` counts
        them.
    draft_flow : str or None
        How they ran (RTL engine with the draft on the core: :data:`DRAFT_FLOWS`).
    counters : dict or None
        The decoder top's performance counters (:data:`hw.decoder_top.DECODER_COUNTERS`)
        summed over the generation's programs, the prompt's excluded (RTL engine):
        ``perf_busy`` (cycles a program ran), ``perf_linear_busy``, ``perf_ssm_busy``
        and ``perf_overlap`` (both at once).
    backend : str or None
        How the host reached the registers (RTL engine: :data:`BACKENDS`).
    """

    tokens: tuple
    tokens_per_step: tuple
    engine: str
    cycles_per_token: float | None = None
    accepted_per_step: tuple = ()
    nodes_per_step: tuple = field(default=())
    clock_mhz: float | None = None
    steps: tuple = ()
    model_cycles_per_token: float | None = None
    draft_on_core: bool | None = None
    draft_flow: str | None = None
    counters: dict | None = None
    backend: str | None = None

    @property
    def model_error(self):
        """``model / measured − 1`` of the cycles per token, or ``None``."""
        if self.model_cycles_per_token is None or not self.cycles_per_token:
            return None
        return self.model_cycles_per_token / self.cycles_per_token - 1

    @property
    def mean_tokens_per_step(self):
        """Tokens committed per target pass, averaged over the steps."""
        n = len(self.tokens_per_step)
        return sum(self.tokens_per_step) / n if n else 0.0

    def to_dict(self):
        """JSON-ready: ``tokens``, ``tokens_per_step``, ``cycles_per_token`` and the rest."""
        return {"tokens": list(self.tokens), "tokens_per_step": list(self.tokens_per_step),
                "cycles_per_token": self.cycles_per_token, "engine": self.engine,
                "model_cycles_per_token": self.model_cycles_per_token,
                "draft_on_core": self.draft_on_core, "draft_flow": self.draft_flow,
                "model_error": self.model_error, "counters": self.counters,
                "backend": self.backend,
                "clock_mhz": self.clock_mhz, "steps": list(self.steps),
                "mean_tokens_per_step": self.mean_tokens_per_step,
                "accepted_per_step": list(self.accepted_per_step),
                "nodes_per_step": list(self.nodes_per_step)}


class GoldenEngine:
    """The golden engine (module docstring) for the design ``config``.

    Parameters
    ----------
    config : golden.config.Config
        Gives the tree verifier's tile size and ring depth.
    """

    name = "golden"

    def __init__(self, *, config):
        from specgen.golden.config import Config
        if not isinstance(config, Config):
            raise TypeError(f"GoldenEngine.config must be a golden.config.Config, not {config!r}")
        self.config = config

    def generate(self, *, target, draft, prompt, tokens, tree, gamma, source=None, speq=False):
        """Greedy tree speculative decoding; see :class:`Runtime.generate`."""
        from specgen.golden.memory_map import DEFAULT_POLICY
        from specgen.golden.speculative import speculative_generate

        t = self.config.tree
        res = speculative_generate(target, draft, prompt, tokens, tree=tree, mode="greedy",
                                   gamma=gamma, verify="fifo", tile_size=t.tile_size,
                                   fifo_depth=t.fifo_depth, backtrack=DEFAULT_POLICY)
        return GenerateResult(tokens=res.tokens, tokens_per_step=res.tokens_per_step,
                              engine=self.name, accepted_per_step=res.accepted_per_step,
                              nodes_per_step=res.nodes_per_step)


class HardwareEngine:
    """The ``hw`` engine (module docstring) for the design ``config``.

    Parameters
    ----------
    config : golden.config.Config
        The design whose numerics the models run in (its BSFP format, SSM contract
        and tables).
    """

    name = "hw"

    def __init__(self, *, config):
        from specgen.golden.config import Config
        if not isinstance(config, Config):
            raise TypeError(f"HardwareEngine.config must be a golden.config.Config, not {config!r}")
        self.config = config
        self._models = {}

    def _model(self, lm, linear_pass="verify", *, who="target"):
        # One encoding per loaded model and pass (a generate call re-uses them).
        from specgen.golden.decoder import hardware_pair

        from specgen.gen.runtime.model import ModelError
        if lm not in self._models:        # keyed by the model object itself (identity)
            try:
                pair = hardware_pair(lm, config=self.config)
            except ValueError as exc:
                # A model the design cannot run (its SSM against the unit's lanes, a weight
                # beyond FP16): the model's fault, not the tree's.
                hint = " (the design: --set ssm.lanes)" if "does not fit" in str(exc) else ""
                err = ModelError(f"the {who} model: {exc}{hint}")
                err.who = who           # "target" or "draft": the flag a CLI names
                raise err from None
            self._models[lm] = pair
        pair = self._models[lm]
        return pair.target if linear_pass == "verify" else pair.draft

    def generate(self, *, target, draft, prompt, tokens, tree, gamma, source=None, speq=False):
        """Greedy tree speculative decoding of :class:`golden.decoder.HardwareLM` models:
        ``source`` in the verify pass, and ``source`` in the draft pass under SPEQ or
        ``draft`` (a model as loaded) in the verify pass."""
        from specgen.golden.speculative import speculative_generate
        if source is None:
            raise ValueError("HardwareEngine.generate needs source, the model as loaded "
                             "(Runtime.generate passes it)")
        hw_target = self._model(source)
        hw_draft = self._model(source, "draft") if speq else self._model(draft, who="draft")
        # Paths verification (every node stepped from its parent's state) and stored node
        # states: the model protocol a HardwareLM follows. The tokens are the target's
        # greedy continuation whatever the schedule (lossless greedy verification).
        res = speculative_generate(hw_target, hw_draft, prompt, tokens, tree=tree, mode="greedy",
                                   gamma=gamma, verify="paths", backtrack="pure-store")
        return GenerateResult(tokens=res.tokens, tokens_per_step=res.tokens_per_step,
                              engine=self.name, accepted_per_step=res.accepted_per_step,
                              nodes_per_step=res.nodes_per_step)


@contextmanager
def _stdout_to_stderr():
    """The build's and the simulator's output (they write to file descriptor 1) on
    stderr, so the runtime's own output (``--json``) is all stdout holds."""
    import contextlib
    import os
    import sys
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


#: Where the RTL engine's draft runs (:class:`RtlEngine`'s ``draft_on``).
DRAFT_ON = ("core", "host")
#: The part of a step each kind of program is (:mod:`gen.runtime.rtl_host`).
_PART = {"tree": "tree", "commit": "commit", "draft": "draft", "draft_commit": "draft"}

#: The RTL engine's fault injections (:class:`RtlEngine`'s ``faults``).
FAULTS = ("cut_tree", "cut_commit", "abort_tree", "abort_commit")
#: How the RTL engine's host reaches the decoder top's registers (:mod:`gen.runtime.rtl_host`):
#: ``axi-lite``, the simulation back-end (cocotbext-axi's AXI4-Lite master), or ``mmio``,
#: the board back-end (:class:`gen.runtime.regbus.MMIO`) over a mapping that forwards to
#: the simulation.
BACKENDS = ("axi-lite", "mmio")


def rtl_design(config, model):
    """The design an RTL run builds for ``model`` (a :class:`golden.lm.LMConfig`): ``config``
    with its SSM unit built for the model's heads, head dimension and state size (a
    decoder core runs one model's layers; ``ssm.lanes`` at most ``d_state``, or the
    design's rows a cycle of the model's ``d_state`` each). Every other parameter is the
    design's, and the model must fit it (:class:`hw.decoder.DecoderCore` names the field
    that does not)."""
    import dataclasses
    c = config.ssm
    lanes = (c.rows_per_word * model.d_state if c.lanes > c.d_state
             else min(c.lanes, model.d_state))
    ssm = dataclasses.replace(c, nheads=model.nheads, headdim=model.headdim,
                              d_state=model.d_state, lanes=lanes)
    return config.replace(ssm=ssm)


class RtlEngine:
    """The ``rtl`` engine (module docstring) for the design ``config``.

    Every target pass runs on a simulated :class:`hw.decoder.DecoderCore` (Verilator, the
    memory behind its AXI ports modeled by :mod:`sim.axi_master`): the prompt, each
    step's tree and the commit of its accepted path, from the programs of
    :class:`hw.step_program.StepPlan` (:mod:`gen.runtime.rtl_host`), and the draft's passes
    too unless ``draft_on="host"``, and the greedy acceptance of every target step
    (the accepted path in memory). The draft's candidate choice (top-k from the logits
    in memory) is the host's.

    Parameters
    ----------
    config : golden.config.Config
        The design (:func:`rtl_design` gives the core's).
    latency, stall : int, float
        Memory cycles of a read, and every AXI channel's random stall rate.
    faults : dict, optional
        ``{"cut_tree": k, "cut_commit": k}``: reset the core in mid tree program or in
        mid commit of step ``k`` (the host reruns it); ``abort_tree`` and
        ``abort_commit``: abort it instead (``ABORT``, the core's ``abort_req``), then
        roll back by running it again once the core is idle.
    cxx_opt : str
        The C++ optimization of the Verilator model's evaluation code
        (:func:`sim.runner.build`): ``-Os`` by default. The core's model builds in
        about 1.5 minutes either way (its constructors compile at ``-O0``,
        ``sim.runner.SPLIT_BUILD_BYTES``) and simulates about 4.5 times faster than
        at ``-O0``.
    trace : bool
        Record every program's hand-overs and engine events (slower; for the
        calibration of :mod:`gen.perf.program`), kept in :attr:`last_run`.
    draft_on : {"core", "host"}
        ``"core"`` (default): the draft's passes run on the core too, from a plan of their
        own (SPEQ's nibble plane of the target's weights, or a draft model of the
        target's widths; fewer layers are fine), and the runtime picks each node's top-k
        children from its logits in memory. ``"host"``: the draft's tree is
        :func:`golden.speculative.draft_tree` on the host (any draft model).
    backend : {"axi-lite", "mmio"}
        How the host (:class:`gen.runtime.driver.CoreDriver`) reaches the registers of
        the :class:`hw.decoder_top.DecoderTop` around the core (:data:`BACKENDS`).
    draft_flow : {"node", "prefix"}
        With ``draft_on="core"``, the draft's passes (:data:`DRAFT_FLOWS`). ``"node"``
        (default): one program per expanded node, from its parent's state in memory
        (:meth:`hw.step_program.StepPlan.node_program`): a chain of ``L`` drafts is ``L``
        one-node passes. ``"prefix"``: per depth, one tree program over every node
        drafted so far, from the committed state: one weight read a depth, but a chain
        of ``L`` computes ``L (L + 1) / 2`` nodes. ``specgen perf`` prices both.
    """

    name = "rtl"

    def __init__(self, *, config, latency=16, stall=0.0, faults=None, cxx_opt="-Os",
                 trace=False, draft_on="core", backend="axi-lite", draft_flow="node"):
        from specgen.golden.config import Config
        from specgen.golden.validate import check_choice, check_int
        if not isinstance(config, Config):
            raise TypeError(f"RtlEngine.config must be a golden.config.Config, not {config!r}")
        self.config = config
        self.latency = check_int("RtlEngine", "latency", latency, min=1)
        if not 0.0 <= stall < 1.0:
            raise ValueError(f"RtlEngine.stall must be in [0, 1), not {stall!r}")
        self.stall, self.cxx_opt = stall, cxx_opt
        faults = dict(faults or {})
        for key, k in faults.items():
            if key not in FAULTS:
                raise ValueError(f"RtlEngine.faults: unknown key {key!r}; allowed: "
                                 f"{', '.join(FAULTS)}")
            check_int("RtlEngine", f"faults[{key!r}]", k, min=0)
        self.faults = faults
        self.trace = bool(trace)
        self.draft_on = check_choice("RtlEngine", "draft_on", draft_on, DRAFT_ON)
        self.backend = check_choice("RtlEngine", "backend", backend, BACKENDS)
        self.draft_flow = check_choice("RtlEngine", "draft_flow", draft_flow, DRAFT_FLOWS)
        #: The simulation's whole result of the last :meth:`generate` (with ``trace``, its
        #: programs and their events: :func:`sim.decoder_core.run_program`).
        self.last_run = None

    def core(self, model, nodes):
        """``(design, core)``: the decoder core of ``model`` for trees of ``nodes`` nodes,
        its address width and record memory sized by the step programs it will run, with
        room for a draft's plan beside the target's (:mod:`gen.runtime.rtl_host`; a draft on
        the core has the target's widths and at most its layers, so one core serves
        every draft and ``draft_on``)."""
        from specgen.golden.decoder import HardwareLM
        from specgen.golden.lm import MambaLM
        from specgen.golden.tree import ROOT
        from specgen.hw.decoder import DecoderCore
        from specgen.hw.hierarchy import silence
        from specgen.hw.step_program import StepPlan
        from specgen.gen.runtime.rtl_host import next_base, program_areas

        design = rtl_design(self.config, model)
        probe = DecoderCore(config=design, model=model, max_records=4096, addr_width=40,
                            max_nodes=nodes)
        silence(probe)                      # only measured, never elaborated
        records, base, plans = 0, 0, []
        for mode in ("verify", "draft"):
            lm = HardwareLM(MambaLM.from_seed(model, seed=0), config=design, linear_pass=mode)
            # The draft's plan keeps its nodes' states (the node flow's larger layout).
            plan = StepPlan(probe, lm, nodes=nodes, base=base, node_states=mode == "draft")
            plans.append(plan)
            base = next_base(plan)
            # Any tree of ``nodes`` nodes has as many records.
            records = max(records, plan.program(list(range(-1, nodes - 1)), [0] * nodes)[1])
        # A draft's node pass with the target's commit beside it (the node flow).
        target, draft_plan = plans
        records = max(records, draft_plan.node_program(
            0, ROOT, 0, beside=target.commit_parts([0], nodes=nodes))[1])
        # The probe's records are at least as wide as the core's (40-bit addresses).
        _, _, need = program_areas(records, probe.record_bits, base)
        return design, DecoderCore(config=design, model=model, max_records=records,
                                   addr_width=max(12, (need - 1).bit_length()), max_nodes=nodes)

    def generate(self, *, target, draft, prompt, tokens, tree, gamma, source=None, speq=False):
        """Greedy tree speculative decoding with the target on the RTL; see
        :class:`Runtime.generate`."""
        import dataclasses
        import json
        import tempfile
        from pathlib import Path

        from specgen.golden.tree import TreeShape
        from specgen.sim.runner import run_bench
        if source is None:
            raise ValueError("RtlEngine.generate needs source, the model as loaded "
                             "(Runtime.generate passes it)")
        shape = tree if isinstance(tree, TreeShape) else TreeShape(tuple(tree))
        from specgen.gen.runtime.model import ModelError
        if shape.num_nodes > self.config.linear.max_tokens:
            raise ValueError(f"RtlEngine: a tree of {shape.num_nodes} nodes with the root; the "
                             f"decoder core runs at most linear.max_tokens = "
                             f"{self.config.linear.max_tokens} (the tokens of one linear job)")
        on_core = self.draft_on == "core"
        if on_core:
            d_config = source.config if speq else draft.config
            if (dataclasses.replace(d_config, n_layer=source.config.n_layer) != source.config
                    or d_config.n_layer > source.config.n_layer):
                err = ModelError(
                    f"the draft model ({d_config}) does not have the target's widths "
                    f"({source.config}; only n_layer may differ, at most the target's), which "
                    f"the decoder core is built for: RtlEngine(draft_on='host') drafts on "
                    f"the host")
                err.who = "draft"
                raise err
        try:
            design, core = self.core(source.config, shape.num_nodes)
        except ValueError as exc:
            raise ModelError(f"the target model does not fit the RTL engine's decoder core: "
                             f"{exc}") from None
        with tempfile.TemporaryDirectory(prefix="specgen-rtl-") as tmp:
            tmp = Path(tmp)
            source.save(tmp / "target.npz")
            p = {"config": design.to_dict(), "model": dataclasses.asdict(source.config),
                 "max_records": core.max_records, "addr_width": core.addr_width,
                 "max_nodes": core.max_nodes, "target_path": str(tmp / "target.npz"),
                 "draft_path": None, "draft_model": None, "prompt": list(prompt),
                 "tokens": tokens, "tree": list(shape.branching), "gamma": gamma,
                 "latency": self.latency, "stall": self.stall, "result": str(tmp / "out.json"),
                 "trace": self.trace, "draft_on_core": on_core, "backend": self.backend,
                 "draft_flow": self.draft_flow,
                 **self.faults}
            if not speq:
                draft.save(tmp / "draft.npz")
                p.update(draft_path=str(tmp / "draft.npz"),
                         draft_model=dataclasses.asdict(draft.config))
            from specgen.hw.decoder_top import DecoderTop
            top = DecoderTop(core=core)
            with _stdout_to_stderr():
                # A trace watches the engines' handshakes inside the core: every signal
                # public to VPI (a build of its own).
                run_bench(top, name=top.module_name, module="specgen.gen.runtime.rtl_host",
                          testcase="generate", params=p, cxx_opt=self.cxx_opt,
                          public="all" if self.trace else "ports")
            r = json.loads((tmp / "out.json").read_text())
        self.last_run = r
        # The whole-step model beside every program the core ran, summed per step.
        from specgen.gen.perf.program import predict, program_runs
        try:
            model = predict(program_runs(r, core=core, design=design, latency=self.latency))
        except ValueError as exc:          # an engine the shipped costs were not fitted on
            print(f"specgen: no whole-step model: {exc}", file=sys.stderr)
            return self._result(r, r["steps"], None)
        per = [{"tree": 0.0, "commit": 0.0, "draft": 0.0} for _ in r["steps"]]
        for prog, cycles in zip(r["programs"], model):
            if prog["step"] is not None:
                per[prog["step"]][_PART[prog["kind"]]] += cycles
        steps = tuple({**st, **{f"model_{k}_cycles": round(v, 1) for k, v in m.items()}}
                      for st, m in zip(r["steps"], per))
        return self._result(r, steps, sum(sum(m.values()) for m in per) / r["generated"])

    def _result(self, r, steps, model_cpt):
        return GenerateResult(tokens=tuple(r["tokens"]), tokens_per_step=tuple(r["tokens_per_step"]),
                              engine=self.name, cycles_per_token=r["cycles_per_token"],
                              accepted_per_step=tuple(r["accepted_per_step"]),
                              nodes_per_step=tuple(r["nodes_per_step"]),
                              clock_mhz=r["clock_mhz"], steps=tuple(steps),
                              model_cycles_per_token=model_cpt,
                              draft_on_core=r["draft_on_core"], backend=r["backend"],
                              draft_flow=r["draft_flow"] if r["draft_on_core"] else None,
                              counters=_counters(r["programs"]))


def _summed():
    """The counters :class:`GenerateResult` sums: :data:`gen.runtime.driver.PERF_NAMES`
    less ``PERF_CYCLES``, which counts the host's time between programs too."""
    from specgen.gen.runtime.driver import PERF_NAMES
    return [n.lower() for n in PERF_NAMES if n != "PERF_CYCLES"]


def _counters(programs):
    """The counters of the generation's programs (those of a step), summed."""
    return {k: sum(p[k] for p in programs if p["step"] is not None) for k in _summed()}


def make_engine(name, *, config):
    """The engine ``name`` (one of :data:`ENGINES`) for the design ``config``.

    Raises
    ------
    ValueError
        An unknown name (listing :data:`ENGINES`).
    """
    from specgen.golden.validate import check_choice
    check_choice("Runtime", "engine", name, ENGINES)
    cls = {"rtl": RtlEngine, "hw": HardwareEngine, "golden": GoldenEngine}[name]
    return cls(config=config)


class Runtime:
    """Load a model and a draft, then generate tokens on an engine.

    Parameters
    ----------
    config : golden.config.Config
        The accelerator design (its tree verifier, BSFP format and memory map).
    engine : str or engine
        A name of :data:`ENGINES` or an engine object (``name``, ``generate``).
    """

    def __init__(self, *, config, engine="golden"):
        from specgen.golden.config import Config
        if not isinstance(config, Config):
            raise TypeError(f"Runtime.config must be a golden.config.Config, not {config!r}")
        self.config = config
        self.engine = make_engine(engine, config=config) if isinstance(engine, str) else engine
        self.model = self.model_label = None
        self.draft = self.draft_label = None
        self._pair = None

    def load_model(self, path_or_name, *, seed=0):
        """Load the target (:func:`gen.runtime.model.load_model`); the draft is reset to SPEQ.

        Returns
        -------
        golden.lm.MambaLM
        """
        from specgen.gen.runtime.model import load_model
        self.model, self.model_label = load_model(path_or_name, seed=seed)
        self.load_draft(SPEQ)
        return self.model

    def load_draft(self, draft, *, seed=0):
        """``"speq"`` (self-speculation from the nibble plane) or a draft model of the same vocabulary.

        Raises
        ------
        gen.runtime.model.ModelError
            A draft whose vocabulary differs from the target's.
        """
        from specgen.golden.lm import speq_pair

        from specgen.gen.runtime.model import ModelError, load_model
        self._require_model("load_draft")
        if str(draft) == SPEQ:
            self._pair = speq_pair(self.model, bsfp=self.config.bsfp)
            self.draft, self.draft_label = self._pair.draft, "speq (BSFP v1 nibble plane)"
            return self.draft
        lm, label = load_model(draft, seed=seed)
        if lm.vocab != self.model.vocab:
            raise ModelError(f"draft {label}: vocab {lm.vocab} differs from the target's "
                             f"{self.model.vocab}; allowed: a draft with vocab {self.model.vocab} "
                             f"or 'speq'")
        self._pair = None
        self.draft, self.draft_label = lm, label
        return lm

    def _require_model(self, what):
        if self.model is None:
            raise RuntimeError(f"Runtime.{what}: load a model first (Runtime.load_model)")

    def image(self, *, policy=None):
        """The loaded model laid out for the design (:func:`gen.runtime.image.image_of`): one
        weight copy, which serves both SPEQ passes (the nibble planes are the draft's).

        Returns
        -------
        gen.runtime.image.ModelImage
        """
        from specgen.gen.runtime.image import image_of
        self._require_model("image")
        return image_of(self.model, config=self.config, policy=policy)

    @property
    def target(self):
        """The model the target pass runs: the BSFP-reconstructed FP16 one under SPEQ."""
        self._require_model("target")
        return self._pair.target if self._pair is not None else self.model

    def generate(self, prompt_ids, tokens, *, tree=DEFAULT_TREE, gamma=None):
        """Generate ``tokens`` tokens after ``prompt_ids``, greedily.

        Parameters
        ----------
        prompt_ids : sequence of int
            At least one token in ``[0, vocab)``; the last is the first tree's root.
        tokens : int
            Tokens to generate (>= 1).
        tree : sequence of int or golden.tree.TreeShape
            Per-depth branching; it must fit the design's tree verifier
            (``TreeConfig.max_nodes`` nodes with the root, a FIFO schedule within
            ``TreeConfig.fifo_depth`` slots).
        gamma : float, optional
            SPEQ early stopping (default :data:`golden.speculative.DEFAULT_GAMMA`).

        Returns
        -------
        GenerateResult
        """
        from specgen.golden.speculative import DEFAULT_GAMMA
        from specgen.golden.tree import TreeShape, fifo_schedule
        from specgen.golden.validate import check_int

        self._require_model("generate")
        tokens = check_int("Runtime.generate", "tokens", tokens, min=1)
        shape = tree if isinstance(tree, TreeShape) else TreeShape(tuple(tree))
        t = self.config.tree
        if shape.num_nodes > t.max_nodes:
            raise ValueError(f"Runtime.generate tree {list(shape.branching)} has "
                             f"{shape.num_nodes} nodes with the root; the design's tree verifier "
                             f"holds at most TreeConfig.max_nodes = {t.max_nodes}")
        fifo_schedule(shape.parents, fifo_depth=t.fifo_depth)
        gamma = DEFAULT_GAMMA if gamma is None else gamma
        return self.engine.generate(target=self.target, draft=self.draft, prompt=list(prompt_ids),
                                    tokens=tokens, tree=shape, gamma=gamma, source=self.model,
                                    speq=self._pair is not None)
