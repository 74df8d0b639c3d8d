"""Training recipe of the shipped models (``make models``): byte-level Mamba2 LMs in torch.

The only module of the project that imports torch (the optional extra
``specgen[train]``); the runtime reads the weights it writes with
:func:`golden.lm.load_tensors`. The model is :class:`golden.lm.MambaLM`'s
formulation, written for whole sequences (SpecMamba, arXiv 2509.19873; ``Mamba2`` in
``state-spaces/mamba``, ``ngroups = 1``, no biases in the projections, tied
embeddings)::

    h = E[tokens]                                         (B, T, d_model)
    per layer:
        zxbcdt = RMSNorm(h)·w_norm @ W_inᵀ;  split z, xBC, dt
        xBC    = SiLU(causal depthwise conv1d(xBC) + b)   taps oldest first
        Δ = softplus(dt + dt_bias);  A = −exp(A_log)
        y_t    = Σ_{s≤t} exp(Σ_{r=s+1..t} Δ_r·A)·(C_t·B_s)·Δ_s·x_s + D·x_t
        h      = h + W_out·(RMSNorm(y ⊙ SiLU(z))·w_gate)
    logits = RMSNorm(h)·w_f @ Eᵀ

The scan is the quadratic ("attention") form of the state-space duality
(Mamba-2, Dao & Gu 2024): exact, and fast for the short training windows.
Initialization is golden's (:meth:`golden.lm.MambaLM.from_seed`), so the seed
fixes everything. :func:`check_against_golden` proves the formulation is the
golden one: the logits of the trained torch model and of the golden model
loaded from the shipped FP16 file agree on held-out sequences.

One thread (``torch.set_num_threads(1)``): the recipe must not take the
machine from other work; its wall time is recorded in the manifest.
"""

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from specgen.golden.lm import LMConfig, MambaLM, save_tensors, tensor_shapes

from . import DATA_DIR, MANIFEST_NAME
from .corpus import load_corpus, sha256

__all__ = ["RECIPES", "TorchMambaLM", "train_model", "check_against_golden", "main"]

#: Per model: its LMConfig fields and its training run. ``target`` is several
#: layers wide enough that its trained weights span many BSFP exponents; ``draft``
#: is about a tenth of its multiplies per token.
RECIPES = {
    "target": dict(config=dict(vocab=256, d_model=128, n_layer=4, d_state=32, headdim=32),
                   seed=20, steps=2000, batch=8, seq=256, lr=3e-3),
    "draft": dict(config=dict(vocab=256, d_model=64, n_layer=2, d_state=16, headdim=16),
                  seed=21, steps=2000, batch=8, seq=256, lr=4e-3),
}
WARMUP = 100
WEIGHT_DECAY = 0.1
CLIP = 1.0
EVAL_EVERY = 100
EVAL_BATCHES = 4


def _key(name):
    return name.replace(".", "__")


