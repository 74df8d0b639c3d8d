"""``docs/backtracking.md``: the backtracking policies' traffic and compute, against SpecMamba's claims.

:func:`write_backtrack_table` evaluates :mod:`golden.backtrack_cost` for the
Mamba2 sizes (130M … 2.7B) and the notes' tree shapes
(:func:`golden.tree.seed_shapes`), compares the draft/target combinations of
:data:`golden.backtrack.SYSTEM_POLICIES` with the notes' claims (−63 % memory
traffic against storing every state, −41 % compute against recomputing
everything) and writes the page. Same code, same bytes; the file is replaced
atomically.
"""

from collections import Counter

from specgen.golden.backtrack import POLICIES, SYSTEM_POLICIES, MixerConfig
from specgen.golden.backtrack_cost import (SEED_CLAIMS, SEED_TOKENS_PER_STEP, SEED_VHK158_ONCHIP_BYTES,
                                   backtrack_cost, input_nbytes, intermediates_nbytes, replay_macs,
                                   state_nbytes, step_macs, system_cost, update_macs)
from specgen.golden.config import preset
from specgen.golden.mamba2 import MAMBA2_SIZES
from specgen.golden.tree import TreeShape, seed_shapes

from specgen.gen.cli.output import write_files
from specgen.gen.perf.claims import SEED

__all__ = ["COMMAND", "FILENAME", "SEED_PAIR", "backtrack_markdown", "write_backtrack_table"]

COMMAND = "specgen backtrack-cost --out docs"
FILENAME = "backtracking.md"

#: The SpecMamba notes' pairing: a 370M draft for a 2.7B target.
SEED_PAIR = ("370M", "2.7B")

#: Points of the margin a figure may miss a claim by and still "match" it.
TOLERANCE = 0.05

_SIZES = tuple(MAMBA2_SIZES)


def _mb(b):
    return f"{b / 1e6:,.1f}"


def _gmac(m):
    return f"{m / 1e9:,.3f}"


def _pct(x):
    """A signed change in percent; ``None`` for the baseline itself."""
    if x is None:
        return "baseline"
    return f"{x * 100:+.0f} %".replace("-", "−")


def _saving(new, old):
    return 1.0 - new / old


def _chain(nodes):
    """A chain tree of ``nodes`` nodes: same node count, depth ``nodes − 1`` (any path length)."""
    return TreeShape((1,) * (nodes - 1))


def _seed_groups():
    """The notes' tree shapes by node count: ``{n: (shapes, max depth)}``; costs depend on ``n`` and ``L`` only."""
    groups = {}
    for s in seed_shapes():
        groups.setdefault(s.num_nodes, []).append(s)
    return {n: (shapes, max(s.depth for s in shapes)) for n, shapes in sorted(groups.items())}


def _verdict(lo, hi, claim):
    """How a range of savings compares with a claimed saving (± :data:`TOLERANCE`)."""
    if hi < claim - TOLERANCE:
        return "not supported"
    if lo > claim + TOLERANCE:
        return "exceeded"
    if lo >= claim - TOLERANCE and hi <= claim + TOLERANCE:
        return "supported"
    return "partly supported"


def _per_model_table(groups, L):
    head = ("| model | nodes n | store: off chip | replay: on chip / off chip | replay: held | "
            "replay: GMAC | recompute: off chip | recompute: GMAC | recompute-state: off chip | "
            "recompute-state: GMAC |\n|---|---|---|---|---|---|---|---|---|---|")
    rows = [head]
    for size in _SIZES:
        mix = MixerConfig.from_model(size)
        for n, (shapes, depth) in groups.items():
            c = {k: backtrack_cost(p, mix, tree=shapes[0], tokens=L) for k, p in POLICIES.items()}
            held = c["replay"].held["on_chip"]
            fits = "fits" if held <= SEED_VHK158_ONCHIP_BYTES else "**exceeds**"
            rows.append(
                f"| {size} | {n} | {_mb(c['store'].off_chip)} | {_mb(c['replay'].on_chip)} / "
                f"{_mb(c['replay'].off_chip)} | {_mb(held)} ({fits}) | {_gmac(c['replay'].macs)} | "
                f"{_mb(c['recompute'].off_chip)} | {_gmac(c['recompute'].macs)} | "
                f"{_mb(c['recompute-state'].off_chip)} | {_gmac(c['recompute-state'].macs)} |")
    return "\n".join(rows)


