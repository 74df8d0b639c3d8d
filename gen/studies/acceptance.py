"""``specgen acceptance``: measured speculative-decoding acceptance on the shipped models.

``specgen acceptance [--model M] [--draft speq|MODEL] [--tree SHAPE] [--gamma G]
[--bsfp FORMAT] [--group-size N] [--prompts N] [--prompt-len N] [--tokens N] [--json]``

Runs the golden speculative decoder (:func:`golden.speculative.speculative_generate`,
greedy: lossless, deterministic) from held-out prompts of the training corpus
(:mod:`gen.models.corpus`) and reports

* tokens per step (SpecMamba's tokens/step: accepted drafts + 1);
* per-depth acceptance rates: at depth ``d``, of the steps whose accepted path
  reached a node at depth ``d − 1`` that the draft expanded, the fraction that
  accepted a child (:func:`per_depth_acceptance`; the profile a performance
  model multiplies out);
* the draft length after SPEQ's early stopping (deepest drafted node) and the
  tree size the target verified;
* draft/target agreement: the fraction of held-out positions where the
  draft's and the target's argmax agree (teacher-forced on the real text).

``--draft speq`` is SPEQ self-speculation (:func:`golden.lm.speq_pair`): the
target computes with the FP16 weights reconstructed from BSFP, the draft with
the nibble plane of the same words (``--bsfp``, ``--group-size``); otherwise the
draft is another shipped model and the target uses its FP16 weights as stored.
"""

import json
import sys
import time

import numpy as np

from specgen.gen.cli.errors import CLIError

__all__ = ["run", "heldout_prompts", "per_depth_acceptance", "agreement",
           "build_pair", "measure"]

SPEQ = "speq"
DEFAULT_TREE = {SPEQ: (1,) * 8, "model": (2, 2, 1, 1)}