class TorchMambaLM(torch.nn.Module):
    """The golden model's forward over whole sequences (module docstring).

    Parameters are the tensors of :func:`golden.lm.tensor_shapes`, under their
    names with ``.`` spelled ``__``.
    """

    def __init__(self, config, tensors):
        super().__init__()
        self.config = config
        self.params = torch.nn.ParameterDict({
            _key(n): torch.nn.Parameter(torch.tensor(np.asarray(tensors[n]), dtype=torch.float32))
            for n in tensor_shapes(config)})

    def tensors(self):
        """``{golden name: float32 numpy array}``."""
        return {n: self.params[_key(n)].detach().cpu().numpy().astype(np.float32)
                for n in tensor_shapes(self.config)}

    def _w(self, name):
        return self.params[_key(name)]

    def _rmsnorm(self, v, w):
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + self.config.norm_eps) * w

    def forward(self, tokens):
        c = self.config
        Bt, T = tokens.shape
        H, P, N = c.nheads, c.headdim, c.d_state
        emb = self._w("backbone.embedding.weight")
        h = emb[tokens]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        for i in range(c.n_layer):
            p = f"backbone.layers.{i}."
            zxbcdt = self._rmsnorm(h, self._w(p + "norm.weight")) @ self._w(p + "mixer.in_proj.weight").T
            z, xbc, dt = zxbcdt.split([c.d_inner, c.conv_dim, H], dim=-1)
            xbc = F.conv1d(xbc.transpose(1, 2), self._w(p + "mixer.conv1d.weight"),
                           self._w(p + "mixer.conv1d.bias"), padding=c.d_conv - 1,
                           groups=c.conv_dim)[..., :T]
            xbc = F.silu(xbc).transpose(1, 2)
            x, Bm, Cm = xbc.split([c.d_inner, N, N], dim=-1)
            delta = F.softplus(dt + self._w(p + "mixer.dt_bias"))            # (B, T, H)
            A = -torch.exp(self._w(p + "mixer.A_log"))
            cum = torch.cumsum(delta * A, dim=1).transpose(1, 2)               # (B, H, T)
            seg = (cum[..., :, None] - cum[..., None, :]).masked_fill(~causal, -math.inf)
            M = torch.exp(seg) * (Cm @ Bm.transpose(1, 2))[:, None]            # (B, H, T, S)
            xh = x.reshape(Bt, T, H, P)
            y = torch.einsum("bhts,bshp->bthp", M, delta[..., None] * xh)
            y = y + self._w(p + "mixer.D")[:, None] * xh
            y = y.reshape(Bt, T, c.d_inner) * F.silu(z)
            y = self._rmsnorm(y, self._w(p + "mixer.norm.weight"))
            h = h + y @ self._w(p + "mixer.out_proj.weight").T
        return self._rmsnorm(h, self._w("backbone.norm_f.weight")) @ emb.T


def _batches(data, *, batch, seq, rng):
    starts = rng.integers(0, len(data) - seq - 1, size=batch)
    idx = starts[:, None] + np.arange(seq + 1)
    chunk = torch.from_numpy(data[idx].astype(np.int64))
    return chunk[:, :-1], chunk[:, 1:]


def _heldout_windows(data, *, seq):
    """Disjoint windows covering the held-out split (the last partial one dropped)."""
    n = (len(data) - 1) // seq
    x = torch.from_numpy(data[:n * seq].astype(np.int64)).view(n, seq)
    y = torch.from_numpy(data[1:n * seq + 1].astype(np.int64)).view(n, seq)
    return x, y


@torch.no_grad()
def heldout_loss(model, data, *, seq, limit=None):
    """Mean cross-entropy (nats per byte) over held-out windows (all, or the first ``limit``)."""
    x, y = _heldout_windows(data, seq=seq)
    if limit is not None:
        x, y = x[:limit], y[:limit]
    total = 0.0
    for i in range(0, len(x), 16):
        logits = model(x[i:i + 16])
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[i:i + 16].reshape(-1),
                                 reduction="sum").item()
    return total / y.numel()