def _system(pair, tree, L):
    d, t = (MixerConfig.from_model(s) for s in pair)
    return {k: system_cost(p, draft=d, target=t, tree=tree, tokens=L) for k, p in SYSTEM_POLICIES.items()}


def _system_table(groups, L):
    head = ("| nodes n | combination (draft / target) | off chip MB | on chip MB | traffic vs pure-store "
            "| restore GMAC | compute vs pure-recompute | tree pass GMAC |\n"
            "|---|---|---|---|---|---|---|---|")
    rows = [head]
    for n, (shapes, _) in groups.items():
        c = _system(SEED_PAIR, shapes[0], L)
        store, rec = c["pure-store"], c["pure-recompute"]
        for k, v in c.items():
            p = SYSTEM_POLICIES[k]
            dt = None if k == "pure-store" else -_saving(v.traffic, store.traffic)
            dm = None if k == "pure-recompute" else -_saving(v.macs, rec.macs)
            rows.append(f"| {n} | `{k}` ({p.draft.name} / {p.target.name}) | {_mb(v.off_chip)} | "
                        f"{_mb(v.on_chip)} | {_pct(dt)} | {_gmac(v.macs)} | {_pct(dm)} | "
                        f"{_gmac(v.pass_macs)} |")
    return "\n".join(rows)


def _tokens_table(n):
    tree = _chain(n)
    head = ("| committed tokens L | `pure-store` MB | `hybrid` MB off / on chip | `pure-recompute` GMAC "
            "| `hybrid` GMAC | `hybrid-selective` GMAC | tree pass GMAC |\n|---|---|---|---|---|---|---|")
    rows = [head]
    for L in (1, 2, 3, 4, SEED_TOKENS_PER_STEP, 6):
        c = _system(SEED_PAIR, tree, L)
        h = c["hybrid"]
        share = lambda v: f"{_gmac(v.macs)} ({v.macs / v.pass_macs * 100:.0f} %)"  # noqa: E731
        rows.append(f"| {L} | {_mb(c['pure-store'].traffic)} | {_mb(h.off_chip)} / {_mb(h.on_chip)} | "
                    f"{share(c['pure-recompute'])} | {share(h)} | {share(c['hybrid-selective'])} | "
                    f"{_gmac(h.pass_macs)} |")
    return "\n".join(rows)


def _pairs():
    out = [(a, b) for i, a in enumerate(_SIZES) for b in _SIZES[i:]]
    return sorted(out, key=lambda p: (_SIZES.index(p[1]), _SIZES.index(p[0])))


def _pairs_table(n, L):
    tree = _chain(n)
    head = ("| draft → target | `hybrid` traffic vs pure-store | `hybrid-draft-stores` traffic vs "
            "pure-store | `hybrid` compute vs pure-recompute | `hybrid-selective` compute vs "
            "pure-recompute | draft MACs / target MACs |\n|---|---|---|---|---|---|")
    rows = [head]
    for d, t in _pairs():
        c = _system((d, t), tree, L)
        s, r = c["pure-store"], c["pure-recompute"]
        ratio = r.draft.macs / r.target.macs
        tag = " (self-draft, SPEQ-style)" if d == t else ""
        rows.append(f"| {d} → {t}{tag} | {_pct(-_saving(c['hybrid'].traffic, s.traffic))} | "
                    f"{_pct(-_saving(c['hybrid-draft-stores'].traffic, s.traffic))} | "
                    f"{_pct(-_saving(c['hybrid'].macs, r.macs))} | "
                    f"{_pct(-_saving(c['hybrid-selective'].macs, r.macs))} | {ratio:.2f} |")
    return "\n".join(rows)


def _dims_table():
    head = ("| model | d_model | layers | nheads | S: state per layer | ℓ: light per node, layer "
            "| I: input per node, layer | F: MACs/token, layer | U | R |\n"
            "|---|---|---|---|---|---|---|---|---|---|")
    rows = [head]
    for size in _SIZES:
        m = MixerConfig.from_model(size)
        rows.append(f"| {size} | {m.d_model} | {m.n_layer} | {m.nheads} | {state_nbytes(m):,} B | "
                    f"{intermediates_nbytes(m):,} B | {input_nbytes(m):,} B | {step_macs(m):,} | "
                    f"{update_macs(m):,} | {replay_macs(m):,} |")
    return "\n".join(rows)


