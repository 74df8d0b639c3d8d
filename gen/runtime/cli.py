"""``specgen generate``: a prompt in, tokens out, by speculative decoding on an engine of the runtime.

``specgen generate --board sim [--model PATH_OR_NAME] [--prompt TEXT | --prompt-ids 1,2,3]
[--tokens N] [--engine {rtl,golden}] [--draft speq|PATH_OR_NAME] [--draft-on {core,host}]
[--tree SHAPE] [--gamma G] [--json]``

It prints the tokens, their text (byte-level models) and the tokens per step;
``--json`` gives ``tokens``, ``tokens_per_step`` and ``cycles_per_token`` (``null``
for the golden and hw engines). ``--engine hw`` runs the decoder in the
accelerator's numerics (:class:`golden.decoder.HardwareLM`): the tokens an RTL run
must print. ``--engine rtl`` runs every target pass on a simulated decoder core
(:class:`gen.runtime.runtime.RtlEngine`; it builds the core for the model, minutes
on a cold cache) and also prints the cycles per token and the time at the design's
clock, and the whole-step model's cycles per token for the same programs beside them
(:mod:`gen.perf.program`; ``--json``: ``model_cycles_per_token``, ``model_error``).
"""

import json
import sys

from specgen.gen.cli.design import add_design_args, int_at_least
from specgen.gen.cli.errors import CLIError

__all__ = ["add_parser", "run", "DEFAULT_MODEL", "DEFAULT_PROMPT", "DEFAULT_TOKENS"]

#: The project's small model: the shipped byte-level target (docs/models.md).
DEFAULT_MODEL = "target"
#: A prompt from the shipped models' domain (Python sources).
DEFAULT_PROMPT = "def __init__(self"
#: Tokens to generate by default.
DEFAULT_TOKENS = 32


def add_parser(sub):
    """Add ``specgen generate`` to ``sub`` (an argparse subparsers object)."""
    from specgen.golden.speculative import DEFAULT_GAMMA

    from specgen.gen.runtime.runtime import (BACKENDS, DEFAULT_TREE, DRAFT_FLOWS, DRAFT_ON,
                                             ENGINES, SPEQ)

    p = sub.add_parser("generate", help="generate tokens from a prompt by speculative decoding "
                                        "(golden, hw or rtl engine)")
    add_design_args(p)
    p.add_argument("--model", default=DEFAULT_MODEL, metavar="PATH_OR_NAME",
                   help=f"target: a shipped model (target, draft), a seeded preset (micro, tiny, small) "
                        f"or a .npz/.safetensors file (default {DEFAULT_MODEL})")
    p.add_argument("--seed", type=int_at_least(0), default=0,
                   help="seed of a seeded preset (default 0)")
    p.add_argument("--prompt", metavar="TEXT",
                   help=f"prompt text for a byte-level model (default {DEFAULT_PROMPT!r})")
    p.add_argument("--prompt-ids", metavar="IDS", dest="prompt_ids",
                   help="prompt as comma-separated token ids (any model; default for a model "
                        "that is not byte-level: 0)")
    p.add_argument("--tokens", type=int_at_least(1), default=DEFAULT_TOKENS, metavar="N",
                   help=f"tokens to generate (default {DEFAULT_TOKENS})")
    p.add_argument("--engine", default="golden", metavar="ENGINE",
                   help=f"{', '.join(ENGINES)} (default golden: float64; hw: the accelerator's "
                        f"numerics, bit for bit; rtl: the decoder core on Verilator)")
    p.add_argument("--draft", default=SPEQ, metavar="speq|PATH_OR_NAME",
                   help="'speq': SPEQ self-speculation from the BSFP nibble plane (default); or a "
                        "draft model, named as --model")
    p.add_argument("--tree", metavar="SHAPE",
                   help=f"per-depth branching, e.g. {','.join(map(str, DEFAULT_TREE))} "
                        f"(default), or chainN")
    p.add_argument("--gamma", type=float, metavar="G",
                   help="SPEQ early stopping: a node whose draft probability is below G is not "
                        f"expanded (0 disables; default {DEFAULT_GAMMA})")
    p.add_argument("--draft-on", default=DRAFT_ON[0], choices=DRAFT_ON, dest="draft_on",
                   help="rtl engine: run the draft's passes on the decoder core (default) or "
                        "draft the tree on the host")
    p.add_argument("--draft-flow", default=DRAFT_FLOWS[0], choices=DRAFT_FLOWS,
                   dest="draft_flow",
                   help="rtl engine, draft on the core: one pass per expanded node from its "
                        "parent's state (node, default), or per depth one pass over every "
                        "node drafted so far (prefix)")
    p.add_argument("--backend", default=BACKENDS[0], choices=BACKENDS,
                   help="rtl engine: how the host reaches the decoder top's registers: "
                        "axi-lite (the simulation back-end, default) or mmio (the board "
                        "back-end's memory-mapped I/O class over a mapping that forwards to "
                        "the simulation)")
    p.add_argument("--json", action="store_true",
                   help="print JSON: tokens, tokens_per_step, cycles_per_token")
    p.set_defaults(func=run)
    return p


