"""The model card of the shipped models, ``docs/models.md``, written from their manifest.

``python -m gen.models.card --out docs`` (the last step of ``make models``):
every figure comes from ``gen/models/data/manifest.json`` (what the training
run recorded) or from golden reading the shipped files, so nothing is typed
twice. No torch.
"""

import argparse
import io
import math
import sys
from pathlib import Path

import numpy as np

from specgen.gen.cli.output import write_files
from . import load_model, manifest, model_names

__all__ = ["write_card", "bsfp_profile", "LOSS_PLOT"]

LOSS_PLOT = "models-loss.png"


def bsfp_profile(lm):
    """What the model's FP16 weights look like to BSFP v1: per tensor kind, the range of
    biased FP16 exponents, the E3M0 misreads (remapped exponent collisions) and the
    scaling's inexact weights (:func:`golden.lm.speq_pair`, per-tensor scale)."""
    from specgen.golden.lm import speq_pair
    pair = speq_pair(lm)
    rows = []
    for name, t in pair.encoded.items():
        w = np.asarray(lm.tensors.get(name, lm.tensors["backbone.embedding.weight"]))
        bits = w.astype(np.float16).view(np.uint16)
        exp = (bits >> 10) & 0x1F
        nz = exp[bits & 0x7FFF != 0]
        rows.append((name, w.size, int(nz.min()), int(nz.max()), pair.misread[name],
                     pair.inexact[name], float(np.abs(w).max())))
    return rows