def backtrack_markdown():
    """The whole page, as a string."""
    L = SEED_TOKENS_PER_STEP
    groups = _seed_groups()
    counts = Counter(s.num_nodes for s in seed_shapes())
    ns = list(groups)
    lo_n, hi_n = ns[0], ns[-1]
    seed = {n: _system(SEED_PAIR, shapes[0], L) for n, (shapes, _) in groups.items()}

    def span(key, metric, base):
        vals = [_saving(getattr(c[key], metric), getattr(c[base], metric)) for c in seed.values()]
        return min(vals), max(vals)

    t_h = span("hybrid", "traffic", "pure-store")
    t_ds = span("hybrid-draft-stores", "traffic", "pure-store")
    c_h = span("hybrid", "macs", "pure-recompute")
    c_sel = span("hybrid-selective", "macs", "pure-recompute")
    c_ds = span("hybrid-draft-stores", "macs", "pure-recompute")
    t_sel = span("hybrid-selective", "traffic", "pure-store")
    t_pr = span("pure-recompute", "traffic", "pure-store")
    claim_t, claim_c, claim_s = (SEED_CLAIMS[k] for k in
                                 ("traffic_vs_store", "compute_vs_recompute", "selective_recompute"))
    r = lambda x: f"{x * 100:.0f} %"  # noqa: E731
    rng = lambda a: f"{r(min(a))}–{r(max(a))}" if r(a[0]) != r(a[1]) else r(a[0])  # noqa: E731

    dmix, tmix = (MixerConfig.from_model(s) for s in SEED_PAIR)
    draft_held = [seed[n]["hybrid"].draft.held["on_chip"] for n in ns]
    replay_restore = seed[hi_n]["hybrid"].draft.macs
    ssm_dsp, ssm_clock = SEED["ssm_dsp_vhk158"], preset("vhk158").board.clock_mhz * 1e6
    restore_time = replay_restore / (ssm_dsp * ssm_clock)
    # Readings of the notes' "78 % less recompute".
    path_vs_tree = (1 - L / hi_n, 1 - L / lo_n)
    dep = 1 - update_macs(tmix) / step_macs(tmix)
    both = (1 - L / lo_n * (1 - dep), 1 - L / hi_n * (1 - dep))
    readings = (*path_vs_tree, dep, *both)
    close = [x for x in readings if abs(x - claim_s) <= TOLERANCE]
    reading_verdict = ("matched by one of our readings" if close else
                       f"no reading we tried gives it within ±{TOLERANCE * 100:.0f} points")
    # Draft/target MAC ratio at which hybrid's compute saving equals the claim (replay ≈ 0).
    need_ratio = claim_c / (1 - claim_c)
    pair_ratio = (L * dmix.n_layer * step_macs(dmix)) / (L * tmix.n_layer * step_macs(tmix))

    shapes_line = ", ".join(f"n = {n}: {counts[n]} shapes" for n in ns)
    text = f"""# State backtracking: policies, traffic and compute

After a speculative step, draft and target must each continue from the state
after the last accepted token, but a Mamba layer overwrites its state with
every token. This page compares four ways to get that state back, with the
cost model `golden/backtrack_cost.py` and the instrumented policies of
`golden/backtrack.py`, against SpecMamba's (arXiv 2509.19873) hybrid-backtracking claims as its
design notes give them ([sources](sources.md#notes)).
Regenerate with `{COMMAND}`.

**Headline** (370M draft, 2.7B target, the notes' trees of n = {lo_n}–{hi_n}
nodes, L = {L} committed tokens per step, binary32 state and intermediates).
Against storing every node's state, the notes' hybrid (draft replays light
intermediates, target re-runs the accepted path) cuts backtracking traffic by
{rng(t_h)}: the notes' −{r(claim_t)} is {_verdict(*t_h, claim_t)}, and matched
({rng(t_ds)}) if the draft stores full states instead. Against re-running both
models on the accepted path, it cuts restore compute by only {rng(c_h)}: the
notes' −{r(claim_c)} is {_verdict(*c_h, claim_c)} for this pairing. It would
hold for a draft costing about {need_ratio:.2f} of the target per token, or
if the target re-ran only the state's dependencies ({rng(c_sel)}).

## What is restored

One Mamba2 layer's decode state is the SSM state `h` (nheads × headdim ×
d_state) and the causal-conv1d window (the last d_conv − 1 = 3 raw xBC rows,
each d_inner + 2·d_state wide). A tree of `n` nodes (root included) passes
through the layer breadth-first, each node from its parent's state. Greedy
acceptance picks a path of `L` nodes from the root (`L` = tokens committed by
the step, accepted drafts + 1, `1 ≤ L ≤ depth + 1`); the state to restore is
the one after the path's last node. `L = 1` is "nothing accepted" (the root
token still advances the state); `L = depth + 1` is "whole path accepted".

| policy | kept during the pass, per node and layer | restore |
|---|---|---|
| (a) `store` | full state, S bytes, off chip | re-point the accepted node's slot as the committed state (no copy) |
| (b) `replay` | light intermediates xBC, x, B, Δ, dA: ℓ bytes, on chip (the notes' placement) | read the checkpoint (S), replay `h ← dA·h + (Δ·x)·B` and shift the conv window for the L path nodes, write the result (S) |
| (c) `recompute` | nothing | read the checkpoint, re-run the whole layer on the L path tokens, write the result |
| (c′) `recompute-state` | the layer input, I bytes, off chip | read the checkpoint, re-run only what the state depends on (xBC and dt rows of `in_proj`, conv, dt path, update), write the result |
| (d) `hybrid` | draft: (b); target: (c) | both |

The checkpoint is the committed state the step started from; the pass never
overwrites it (node states live in the FIFO ring), so keeping it is free and
reading it back is counted.

Every policy restores the sequential run bit for bit: `tests/test_golden_backtrack.py`
runs random trees and acceptance outcomes (including nothing and everything
accepted) through each policy with the SSM unit's numerics (`ssm_step_hw`,
binary32 and binary16 state) and in float64 (the layer of `golden/lm.py`,
`golden/mixer.py`) and compares the restored conv window and SSM state with a
plain sequential run by their bits; the same for every layer of a whole
language model at once (`LMRecurrence`). `speculative_generate` takes the
policy as a parameter (`backtrack=`); `tests/test_golden_speculative.py`
checks that every policy gives the target's greedy sequence and restores
both models' states to the same bits.

## The cost model

Per step and per model, summed over layers. s, v: bytes per state element and
per other value (binary32 throughout, as the SSM unit: 4 and 4).

- `S = E·s + (d_conv − 1)·conv_dim·v`, `E = nheads·headdim·d_state`, `conv_dim = d_inner + 2·d_state`
- `ℓ = (conv_dim + d_inner + d_state + 2·nheads)·v`, `I = d_model·v`
- `F = d_model·(d_in_proj + d_inner + 3) + d_conv·conv_dim + nheads + 6·d_inner + 3·E`
  (block norm, `in_proj`, conv, dt·A, Δ·x, D·x, gate, dA·h, u·B, h·C, gated norm, `out_proj`)
- `U = d_model·(conv_dim + nheads + 3) + d_conv·conv_dim + nheads + d_inner + 2·E`
- `R = d_inner + 2·E`

| policy | stored | loaded | restore MACs |
|---|---|---|---|
| `store` | n·S off chip | — | — |
| `replay` | n·ℓ on chip + S off chip | L·ℓ on chip + S off chip | L·R |
| `recompute` | S off chip | S off chip | L·F |
| `recompute-state` | n·I + S off chip | L·I + S off chip | L·U |

A MAC is one multiply, with or without its add; table look-ups (softplus, exp,
SiLU), additions, divisions and square roots are not counted. The tree pass
costs n·F for every policy and is not part of the backtracking cost. Costs are
linear in L, so the cost at the notes' mean L = {L} is the mean cost.

**Checked by counting.** The policies in `golden/backtrack.py` keep and read
every array through a counting memory and do every multiply of the layer
through a counting meter (the SSM step's multiplies are charged per its
contract in `golden/mamba2.py`). On small layers and random trees the counted
bytes, by location, and MACs, pass and restore, equal these formulas exactly.

**Assumptions.** (1) The draft runs every tree node, leaves included, so each
node has a state or intermediates to keep. (2) A full state is written off
chip (2.7B: {_mb(state_nbytes(tmix))} MB per layer per node). (3) The seed
keeps the draft's intermediates on chip; the column "held" shows what that
takes against the {_mb(SEED_VHK158_ONCHIP_BYTES)} MB of BRAM and URAM the
notes' whole VHK158 design instantiates (1,534 × 36 Kb + 428 × 288 Kb).
(4) Recompute (scope "layer") is a re-run of the model stack, so each layer
re-runs completely and takes its input from the layer below (no input is
kept); its weights are assumed already streaming (the re-run shares the next
verification pass's weight sweep). Run on its own, a re-run re-reads every
weight: about 5.4 GB for 2.7B in FP16, more than any policy here moves.
(5) Weights, logits, the embedding and the LM head are not backtracking costs.

## Dimensions

{_dims_table()}

## Per model, the notes' tree shapes, L = {L}

The notes' shapes (branching 2–3, depth 4–5, 12–16 draft tokens; `golden.tree.seed_shapes`)
have {shapes_line}. Costs depend on a shape only through n (and its depth, which bounds
L), so one row per n covers them all. Bytes in MB (10⁶), compute in GMAC (10⁹), per
speculative step, all layers of one model.

{_per_model_table(groups, L)}

## Draft and target together: the notes' {SEED_PAIR[0]} draft for {SEED_PAIR[1]}, L = {L}

`pure-store` and `pure-recompute` are the notes' baselines; `hybrid` is its
scheme (d); `hybrid-draft-stores` is the third-party reading in which the draft
stores full states; `hybrid-selective` restricts the target's re-run to the
state's dependencies, which then needs the layer inputs kept.

{_system_table(groups, L)}

### Against the committed tokens L (n = {hi_n}, 370M → 2.7B)

{_tokens_table(hi_n)}

### Other pairings (n = {hi_n}, L = {L})

{_pairs_table(hi_n, L)}

## The notes' claims, one by one

- **Memory traffic, −{r(claim_t)} against storing every state: {_verdict(*t_h, claim_t)}.**
  The notes' hybrid moves {rng(t_h)} fewer bytes than `pure-store` over the
  notes' trees (370M → 2.7B, L = {L}). Nearly all of it is the target's: its
  re-run moves 2·S per layer instead of n·S, and `pure-recompute` saves as
  much ({rng(t_pr)}); the draft's replay adds on-chip traffic. The claimed
  size is what the third-party reading gives, the draft storing full states
  (`hybrid-draft-stores`): {rng(t_ds)}, {_verdict(*t_ds, claim_t)} within
  ±{TOLERANCE * 100:.0f} points.
- **Compute, −{r(claim_c)} against recomputing everything: {_verdict(*c_h, claim_c)}.**
  The notes' hybrid saves {rng(c_h)} of the restore MACs of `pure-recompute`.
  It only replaces the draft's re-run by a replay, and a 370M draft costs
  {pair_ratio:.2f} of a 2.7B target per token; with a replay almost free the
  saving is about r/(1 + r) for a draft/target ratio r, so {r(claim_c)} needs
  r ≈ {need_ratio:.2f} (the self-draft rows, SPEQ's BSFP draft of the same
  model, save about half). A draft storing full states saves the same
  ({rng(c_ds)}). Restricting the target's re-run to the state's dependencies
  (`hybrid-selective`) saves {rng(c_sel)}, more than claimed, with traffic
  {rng(t_sel)} below `pure-store`. Percentages of restore MACs do not depend
  on L: every policy's restore work is proportional to it.
- **"78 % less recompute" in the target: {reading_verdict}.**
  Recomputing only the accepted path instead of every tree node saves
  1 − L/n = {rng(path_vs_tree)}; recomputing only the state's dependencies
  instead of the whole 2.7B layer saves {r(dep)}; both together
  {rng(both)}. The seed does not say what the {r(claim_s)} is relative to.
- **Draft restore under 100 ns: not plausible for a replay.** A replay of
  L = {L} tokens through the 370M draft's {dmix.n_layer} layers is
  {replay_restore / 1e6:,.0f} M MACs; at one MAC per DSP per cycle on the
  notes' 1,068 SSM-unit DSPs at 250 MHz that takes at least
  {restore_time * 1e3:.2f} ms. Only a pointer switch between stored states
  is that fast.
- **Intermediates on chip.** The 370M draft's intermediates for a whole tree
  take {_mb(min(draft_held))}–{_mb(max(draft_held))} MB in binary32, against
  {_mb(SEED_VHK158_ONCHIP_BYTES)} MB of BRAM and URAM in the notes' whole
  design: they fit only by taking most of it (half as much in binary16).
"""
    return text


def write_backtrack_table(*, out):
    """Write ``<out>/backtracking.md`` atomically.

    Parameters
    ----------
    out : str or os.PathLike
        Output folder, created if missing.

    Returns
    -------
    pathlib.Path
        The file written. The same call twice writes the same bytes.

    Raises
    ------
    CLIError
        If ``out`` is not a folder or cannot be written.
    """
    (path,) = write_files(out, {FILENAME: backtrack_markdown().encode("utf-8")})
    return path