def _prompt_ids(args, lm):
    from specgen.gen.runtime.model import ModelError, encode_prompt, is_byte_level
    if args.prompt is not None and args.prompt_ids is not None:
        raise CLIError("give --prompt TEXT or --prompt-ids IDS, not both")
    if args.prompt_ids is not None:
        try:
            ids = [int(x) for x in args.prompt_ids.split(",")]
        except ValueError:
            ids = None
        if not ids or min(ids) < 0 or max(ids) >= lm.vocab:
            raise CLIError(f"--prompt-ids must be comma-separated integers in [0, {lm.vocab - 1}] "
                           f"(the model's vocab is {lm.vocab}), not {args.prompt_ids!r}")
        return ids
    if args.prompt is None and not is_byte_level(lm):
        return [0]
    try:
        return encode_prompt(DEFAULT_PROMPT if args.prompt is None else args.prompt, lm)
    except ModelError as exc:
        raise CLIError(f"--prompt: {exc} (--prompt-ids)") from None


def run(args, *, out=None):
    """Run ``specgen generate`` for parsed ``args``; print and return the result."""
    from specgen.gen.cli.design import resolve_config
    from specgen.gen.cli.progress import Progress
    from specgen.gen.perf.cli import parse_tree
    from specgen.gen.runtime.model import ModelError, decode_tokens
    from specgen.gen.runtime.runtime import (BACKENDS, DEFAULT_TREE, DRAFT_FLOWS, DRAFT_ON,
                                             ENGINES, Runtime)

    out = sys.stdout if out is None else out
    progress = Progress.from_args(args)
    if args.engine not in ENGINES:
        raise CLIError(f"unknown --engine {args.engine!r}; allowed: {', '.join(ENGINES)}")
    config = resolve_config(args)
    tree = parse_tree(args.tree) if args.tree else DEFAULT_TREE
    if args.gamma is not None and not 0.0 <= args.gamma <= 1.0:
        raise CLIError(f"--gamma must be in [0, 1], not {args.gamma:g}")
    engine = args.engine
    if engine == "rtl":
        from specgen.gen.runtime.runtime import RtlEngine
        if args.draft_on != "core" and args.draft_flow != DRAFT_FLOWS[0]:
            raise CLIError(f"--draft-flow {args.draft_flow} is for the draft on the core, not "
                           f"--draft-on {args.draft_on}")
        engine = RtlEngine(config=config, draft_on=args.draft_on, backend=args.backend,
                           draft_flow=args.draft_flow)
    elif args.draft_on != DRAFT_ON[0]:
        raise CLIError(f"--draft-on {args.draft_on} is for --engine rtl, not {args.engine}")
    elif args.draft_flow != DRAFT_FLOWS[0]:
        raise CLIError(f"--draft-flow {args.draft_flow} is for --engine rtl, not {args.engine}")
    elif args.backend != BACKENDS[0]:
        raise CLIError(f"--backend {args.backend} is for --engine rtl, not {args.engine}")
    rt = Runtime(config=config, engine=engine)
    try:
        progress.status(f"loading {args.model}")
        rt.load_model(args.model, seed=args.seed)
        if args.draft != "speq":
            progress.status(f"loading draft {args.draft}")
        rt.load_draft(args.draft, seed=args.seed)
    except ModelError as exc:
        flag = "--model" if rt.model is None else "--draft"
        raise CLIError(f"{flag}: {exc}") from None
    prompt = _prompt_ids(args, rt.model)
    progress.status(f"generating {args.tokens} tokens on the {args.engine} engine "
                    f"(tree {','.join(map(str, tree))}, draft {rt.draft_label})")
    try:
        res = rt.generate(prompt, args.tokens, tree=tree, gamma=args.gamma)
    except ModelError as exc:
        flag = "--draft" if getattr(exc, "who", "target") == "draft" else "--model"
        raise CLIError(f"{flag}: {exc}") from None
    except ValueError as exc:
        # The tree checks against the design's verifier name TreeConfig: say which flags.
        raise CLIError(f"--tree {','.join(map(str, tree))}: {exc} (--set tree.max_nodes, "
                       f"--set tree.fifo_depth)") from None
    text = decode_tokens(res.tokens, rt.model)
    if args.json:
        doc = res.to_dict()
        doc.update(model=rt.model_label, draft=rt.draft_label, board=config.board.name,
                   tree=list(tree), prompt_tokens=prompt, text=text)
        print(json.dumps(doc), file=out)
        return res
    c = rt.model.config
    lines = [f"specgen generate: {args.engine} engine, model {rt.model_label} ({c.n_layer} layers, "
             f"d_model {c.d_model}, vocab {c.vocab}), draft {rt.draft_label}, tree "
             f"{','.join(map(str, tree))}, board {config.board.name}"]
    ptext = decode_tokens(prompt, rt.model)
    if ptext is not None:
        lines.append(f"prompt: {ptext!r}")
    lines.append(f"prompt tokens: {' '.join(map(str, prompt))}")
    lines.append(f"tokens: {' '.join(map(str, res.tokens))}")
    if text is not None:
        lines.append(f"text: {text!r}")
    lines.append(f"tokens per step: {' '.join(map(str, res.tokens_per_step))} (mean "
                 f"{res.mean_tokens_per_step:.2f} over {len(res.tokens_per_step)} target passes)")
    if res.cycles_per_token is not None:
        us = res.cycles_per_token / res.clock_mhz
        lines.append(f"cycles per token: {res.cycles_per_token:.1f} ({us:.2f} us a token, "
                     f"{1e6 / us:,.0f} tokens/s at the design's {res.clock_mhz:g} MHz; "
                     + (f"the draft's passes ({res.draft_flow} flow) and the target's, all "
                        "on the core)" if res.draft_on_core
                        else "the target passes only, the draft is the host's)"))
    if res.counters:
        c = res.counters
        busy = max(c["perf_busy"], 1)
        lines.append(f"engines (PERF counters over the steps' programs): linear busy "
                     f"{100 * c['perf_linear_busy'] / busy:.1f} %, SSM busy "
                     f"{100 * c['perf_ssm_busy'] / busy:.1f} %, both at once (PERF_OVERLAP) "
                     f"{c['perf_overlap']:,} cycles of {c['perf_busy']:,}; registers over "
                     f"{res.backend}")
    if res.model_cycles_per_token is not None:
        lines.append(f"whole-step model: {res.model_cycles_per_token:.1f} cycles per token "
                     f"({100 * res.model_error:+.2f} % against the RTL; gen.perf.program)")
    print("\n".join(lines), file=out)
    return res