def train_model(name, recipe, splits, *, log=print):
    """Train one model; returns ``(TorchMambaLM, record)`` with the loss curve."""
    torch.manual_seed(recipe["seed"])
    rng = np.random.default_rng(recipe["seed"])
    config = LMConfig(**recipe["config"])
    model = TorchMambaLM(config, MambaLM.from_seed(config, seed=recipe["seed"]).tensors)
    train = np.frombuffer(splits["train"], dtype=np.uint8)
    held = np.frombuffer(splits["heldout"], dtype=np.uint8)
    decay = [p for n, p in model.params.items() if p.ndim >= 2]
    rest = [p for n, p in model.params.items() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": rest, "weight_decay": 0.0}], lr=recipe["lr"],
                            betas=(0.9, 0.95))
    steps = recipe["steps"]

    def lr_at(s):   # linear warm-up, cosine decay to a tenth
        if s < WARMUP:
            return recipe["lr"] * (s + 1) / WARMUP
        t = (s - WARMUP) / max(1, steps - WARMUP)
        return recipe["lr"] * (0.1 + 0.45 * (1 + math.cos(math.pi * t)))

    curve = {"step": [], "train": [], "heldout": []}
    t0, running = time.perf_counter(), []
    for s in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        x, y = _batches(train, batch=recipe["batch"], seq=recipe["seq"], rng=rng)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, config.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        running.append(loss.item())
        if (s + 1) % EVAL_EVERY == 0 or s + 1 == steps:
            ho = heldout_loss(model, held, seq=recipe["seq"], limit=EVAL_BATCHES * 16)
            curve["step"].append(s + 1)
            curve["train"].append(float(np.mean(running)))
            curve["heldout"].append(ho)
            running = []
            log(f"{name}: step {s + 1}/{steps} train {curve['train'][-1]:.3f} heldout {ho:.3f} "
                f"nats/byte ({time.perf_counter() - t0:.0f} s)")
    wall = time.perf_counter() - t0
    final = heldout_loss(model, held, seq=recipe["seq"])
    record = {"config": asdict(config), "seed": recipe["seed"], "steps": steps,
              "batch": recipe["batch"], "seq": recipe["seq"], "lr": recipe["lr"],
              "warmup": WARMUP, "weight_decay": WEIGHT_DECAY, "clip": CLIP,
              "train_tokens": steps * recipe["batch"] * recipe["seq"],
              "wall_s": round(wall, 1), "torch": torch.__version__,
              "heldout_nats_per_byte_fp32": final, "curve": curve,
              "curve_heldout_windows": EVAL_BATCHES * 16}
    return model, record


def check_against_golden(model, lm, data, *, seqs=3, length=64, seed=0):
    """Largest |logit difference| between torch (float32, trained) and golden (float64,
    the FP16 file) on ``seqs`` held-out sequences of ``length`` bytes, and the logit scale.

    The difference holds FP16 rounding of the weights and float32 arithmetic; a
    formulation mismatch (a norm, a conv tap order, the scan) gives differences
    of the order of the logits themselves.
    """
    rng = np.random.default_rng(seed)
    fp16 = TorchMambaLM(lm.config, lm.tensors)      # torch on the very FP16 weights
    worst = worst16 = scale = 0.0
    for start in rng.integers(0, len(data) - length, size=seqs):
        toks = data[start:start + length].astype(np.int64)
        ref, _ = lm.prefill([int(t) for t in toks])
        with torch.no_grad():
            ours = model(torch.from_numpy(toks)[None])[0].double().numpy()
            ours16 = fp16(torch.from_numpy(toks)[None])[0].double().numpy()
        worst = max(worst, float(np.abs(ours - ref).max()))
        worst16 = max(worst16, float(np.abs(ours16 - ref).max()))
        scale = max(scale, float(np.abs(ref).max()))
    return {"max_abs_diff_fp32_weights": worst, "max_abs_diff_same_fp16_weights": worst16,
            "max_abs_logit": scale, "sequences": seqs, "length": length}


#: The held-out slice the no-torch test re-measures with golden (tests/test_models.py).
SLICE = dict(start=0, length=512)


def evaluate(lm, record, held, *, trained=None):
    """Add the shipped FP16 weights' figures to ``record``: held-out loss (all windows
    and :data:`SLICE`) and the torch/golden logit check; ``trained`` is the float32 model."""
    fp16 = TorchMambaLM(lm.config, lm.tensors)
    record["heldout_nats_per_byte_fp16"] = heldout_loss(fp16, held, seq=record["seq"])
    a, n = SLICE["start"], SLICE["length"]
    with torch.no_grad():
        logits = fp16(torch.from_numpy(held[a:a + n].astype(np.int64))[None])[0]
    nll = F.cross_entropy(logits[:-1], torch.from_numpy(held[a + 1:a + n].astype(np.int64)))
    record["heldout_slice"] = dict(SLICE, nats_per_byte=float(nll))
    check = check_against_golden(trained if trained is not None else fp16, lm, held)
    if trained is None:     # keep the float32 figure of the training run
        check["max_abs_diff_fp32_weights"] = record.get("check_against_golden", {}).get(
            "max_abs_diff_fp32_weights")
    check["max_abs_diff_hw"] = check_hw(fp16, lm, held)
    record["check_against_golden"] = check