def heldout_prompts(*, n, length, extra=0):
    """``n`` prompts of ``length`` bytes (plus ``extra`` following bytes) from the held-out
    split, evenly spaced, each starting at a line start."""
    from specgen.gen.models import manifest
    from specgen.gen.models.corpus import load_corpus
    data = load_corpus(expect={"heldout": manifest()["corpus"]["sha256"]["heldout"]})["heldout"]
    out = []
    for i in range(n):
        at = data.find(b"\n", (len(data) - length - extra - 1) * i // max(n, 1)) + 1
        out.append(list(data[at:at + length + extra]))
    return out


def per_depth_acceptance(result):
    """``(rates, trials)`` per depth 1 … max from a :class:`golden.speculative.SpecResult`.

    At depth ``d`` a *trial* is a step whose accepted path reached depth ``d − 1``
    at a node the draft expanded; it succeeds if the path goes on to depth ``d``.
    A depth with no trial has rate ``None``.
    """
    depth = max(result.draft_depth_per_step, default=0)
    trials, hits = np.zeros(depth, dtype=np.int64), np.zeros(depth, dtype=np.int64)
    for a, leaf in zip(result.accepted_per_step, result.path_at_leaf_per_step):
        trials[:a] += 1
        hits[:a] += 1
        if not leaf:
            trials[a] += 1
    rates = [float(h / t) if t else None for h, t in zip(hits, trials)]
    return rates, [int(t) for t in trials]


def agreement(target, draft, sequences):
    """Fraction of positions of ``sequences`` where the draft's argmax equals the target's."""
    same = total = 0
    for seq in sequences:
        lt, _ = target.prefill(seq)
        ld, _ = draft.prefill(seq)
        same += int(np.count_nonzero(lt.argmax(-1) == ld.argmax(-1)))
        total += len(seq)
    return same / total


def build_pair(*, model, draft, bsfp="E3M0", group_size=None):
    """``(target, draft)`` MambaLMs: a SPEQ pair of shipped ``model``, or two shipped models."""
    from specgen.golden.bsfp import BSFPConfig
    from specgen.golden.lm import speq_pair

    from specgen.gen.models import load_model
    target = load_model(model)
    if draft == SPEQ:
        pair = speq_pair(target, bsfp=BSFPConfig(draft=bsfp, group_size=group_size))
        return pair.target, pair.draft
    return target, load_model(draft)


def measure(target, draft, prompts, *, tokens, tree, gamma, agree_len=None):
    """Run the golden speculative decoder over ``prompts``; the report as a dict."""
    from specgen.golden.speculative import SpecResult, speculative_generate
    t0 = time.perf_counter()
    runs = [speculative_generate(target, draft, p, tokens, tree=tree, gamma=gamma,
                                 tile_size=target.config.state_elems) for p in prompts]
    fields = ("tokens_per_step", "accepted_per_step", "nodes_per_step", "draft_depth_per_step",
              "path_at_leaf_per_step")
    joined = SpecResult(**{f: sum((getattr(r, f) for r in runs), ()) for f in fields},
                        tokens=(), peak_live_per_step=(), max_onchip_bytes=0)
    rates, trials = per_depth_acceptance(joined)
    agree = agreement(target, draft, [p[:agree_len] for p in prompts]) if agree_len else None
    return {
        "tokens_per_step": joined.mean_tokens_per_step,
        "accepted_per_step": joined.mean_accepted,
        "per_depth_acceptance": rates,
        "per_depth_trials": trials,
        "draft_length": float(np.mean(joined.draft_depth_per_step)),
        "nodes_per_step": float(np.mean(joined.nodes_per_step)),
        "agreement": agree,
        "steps": joined.steps,
        "generated": [list(r.tokens) for r in runs],
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def _positive(name, value):
    if value < 1:
        raise CLIError(f"--{name} must be an integer >= 1, not {value}")


def run(args, *, out=None):
    """Measure for parsed ``args`` and print the report."""
    from specgen.golden.bsfp import DRAFT_FORMATS

    from specgen.gen.models import model_names
    from specgen.gen.perf.cli import parse_tree
    out = sys.stdout if out is None else out
    names = model_names()
    if args.model not in names:
        raise CLIError(f"unknown --model {args.model!r}; allowed: {', '.join(names)}")
    if args.draft != SPEQ and args.draft not in names:
        raise CLIError(f"unknown --draft {args.draft!r}; allowed: {', '.join((SPEQ,) + names)}")
    if args.bsfp not in DRAFT_FORMATS:
        raise CLIError(f"unknown --bsfp {args.bsfp!r}; allowed: {', '.join(DRAFT_FORMATS)}")
    if not 0.0 <= args.gamma <= 1.0:
        raise CLIError(f"--gamma must be in [0, 1], not {args.gamma}")
    for name in ("prompts", "prompt_len", "tokens"):
        _positive(name.replace("_", "-"), getattr(args, name))
    if args.group_size is not None:
        _positive("group-size", args.group_size)
    tree = parse_tree(args.tree) if args.tree else DEFAULT_TREE[SPEQ if args.draft == SPEQ else "model"]
    target, draft = build_pair(model=args.model, draft=args.draft, bsfp=args.bsfp,
                               group_size=args.group_size)
    prompts = heldout_prompts(n=args.prompts, length=args.prompt_len)
    report = {"model": args.model, "draft": args.draft, "tree": list(tree), "gamma": args.gamma,
              "bsfp": args.bsfp if args.draft == SPEQ else None,
              "group_size": args.group_size if args.draft == SPEQ else None,
              "prompts": args.prompts, "prompt_len": args.prompt_len, "tokens": args.tokens,
              **measure(target, draft, prompts, tokens=args.tokens, tree=tree, gamma=args.gamma,
                        agree_len=args.prompt_len)}
    if args.json:
        print(json.dumps(report), file=out)
    else:
        rates = ", ".join("-" if r is None else f"{r:.3f}" for r in report["per_depth_acceptance"])
        draft = f"speq {args.bsfp}" + (f" g{args.group_size}" if args.group_size else "") \
            if args.draft == SPEQ else args.draft
        print(f"target {args.model}, draft {draft}, tree {','.join(map(str, tree))}, "
              f"gamma {args.gamma}: {report['steps']} steps over {args.prompts} prompts\n"
              f"  tokens/step          {report['tokens_per_step']:.3f}\n"
              f"  per-depth acceptance {rates}\n"
              f"  draft length         {report['draft_length']:.2f} (nodes/step "
              f"{report['nodes_per_step']:.2f})\n"
              f"  draft/target argmax agreement {report['agreement']:.3f}\n"
              f"  wall {report['wall_s']} s", file=out)
    return report
