"""``specgen bench --only generate``: the README's ``specgen generate --engine rtl`` run, measured.

One generation on the simulated decoder core, every draft and target pass on it, the host
on its AXI4-Lite registers (:class:`gen.runtime.runtime.RtlEngine`): the cycles per token
beside the whole-step model's, the engines' busy and overlap counters (``PERF_*`` of
:class:`hw.decoder_top.DecoderTop`), and Verilator's throughput on the core (fabric
cycles simulated per second of wall time, the build excluded). :func:`generate_section`
writes them into ``docs/perf.md`` (``specgen bench --section generate``).
"""

import time

__all__ = ["RUN", "COMMAND", "HEADING", "benchmarks", "generate_section"]

#: The run: the README's command.
RUN = {"board": "sim", "model": "micro", "seed": 1, "prompt": (3, 1, 4), "tokens": 16,
       "tree": (2, 1), "gamma": 0.0, "draft": "speq"}
COMMAND = (f"specgen generate --board {RUN['board']} --model {RUN['model']} --seed {RUN['seed']} "
           f"--prompt-ids {','.join(map(str, RUN['prompt']))} --tokens {RUN['tokens']} "
           f"--tree {','.join(map(str, RUN['tree']))} --gamma {RUN['gamma']:g} --engine rtl")
#: The report's section.
HEADING = "## The decoder core end to end: `specgen generate --engine rtl`"


def _run():
    import contextlib
    import io

    from specgen.golden.config import preset
    from specgen.gen.runtime.runtime import RtlEngine, Runtime
    config = preset(RUN["board"])
    engine = RtlEngine(config=config)
    rt = Runtime(config=config, engine=engine)
    rt.load_model(RUN["model"], seed=RUN["seed"])
    rt.load_draft(RUN["draft"])
    # Build first (its time is not the simulation's): a one-token run on the same core.
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        rt.generate(list(RUN["prompt"]), 1, tree=RUN["tree"], gamma=RUN["gamma"])
    built = time.perf_counter() - t0
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        res = rt.generate(list(RUN["prompt"]), RUN["tokens"], tree=RUN["tree"],
                          gamma=RUN["gamma"])
    wall = time.perf_counter() - t0
    return res, engine, wall, built


def benchmarks():
    """Records of one generation (module docstring)."""
    res, engine, wall, built = _run()
    run = engine.last_run
    c = res.counters
    busy = c["perf_busy"]
    simulated = run["prefill_cycles"] + run["cycles"]
    # The bytes the core's AXI ports moved in the steps' programs (the prompt's excluded),
    # counted by the memory model beat by beat.
    steps = [p for p in run["programs"] if p["step"] is not None]
    read = sum(p["bytes_read"] for p in steps)
    written = sum(p["bytes_written"] for p in steps)
    draft = "SPEQ" if RUN["draft"] == "speq" else f"draft {RUN['draft']}"
    note = (f"{RUN['model']} LM (seed {RUN['seed']}), {draft}, tree "
            f"{','.join(map(str, RUN['tree']))}, {RUN['tokens']} tokens, "
            f"{res.mean_tokens_per_step:.2f} tokens/step; whole-step model "
            f"{res.model_cycles_per_token:,.1f} ({100 * res.model_error:+.2f} %); "
            f"{RUN['board']} preset, {res.clock_mhz:g} MHz, {engine.latency}-cycle reads, the "
            "host on the AXI4-Lite registers")
    return [
        {"name": "decoder core: specgen generate cycles/token", "value": round(
            res.cycles_per_token, 1), "unit": "cycles/token", "command": COMMAND, "note": note},
        {"name": "decoder core: linear engine busy", "value": round(c["perf_linear_busy"] / busy, 4),
         "unit": "fraction", "command": COMMAND,
         "note": f"PERF_LINEAR_BUSY {c['perf_linear_busy']:,} of PERF_BUSY {busy:,} cycles "
                 "(the steps' programs, the prompt's excluded)"},
        {"name": "decoder core: SSM engine busy", "value": round(c["perf_ssm_busy"] / busy, 4),
         "unit": "fraction", "command": COMMAND,
         "note": f"PERF_SSM_BUSY {c['perf_ssm_busy']:,} of PERF_BUSY {busy:,} cycles"},
        {"name": "decoder core: linear/SSM overlap (PERF_OVERLAP)", "value": c["perf_overlap"],
         "unit": "cycles", "command": COMMAND,
         "note": f"cycles with both engines busy, of {busy:,}: in each pass in_proj's last "
                 "jobs (z) beside the layer's SSM pass (and, with ssm.head_groups, the next "
                 "group's jobs beside a group's pass), and the target's commit beside the "
                 "draft's next node pass (its SSM replay while the linear engine works on the "
                 "pass)"},
        {"name": "decoder core: memory traffic", "value": round((read + written)
                                                                 / run["generated"]),
         "unit": "bytes/token", "command": COMMAND,
         "note": f"{read:,} bytes read and {written:,} written by the AXI ports over the "
                 f"steps' {len(steps)} programs, {run['generated']} tokens (the memory model "
                 "counts every beat; at paper scale `gen.perf.traffic` counts the same "
                 "bytes, `docs/perf-model.md`, stage traffic)"},
        {"name": "decoder core: Verilator throughput", "value": round(simulated / wall),
         "unit": "cycles/s", "command": COMMAND,
         "note": f"{simulated:,} fabric cycles (prompt and steps) in {wall:.1f} s of wall time, "
                 f"the build excluded (a first run built it in {built:.0f} s); -Os, no module "
                 "inlining (sim.runner.SPLIT_BUILD_BYTES), only the top's ports public to "
                 "VPI (sim.runner.VERILATOR_PUBLIC_FLAGS)"},
    ]


def generate_section(records):
    """The report's section from the records of :func:`benchmarks` (Markdown)."""
    rows = [r for r in records if r["name"].startswith("decoder core:")]
    if not rows:
        raise ValueError("generate_section: no decoder-core records (specgen bench --only "
                         "generate)")
    out = [HEADING, "",
           f"`{COMMAND}` on this machine: every draft and target pass on the simulated decoder "
           "core (`hw.decoder_top.DecoderTop`), the host on its registers. Counters are the "
           "top's `PERF_*` registers (`docs/regmap-core.md`); the throughput is Verilator's "
           "on the whole core.", "",
           "| figure | value | unit | note |", "|---|---:|---|---|"]
    for r in rows:
        v = r["value"]
        value = f"{v:,}" if isinstance(v, int) else f"{v:,.1f}" if abs(v) >= 100 else f"{v:g}"
        out.append(f"| {r['name'].removeprefix('decoder core: ')} | {value} | {r['unit']} | "
                   f"{r['note']} |")
    return "\n".join(out) + "\n"
