"""``specgen golden``: deterministic golden vector sets for every golden block.

Each set is drawn from one ``numpy.random.Generator`` seeded by
``(seed, set name)``, so a set does not change when another is added. Each set
is written three ways:

* ``<set>.npz``: all arrays, for Python (zip entries carry a fixed timestamp,
  so the bytes are reproducible);
* ``<set>.<array>.hex``: one array per file, one word per line in hex, row-major,
  for ``$readmemh``;
* ``manifest.json``: the config, the seed, each array's shape, dtype and
  meaning, and the sha256 of every file.

The same command twice gives byte-identical output. ``--block`` writes the
sets of one block (:data:`BLOCK_SETS`: ``ssm_unit`` is the SSM unit's decode
steps and the FP32 operations it is built from) or one set by its name.
"""

import io
import zipfile

import numpy as np

from specgen.golden import bsfp, dot, dsp, fp, weight_planes
from specgen.golden.config import Config, preset
from specgen.golden.ring_fifo import RingFIFOModel

from specgen.gen.cli.errors import CLIError
from specgen.gen.cli.output import MANIFEST, atomic_dir, write_manifest
from specgen.gen.cli.progress import Progress, summary_lines

__all__ = ["SETS", "BLOCK_SETS", "generate", "write_golden", "save_npz"]

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def _rng(seed, name):
    return np.random.default_rng([seed, *name.encode()])