def _loss_png(records):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, rec in records.items():
        c = rec["curve"]
        tokens = np.array(c["step"]) * rec["batch"] * rec["seq"] / 1e6
        ax.plot(tokens, np.array(c["train"]) / math.log(2), label=f"{name} train")
        ax.plot(tokens, np.array(c["heldout"]) / math.log(2), "--", label=f"{name} held-out")
    ax.set_xlabel("training bytes (millions)")
    ax.set_ylabel("bits per byte")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def write_card(*, out):
    """Write ``models.md`` and its loss plot into folder ``out``."""
    man = manifest()
    corpus, records = man["corpus"], man["models"]
    L = []
    add = L.append
    add("# The shipped models: byte-level Mamba2 target and draft\n")
    add("Two small Mamba2 language models trained offline on this machine, in exactly the "
        "formulation of `golden/lm.py` (`MambaLM`), so golden loads their weights unchanged "
        "(`gen.models.load_model`). They replace random weights in the acceptance studies "
        "(`docs/acceptance.md`). Rebuild with `make models`, which writes this page last, "
        "from `gen/models/data/manifest.json`.\n")
    add("## Corpus\n")
    add(f"- Source: {corpus['source']}. Licence: {corpus['licence']}; the sources ship with the "
        f"interpreter (`LICENSE.txt` beside them), nothing was downloaded.")
    add("- Assembly (`gen/models/corpus.py`): the `*.py` files of the stdlib folder (no "
        "sub-packages, no `_sysconfigdata_*`), sorted by name; every 10th file is held out "
        "whole; each split is its files' bytes, each followed by a form feed.")
    add(f"- Train: {corpus['train_bytes']:,} bytes, sha256 `{corpus['sha256']['train']}`.")
    add(f"- Held-out: {corpus['heldout_bytes']:,} bytes, sha256 `{corpus['sha256']['heldout']}`.")
    add("- Tokens are bytes (vocabulary 256).\n")
    add("## Models\n")
    add("| | target | draft |" if set(records) == {"target", "draft"} else
        "| | " + " | ".join(records) + " |")
    add("|---|" + "---|" * len(records))
    lms = {n: load_model(n) for n in model_names()}

    def row(label, f):
        add(f"| {label} | " + " | ".join(f(n, records[n]) for n in records) + " |")

    row("d_model, n_layer", lambda n, r: f"{r['config']['d_model']}, {r['config']['n_layer']}")
    row("d_state, headdim, nheads", lambda n, r: f"{r['config']['d_state']}, "
        f"{r['config']['headdim']}, {lms[n].config.nheads}")
    row("parameters", lambda n, r: f"{sum(t.size for t in lms[n].tensors.values()):,}")
    def macs(n):
        t = lms[n].tensors
        return sum(v.size for k, v in t.items() if "proj" in k) + t["backbone.embedding.weight"].size

    row("linear MACs per token (projections, head)", lambda n, r: f"{macs(n):,}")
    row("file (FP16 safetensors)", lambda n, r: f"`{r['file']}`, {r['bytes']:,} B")
    row("sha256", lambda n, r: f"`{r['sha256'][:16]}…`")
    row("seed", lambda n, r: str(r["seed"]))
    row("steps × batch × window", lambda n, r: f"{r['steps']} × {r['batch']} × {r['seq']}")
    row("training bytes", lambda n, r: f"{r['train_tokens']:,}")
    row("AdamW lr, warm-up, decay, clip", lambda n, r: f"{r['lr']}, {r['warmup']}, "
        f"{r['weight_decay']}, {r['clip']}")
    row("machine", lambda n, r: r.get("machine", "not recorded"))
    row("wall time (1 thread)", lambda n, r: f"{r['wall_s'] / 60:.1f} min")
    row("held-out nats/byte (FP16)", lambda n, r: f"{r['heldout_nats_per_byte_fp16']:.4f}")
    row("held-out bits/byte (FP16)", lambda n, r: f"{r['heldout_nats_per_byte_fp16'] / math.log(2):.3f}")
    row("held-out perplexity (FP16)", lambda n, r: f"{math.exp(r['heldout_nats_per_byte_fp16']):.3f}")
    row("held-out perplexity (FP32)", lambda n, r: f"{math.exp(r['heldout_nats_per_byte_fp32']):.3f}")
    add("")
    add("Training: torch " + next(iter(records.values()))["torch"] + " on CPU, one thread, "
        "initialization `MambaLM.from_seed(config, seed)`, random windows of the train split, "
        "linear warm-up then cosine decay to a tenth of the rate, weight decay on matrices only. "
        "Perplexity is per byte over every disjoint 256-byte window of the held-out split; the "
        "FP16 row is the shipped weights. The curves' held-out points are the first "
        f"{next(iter(records.values()))['curve_heldout_windows']} windows.\n")
    add(f"![loss curves]({LOSS_PLOT})\n")
    add("## Same formulation as golden\n")
    add("`gen.models.train.check_against_golden`: the torch model (`TorchMambaLM`, whole-sequence "
        "scan in the quadratic form of the state-space duality) against golden on held-out "
        "sequences, largest absolute logit difference:\n")
    add("| | " + " | ".join(records) + " |")
    add("|---|" + "---|" * len(records))
    row("torch (FP16 weights) vs golden float64 `MambaLM.prefill`",
        lambda n, r: f"{r['check_against_golden']['max_abs_diff_same_fp16_weights']:.1e}")
    row("torch (trained FP32 weights) vs golden on the FP16 file",
        lambda n, r: f"{r['check_against_golden']['max_abs_diff_fp32_weights']:.1e}")
    row("torch vs golden hardware numerics (`Mamba2Mixer` `\"hw\"`)",
        lambda n, r: f"{r['check_against_golden']['max_abs_diff_hw']:.1e}")
    row("largest absolute logit", lambda n, r: f"{r['check_against_golden']['max_abs_logit']:.1f}")
    add("")
    ch = next(iter(records.values()))["check_against_golden"]
    add(f"({ch['sequences']} sequences of {ch['length']} bytes; the hardware row one of 64.) "
        "The first row is float32 against float64 arithmetic on identical weights; the second adds "
        "the FP16 rounding of the shipped file; the third the SSM unit's SiLU, softplus and exp "
        "tables. A formulation mismatch (a norm's place, the conv tap order, the scan) gives "
        "differences of the order of the logits. `tests/test_models.py` re-measures the held-out "
        "loss of the shipped files with golden alone (no torch) on "
        f"{next(iter(records.values()))['heldout_slice']['length']} bytes of the held-out split "
        f"from offset {next(iter(records.values()))['heldout_slice']['start']}.\n")
    add("## What the weights look like to BSFP\n")
    add("Per-tensor BSFP v1 of the target's linear layers (`golden.lm.speq_pair`): biased FP16 "
        "exponents present (non-zero weights), weights the E3M0 draft misreads as a remapped "
        "exponent, and weights the scaling does not keep exactly.\n")
    add("| tensor | weights | exponents | max abs | E3M0 misread | inexact |")
    add("|---|---|---|---|---|---|")
    for name, size, lo, hi, mis, inex, mx in bsfp_profile(lms["target"] if "target" in lms
                                                           else next(iter(lms.values()))):
        add(f"| `{name}` | {size:,} | {lo}–{hi} | {mx:.3f} | {mis} | {inex} |")
    add("")
    files = {"models.md": ("\n".join(L) + "\n").encode(), LOSS_PLOT: _loss_png(records)}
    return write_files(Path(out), files)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gen.models.card")
    ap.add_argument("--out", default="docs")
    args = ap.parse_args(argv)
    write_card(out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