def golden_hw_logits(lm, tokens, *, state_format="fp32"):
    """Logits of ``lm`` with every layer in golden's hardware numerics (binary32, the
    SSM unit's tables; :class:`golden.mixer.Mamba2Mixer` ``numerics="hw"``)."""
    from specgen.golden.mixer import Mamba2Mixer
    mix = lm.config.mixer
    mix = replace(mix, ssm=replace(mix.ssm, state_format=state_format))
    mixers = [Mamba2Mixer(mix=mix, params=m.params, numerics="hw", eps=lm.config.norm_eps)
              for m in lm.mixers]
    states = [m.zero_state() for m in mixers]
    out = []
    for tok in tokens:
        h = lm.embed(int(tok)).astype(np.float32)
        for i, m in enumerate(mixers):
            stepped = m.step(states[i], h)
            states[i], h = stepped.state, stepped.output
        out.append(lm.head(h.astype(np.float64)))
    return np.array(out)


def check_hw(model, lm, data, *, length=64, seed=1):
    """Largest |logit difference| between torch and golden's hardware numerics on one
    held-out sequence (the SSM unit's tables round SiLU, softplus and exp)."""
    start = int(np.random.default_rng(seed).integers(0, len(data) - length))
    toks = data[start:start + length].astype(np.int64)
    with torch.no_grad():
        ours = model(torch.from_numpy(toks)[None])[0].double().numpy()
    return float(np.abs(golden_hw_logits(lm, toks) - ours).max())


def machine():
    """The CPU model name and core count (where the wall time was measured)."""
    import os
    name = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores (training used 1 thread)"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gen.models.train", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(DATA_DIR), help="weights and manifest folder")
    ap.add_argument("--only", choices=tuple(RECIPES), help="train one model")
    ap.add_argument("--steps", type=int, help="override the recipe's steps (a quick trial)")
    ap.add_argument("--evaluate", action="store_true",
                    help="do not train: re-measure the shipped files' figures into the manifest")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    splits = load_corpus()
    man_path = out / MANIFEST_NAME
    manifest = json.loads(man_path.read_text()) if man_path.exists() else {"models": {}}
    manifest["corpus"] = {
        "source": "CPython 3.11.7 standard library, top-level *.py (gen/models/corpus.py)",
        "licence": "PSF License Agreement (Python Software Foundation)",
        "train_bytes": len(splits["train"]), "heldout_bytes": len(splits["heldout"]),
        "sha256": {k: sha256(v) for k, v in splits.items()}}
    held = np.frombuffer(splits["heldout"], dtype=np.uint8)
    for name, recipe in RECIPES.items():
        if args.only and name != args.only:
            continue
        path = out / f"{name}.safetensors"
        if args.evaluate:
            record = manifest["models"][name]
            record.setdefault("curve_heldout_windows", EVAL_BATCHES * 16)
            lm = MambaLM.load(path, config=LMConfig(**record["config"]))
            evaluate(lm, record, held)
        else:
            recipe = dict(recipe, steps=args.steps or recipe["steps"])
            model, record = train_model(name, recipe, splits, log=lambda m: print(m, flush=True))
            save_tensors(path, model.tensors(), dtype="float16")
            lm = MambaLM.load(path, config=model.config)
            evaluate(lm, record, held, trained=model)
        record.setdefault("machine", machine())
        record["file"] = path.name
        record["sha256"] = sha256(path.read_bytes())
        record["bytes"] = path.stat().st_size
        manifest["models"][name] = record
        print(json.dumps({k: v for k, v in record.items() if k != "curve"}), flush=True)
        man_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