def _fp_operands(rng, fmt, n):
    """Operand bit patterns that hit every class: uniform bits, biased exponents
    (subnormal and near-overflow), and the special values."""
    width = fmt.width
    uniform = rng.integers(0, 1 << width, size=n // 2, dtype=np.uint64)
    sign = rng.integers(0, 2, size=n - n // 2, dtype=np.uint64) << np.uint64(width - 1)
    edge_exp = rng.choice(np.array([0, 1, 2, fmt.exp_mask - 2, fmt.exp_mask - 1], dtype=np.uint64),
                          size=n - n // 2)
    man = rng.integers(0, 1 << fmt.man_bits, size=n - n // 2, dtype=np.uint64)
    biased = sign | (edge_exp << np.uint64(fmt.man_bits)) | man
    specials = np.array([0, fmt.sign_mask, 1, fmt.sign_mask | 1,
                         fmt.exp_mask << fmt.man_bits, fmt.sign_mask | (fmt.exp_mask << fmt.man_bits),
                         (fmt.exp_mask << fmt.man_bits) | 1,
                         ((fmt.exp_mask - 1) << fmt.man_bits) | fmt.man_mask], dtype=np.uint64)
    out = np.concatenate([uniform, biased])
    out[:len(specials)] = specials
    return rng.permutation(out).astype(fmt.dtype)


def _set_fp(fmt_name, fmt):
    def make(config, rng):
        n = 4096
        a, b = _fp_operands(rng, fmt, n), _fp_operands(rng, fmt, n)
        return {
            "a": (a, f"{fmt_name} operand bits"),
            "b": (b, f"{fmt_name} operand bits"),
            "mul": (fp.mul(a, b, fmt), f"{fmt_name} a*b, RNE, canonical NaN"),
            "add": (fp.add(a, b, fmt), f"{fmt_name} a+b, RNE, canonical NaN"),
        }
    return make


def _set_convert(config, rng):
    h = _fp_operands(rng, fp.FP16, 4096)
    s = _fp_operands(rng, fp.FP32, 4096)
    return {
        "fp16": (h, "FP16 bits"),
        "fp16_to_fp32": (fp.convert(h, fp.FP16, fp.FP32), "exact widening"),
        "fp32": (s, "FP32 bits"),
        "fp32_to_fp16": (fp.convert(s, fp.FP32, fp.FP16), "RNE narrowing"),
    }


def _set_dot(config, rng):
    n = config.tree.tile_size * 8
    rows = 256
    a = _fp_operands(rng, fp.FP16, rows * n).reshape(rows, n)
    # Half the rows are finite Gaussian data (realistic magnitudes, no specials).
    g = rng.standard_normal((rows // 2, n)).astype(np.float16).view(np.uint16)
    a[: rows // 2] = g
    b = rng.standard_normal((rows, n)).astype(np.float16).view(np.uint16)
    return {
        "a": (a, f"FP16 bits, {rows} vectors of length {n}"),
        "b": (b, "FP16 bits"),
        "dot_fp32": (dot.dot(a, b, fmt_in=fp.FP16, fmt_out=fp.FP32), "exact sum, one RNE to FP32"),
        "dot_fp16": (dot.dot(a, b, fmt_in=fp.FP16, fmt_out=fp.FP16), "exact sum, one RNE to FP16"),
    }


def _set_bsfp(config, rng):
    rows, n = 64, 256
    w = (rng.standard_normal((rows, n)) * 0.05).astype(np.float16)
    w[0, :4] = [0.0, -0.0, 3.0, -2.5]  # zeros and a k > 0 group
    x = rng.standard_normal((n,)).astype(np.float16).view(np.uint16)
    cfg = bsfp.BSFPConfig(group_size=128)
    t = bsfp.encode(w.view(np.uint16), config=cfg)
    return {
        "weights": (w.view(np.uint16), f"FP16 weights {rows}x{n}"),
        "scales": (t.scales, "uint8 k per group of 128 along the input axis"),
        "stored": (t.stored, "BSFP v1 stored words (W, remapped code)"),
        "nibbles": (t.nibbles, "nibble plane s<<3|c, one per byte"),
        "residue": (t.residue, "residue plane W<<11|e0<<10|m"),
        "reconstructed": (t.reconstruct(), "full-precision reconstruction (FP16)"),
        "x": (x, "FP16 activation"),
        "draft_dot": (bsfp.draft_dot(t, x), "E3M0 draft W.x, FP32"),
        "full_dot": (bsfp.full_dot(t, x), "full-precision W.x, FP32"),
    }


def _set_dsp_dot(config, rng):
    """The linear engine's contract (numerics contract v2 on DSPFP32 slots) on one tile of
    the config's array, with the BSFP planes as the engine reads them from memory."""
    lin = config.linear
    rows, n, tokens = lin.rows * lin.cols, min(lin.max_k, 256), min(lin.token_lanes, 4)
    w = (rng.standard_normal((rows, n)) * 0.05).astype(np.float16)
    t = bsfp.encode(w.view(np.uint16), config=config.bsfp)
    x = rng.standard_normal((tokens, n)).astype(np.float16).view(np.uint16)
    words = weight_planes.column_beats(t.stored, rows=lin.rows, cols=lin.cols)
    nibble, residue, _ = weight_planes.pack_jobs([words],
                                             word_bits=weight_planes.stream_word_bits(config))
    return {
        "stored": (t.stored, f"BSFP v1 stored words of a {rows}x{n} tile"),
        "scales": (np.atleast_1d(t.scales), "BSFP scale exponent k"),
        "x": (x, f"FP16 activations, {tokens} tokens x {n} inputs"),
        "nibble_image": (np.frombuffer(nibble, np.uint8), "the tile's nibble-plane bytes in "
                         "memory (golden.weight_planes.pack_jobs)"),
        "residue_image": (np.frombuffer(residue, np.uint8), "its three residue-slice regions"),
        "full_dot": (dsp.full_dot(t, x), "verify pass W.x on DSPFP32 slots, binary32 (rows x "
                     "tokens)"),
        "draft_dot": (dsp.draft_dot(t, x), "draft pass (nibble plane) W.x, binary32"),
    }


def _set_ring_fifo(config, rng):
    depth, width = config.tree.fifo_depth, config.tree.slot_bits
    cycles = 4096
    model = RingFIFOModel(depth=depth)
    cols = {k: np.zeros(cycles, dtype=np.uint32) for k in
            ("rst", "w_valid", "w_payload", "r_ready", "w_ready", "r_valid", "r_payload",
             "level", "peak_level")}
    for t in range(cycles):
        # A different traffic mix every 512 cycles, including pure fill and drain.
        idle, stall = [(0.3, 0.3), (0.0, 0.9), (0.9, 0.0), (0.0, 0.0)][(t // 512) % 4]
        ins = {"rst": int(rng.random() < 0.004), "w_valid": int(rng.random() >= idle),
               "w_payload": int(rng.integers(0, 1 << width)), "r_ready": int(rng.random() >= stall)}
        outs = model.outputs()
        for k, v in ins.items():
            cols[k][t] = v
        for k in ("w_ready", "r_valid", "level", "peak_level"):
            cols[k][t] = outs[k]
        cols["r_payload"][t] = outs["r_payload"] if outs["r_valid"] else 0
        model.clock(w_valid=ins["w_valid"], w_payload=ins["w_payload"], r_ready=ins["r_ready"],
                    rst=bool(ins["rst"]))
    meaning = {"rst": "input per cycle", "w_valid": "input", "w_payload": "input",
               "r_ready": "input", "w_ready": "expected output", "r_valid": "expected output",
               "r_payload": "expected output (0 when r_valid is low)",
               "level": "expected output", "peak_level": "expected output"}
    return {k: (v, meaning[k]) for k, v in cols.items()}


def _set_tree_verifier(config, rng):
    """Random draft trees that fit the config's verifier, and their FIFO schedules."""
    from specgen.golden.tree import ROOT, fifo_schedule, flatten
    tree = config.tree
    trees, shapes = [], []
    while len(trees) < 32:
        depth = int(rng.integers(1, 7))
        branching = tuple(int(b) for b in rng.integers(1, 4, size=depth))
        parents = flatten(branching)
        if parents.size > tree.max_nodes:
            continue
        try:
            sched = fifo_schedule(parents, fifo_depth=tree.fifo_depth)
        except ValueError:
            continue    # needs more live slots than the ring holds: the verifier refuses it
        trees.append(sched)
        shapes.append(branching)
    n = tree.max_nodes
    none = np.uint32(0xFFFFFFFF)

    def table(field):
        out = np.full((len(trees), n), none, dtype=np.uint32)
        for i, sched in enumerate(trees):
            values = np.asarray(getattr(sched, field)).astype(np.int64)
            out[i, :values.size] = np.where(values == ROOT, none, values).astype(np.uint32)
        return out
    return {
        "num_nodes": (np.array([t.num_nodes for t in trees], dtype=np.uint32),
                      "nodes of each tree, the root included"),
        "parents": (table("parents"), f"BFS parent of each node, padded to max_nodes {n}; "
                                      "0xffffffff: the root, or padding"),
        "parent_slot": (table("parent_slot"), "ring slot each node reads; 0xffffffff: the root "
                                              "reads the committed state, or padding"),
        "write_slot": (table("write_slot"), f"ring slot each node writes (node mod "
                                            f"{tree.fifo_depth}); 0xffffffff: padding"),
        "last": (table("last"), "1 for the node that ends the pass; 0xffffffff: padding"),
        "live": (table("live"), "ring slots in use while each node runs; 0xffffffff: padding"),
    }


def _set_ssm_unit(config, rng):
    """Decode steps of the config's SSM unit (golden.mamba2.ssm_step_hw), bit for bit."""
    from specgen.golden.mamba2 import mamba2_init_params, ssm_step_hw
    cfg = config.ssm
    steps = 4
    H, P, N = cfg.nheads, cfg.headdim, cfg.d_state
    params = mamba2_init_params(cfg, rng)
    f32 = np.float32
    x = rng.standard_normal((steps, H, P)).astype(f32)
    B = rng.standard_normal((steps, N)).astype(f32)
    C = rng.standard_normal((steps, N)).astype(f32)
    dt = (rng.standard_normal((steps, H)) * 0.5).astype(f32)
    state = np.zeros(cfg.state_shape, dtype=cfg.state_dtype)
    ys = []
    for t in range(steps):
        out = ssm_step_hw(cfg, params, state, x[t], B[t], C[t], dt[t])
        ys.append(out.y)
        state = out.state
    word = np.uint32 if cfg.state_format == "fp32" else np.uint16
    return {
        "A": (params.A.view(np.uint32), "binary32 A per head (negative)"),
        "dt_bias": (params.dt_bias.view(np.uint32), "binary32 dt_bias per head"),
        "D": (params.D.view(np.uint32), "binary32 D per head"),
        "x": (x.view(np.uint32), f"binary32 x per step, {steps} x nheads x headdim"),
        "B": (B.view(np.uint32), "binary32 B per step"),
        "C": (C.view(np.uint32), "binary32 C per step"),
        "dt": (dt.view(np.uint32), "binary32 dt per step (before dt_bias and softplus)"),
        "y": (np.stack(ys).astype(f32).view(np.uint32),
              "binary32 y of each step, from a zero state"),
        "state": (np.asarray(state).view(word), f"{cfg.state_format} state after the "
                                                f"{steps} steps"),
    }


def _set_conv1d(config, rng):
    """Tokens of the causal conv1d and SiLU (golden.conv1d.conv1d_hw) on the config's
    channels, window carried across tokens, bit for bit."""
    from specgen.golden.conv1d import conv1d_hw
    cfg = config.ssm
    steps, channels, d_conv = 4, cfg.d_inner + 2 * cfg.d_state, 4
    f32 = np.float32
    w = (rng.standard_normal((channels, d_conv)) * 0.5).astype(f32)
    b = (rng.standard_normal(channels) * 0.1).astype(f32)
    x = rng.standard_normal((steps, channels)).astype(f32)
    window = np.zeros((d_conv - 1, channels), f32)
    ys = []
    for t in range(steps):
        y, window = conv1d_hw(window, x[t], w, b, silu_lut=cfg.silu_lut, contract=cfg.contract)
        ys.append(y)
    return {
        "w": (w.view(np.uint32), "binary32 taps per channel, oldest first"),
        "b": (b.view(np.uint32), "binary32 bias per channel"),
        "x": (x.view(np.uint32), f"binary32 raw xBC per step, {steps} x channels"),
        "y": (np.stack(ys).view(np.uint32), "binary32 SiLU(conv) per step, from a zero window"),
        "window": (window.view(np.uint32), "binary32 window after the steps"),
    }


def _set_gated_norm(config, rng):
    """Gated RMSNorm vectors of the config's d_inner (golden.rmsnorm.gated_rmsnorm_hw)."""
    from specgen.golden.rmsnorm import gated_rmsnorm_hw
    cfg = config.ssm
    vectors, n = 4, cfg.d_inner
    f32 = np.float32
    y = rng.standard_normal((vectors, n)).astype(f32)
    z = rng.standard_normal((vectors, n)).astype(f32)
    w = (1 + 0.1 * rng.standard_normal(n)).astype(f32)
    out = gated_rmsnorm_hw(y, z, w, silu_lut=cfg.silu_lut, contract=cfg.contract)
    return {
        "y": (y.view(np.uint32), "binary32 SSM output rows per vector"),
        "z": (z.view(np.uint32), "binary32 gate per vector"),
        "w": (w.view(np.uint32), "binary32 w_norm"),
        "out": (out.view(np.uint32), "binary32 RMSNorm(y * SiLU(z)) * w_norm, eps 1e-5"),
    }


#: name -> (generator, description)
SETS = {
    "fp16_ops": (_set_fp("FP16", fp.FP16), "FP16 multiply and add, specials included"),
    "fp32_ops": (_set_fp("FP32", fp.FP32), "FP32 multiply and add, specials included"),
    "convert": (_set_convert, "FP16 <-> FP32 conversion"),
    "dot": (_set_dot, "exact dot products, FP16 in, FP32 and FP16 out"),
    "bsfp": (_set_bsfp, "BSFP v1 encode, planes, reconstruction and draft/full dot"),
    "dsp_dot": (_set_dsp_dot, "the linear engine's DSPFP32 dot products and the BSFP plane "
                              "images it reads"),
    "ring_fifo": (_set_ring_fifo, "RingFIFO cycle trace for the config's tree FIFO"),
    "tree_verifier": (_set_tree_verifier, "random draft trees and their FIFO schedules "
                                          "(TreeVerifier)"),
    "ssm_unit": (_set_ssm_unit, "four SSMUnit decode steps of the config's SSM geometry"),
    "conv1d": (_set_conv1d, "four conv1d + SiLU tokens of the config's channels"),
    "gated_norm": (_set_gated_norm, "four gated RMSNorm vectors of the config's d_inner"),
}

#: ``specgen golden --block``: the sets that hold each block's golden behaviour (block
#: names as ``specgen verilog --only`` takes them), or a set's own name.
BLOCK_SETS = {
    "ring_fifo": ("ring_fifo",),
    "tree_verifier": ("tree_verifier",),
    "exponent_decoder": ("bsfp",),
    "fp16_reconstructor": ("bsfp",),
    "linear_engine": ("dsp_dot", "bsfp"),
    "ssm_engine": ("ssm_unit", "tree_verifier"),
    "accelerator": tuple(SETS),
    # Library blocks (gen.emit.blocks.library_blocks), not in the top level.
    "linear_unit": ("dot", "bsfp"),
    "dsp_linear_unit": ("dsp_dot",),
    "ssm_unit": ("ssm_unit", "fp32_ops"),
    "conv1d": ("conv1d",),
    "gated_rms_norm": ("gated_norm",),
    "residual": ("fp32_ops",),
}


def generate(name, *, seed, config):
    """Arrays of set ``name``: ``{array: (ndarray, meaning)}``."""
    make, _ = SETS[name]
    return make(config, _rng(seed, name))


def save_npz(path, arrays):
    """``numpy.savez`` with fixed zip timestamps, so equal arrays give equal bytes."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_TIME), buf.getvalue())


def _write_hex(path, array):
    digits = max(1, (array.dtype.itemsize * 8 + 3) // 4)
    flat = np.ascontiguousarray(array).reshape(-1).astype(np.uint64)
    path.write_text("".join(f"{int(v):0{digits}x}\n" for v in flat))


#: The config of ``specgen golden`` without --board or --config.
DEFAULT_CONFIG = "sim"


def write_golden(*, out, seed=0, config=DEFAULT_CONFIG, progress=None, only=None):
    """Write every set (or the sets named in ``only``) into ``out`` (atomically) with a
    manifest.

    ``config`` is a :class:`golden.config.Config` or a preset name;
    ``progress`` a :class:`gen.cli.progress.Progress` (a bar and the summary). A set
    does not depend on which others are written (its generator is seeded by
    ``(seed, set name)``).
    """
    unknown = [n for n in only or () if n not in SETS and n not in BLOCK_SETS]
    if unknown:
        allowed = ", ".join(dict.fromkeys([*BLOCK_SETS, *SETS]))
        raise CLIError(f"--block {unknown[0]!r} has no golden set; allowed: {allowed}")
    names = list(SETS) if not only else list(dict.fromkeys(
        n for b in only for n in (BLOCK_SETS.get(b) or (b,))))
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise CLIError(f"--seed must be a non-negative integer, not {seed!r}")
    if isinstance(config, Config):
        cfg = config
    else:
        try:
            cfg = preset(config)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    if not isinstance(progress, Progress):
        progress = None    # False (earlier callers) or None: silent
    sets = {}
    with atomic_dir(out, command="golden") as tmp:
        todo = names if progress is None else progress.bar(names, desc="golden sets",
                                                           total=len(names), unit="set")
        for name in todo:
            arrays = generate(name, seed=seed, config=cfg)
            save_npz(tmp / f"{name}.npz", {k: v for k, (v, _) in arrays.items()})
            for key, (array, _) in arrays.items():
                _write_hex(tmp / f"{name}.{key}.hex", array)
            sets[name] = {
                "description": SETS[name][1],
                "arrays": {k: {"shape": list(v.shape), "dtype": str(v.dtype), "meaning": m}
                           for k, (v, m) in arrays.items()},
            }
        manifest = write_manifest(tmp, command="golden", seed=seed, config=cfg.to_dict(),
                                  sets=sets)
        lines = summary_lines("golden", [tmp / n for n in manifest["files"]] + [tmp / MANIFEST],
                              root=out, notes=[f"{len(sets)} sets, seed {seed}, config "
                                               f"{cfg.name}"])
    if progress is not None:
        progress.summary(lines)
    return sets
