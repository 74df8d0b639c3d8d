"""The model image: every weight read back from the bytes, at the header's addresses, bit for bit.

The reader here is independent of the writer: addresses come from the ``#define``s of
``specgen_regs.h`` (``gen.emit.memory_map_doc.c_defines``), planes are unpacked with
Python integers, and the FP16 words are rebuilt with ``golden.bsfp.merge_planes``,
``restore_stored`` and ``unscale``, then compared with the FP16 rounding of the
original tensors.
"""

import re
from dataclasses import replace

import numpy as np
import pytest

from specgen.golden.bsfp import BSFPConfig, expand_scales, merge_planes, restore_stored, unscale
from specgen.golden.config import preset
from specgen.golden.lm import MambaLM, lm_preset
from specgen.golden.memory_map import MemoryMap, layer_param_words

from specgen.gen.emit.memory_map_doc import c_defines
from specgen.gen.runtime.image import ImageError, build_image, image_of

MATRIX_TENSORS = {"EMBEDDING": "backbone.embedding.weight",
                  "IN_PROJ": "backbone.layers.{i}.mixer.in_proj.weight",
                  "OUT_PROJ": "backbone.layers.{i}.mixer.out_proj.weight",
                  "LM_HEAD": "lm_head.weight"}


def defines(mm):
    """``{macro: value}`` of the header's memory-map lines."""
    return {m.group(1): int(m.group(2), 16 if m.group(2).startswith("0x") else 10)
            for m in re.finditer(r"#define SPECGEN_MEM_(\w+) (0x[0-9a-f]+|\d+)u", c_defines(mm))}


def at(d, cls, region, layer=0):
    """Byte address of a region's entry, from the header alone."""
    stride = d.get(f"{cls}_{region}_LAYER_STRIDE", 0)
    return d[f"{cls}_DEFAULT_BASE"] + d[f"{cls}_{region}_OFFSET"] + layer * stride


def _pieces(n_out, config):
    """``(first row, end)`` of each tile (or piece, with ``linear.split_tiles``): in units
    of the smallest packed share ``b`` (``rows·cols/q`` for the largest ``q`` of 1, 2, 4, 8
    dividing ``rows``), the last tile's ``ceil(r/b)`` written in binary, one piece a one
    bit, the largest first."""
    lin = config.linear
    rows, cols = lin.rows, lin.cols
    starts = list(range(0, n_out, rows * cols))
    if lin.split_tiles and n_out % (rows * cols):
        b = rows * cols // max(q for q in (1, 2, 4, 8) if rows % q == 0)
        units = -(-(n_out - starts[-1]) // b)
        starts[-1:] = [starts[-1] + b * (units >> j << j) - b * (1 << j)
                       for j in range(units.bit_length() - 1, -1, -1) if units >> j & 1]
    return list(zip(starts, starts[1:] + [n_out]))


def read_jobs(data, nib_at, res_at, n_out, k, config):
    """The ``(nibble, residue)`` planes of an ``n_out × k`` matrix, read job by job as the
    linear engine reads them: output tiles of ``rows · cols`` slots, input chunks of
    ``max_k``; in a job, beat ``b = k'·cols + g`` carries rows ``h·cols + g``. A tile of
    ``n`` rows uses slots ``h < u`` of every column, ``u = rows/q`` for the largest ``q``
    of 1, 2, 4, 8 dividing ``rows`` with ``ceil(n/cols) ≤ u``, and stores those alone,
    ``q`` columns of an input to a ``rows``-field sub-beat, each input's ``S =
    ceil(ceil(cols/q)/B)·B`` sub-beats (``B`` = ``linear.weight_beats``) starting afresh:
    weight ``h`` of beat ``(k', g)`` is 4-bit field ``(k'·S + g div q)·rows + (g mod q)·u
    + h`` of each slice region (low nibble first), each region padded to the stream's
    word; residue slices hold bits 3..0, 7..4, 11..8. With ``linear.split_tiles`` the last
    tile's ``r`` rows are pieces, each a
    tile of its own: in units of the smallest packed share ``b`` (``rows·cols/q`` for the
    largest such ``q``), ``ceil(r/b)`` written in binary, one piece a one bit, the
    largest first."""
    lin = config.linear
    rows, cols = lin.rows, lin.cols
    word = max(4 * rows, config.board.memory_port_bits)
    nib, res = np.zeros((n_out, k), np.uint16), np.zeros((n_out, k), np.uint16)
    for r0, end in _pieces(n_out, config):
        n = end - r0
        q = max(q for q in (1, 2, 4, 8) if rows % q == 0 and -(-n // cols) <= rows // q)
        u, B = rows // q, lin.weight_beats
        S = -(-(-(-cols // q)) // B) * B
        for k0 in range(0, k, lin.max_k):
            n_k = min(lin.max_k, k - k0)
            region = -(-n_k * S * rows * 4 // word) * word // 8
            fields = []
            for at in (nib_at, res_at, res_at + region, res_at + 2 * region):
                raw = np.frombuffer(data[at:at + region], np.uint8)
                fields.append(np.stack([raw & 0xF, raw >> 4], axis=1).reshape(-1))
            for kk in range(n_k):
                for g in range(cols):
                    for h in range(rows):
                        if h * cols + g >= n:
                            continue
                        f = [int(x[(kk * S + g // q) * rows + (g % q) * u + h]) for x in fields]
                        nib[r0 + h * cols + g, k0 + kk] = f[0]
                        res[r0 + h * cols + g, k0 + kk] = f[1] | f[2] << 4 | f[3] << 8
            nib_at, res_at = nib_at + region, res_at + 3 * region
    return nib, res


def read_draft(data, d_at, n_out, k, config):
    """The nibbles of an ``n_out × k`` matrix from its draft plane, job by job as
    :func:`read_jobs` reads the nibble plane: in a job, each input's ``S`` sub-beats (as
    there) padded to ``D = ceil(S / 4B)·4B``, the job's sub-beats cut into groups of ``B``,
    group ``g`` at place ``g div 4`` of stripe ``g mod 4``; the four stripes back to back,
    each ``n_k·D/4`` sub-beats padded to the stream's word."""
    lin = config.linear
    rows, cols, B = lin.rows, lin.cols, lin.weight_beats
    word = max(4 * rows * B, config.board.memory_port_bits)
    nib = np.zeros((n_out, k), np.uint16)
    for r0, end in _pieces(n_out, config):
        n = end - r0
        q = max(q for q in (1, 2, 4, 8) if rows % q == 0 and -(-n // cols) <= rows // q)
        u = rows // q
        S = -(-(-(-cols // q)) // B) * B
        D = -(-S // (4 * B)) * 4 * B
        for k0 in range(0, k, lin.max_k):
            n_k = min(lin.max_k, k - k0)
            stripe = -(-n_k * D // 4 * rows * 4 // word) * word // 8
            fields = []
            for m in range(4):
                raw = np.frombuffer(data[d_at + m * stripe:d_at + (m + 1) * stripe], np.uint8)
                fields.append(np.stack([raw & 0xF, raw >> 4], axis=1).reshape(-1))
            for kk in range(n_k):
                for g in range(cols):
                    sub = kk * D + g // q                  # the job's sub-beat
                    grp, e = divmod(sub, B)
                    at_ = ((grp // 4) * B + e) * rows + (g % q) * u
                    for h in range(rows):
                        if h * cols + g < n:
                            nib[r0 + h * cols + g, k0 + kk] = int(fields[grp % 4][at_ + h])
            d_at += 4 * stripe
    return nib


def read_back(img, tensors, config, drafts=None):
    """Every matrix of the image as FP16 bit patterns, rebuilt from its planes and scales;
    into ``drafts`` (a dict), each matrix's ``(draft plane's nibbles, nibble plane's)``."""
    mm = img.memory_map
    d = defines(mm)
    data = bytes(img.data)
    bsfp = config.bsfp
    out = {}
    for macro, pattern in MATRIX_TENSORS.items():
        if f"WEIGHTS_{macro}_NIBBLE_OFFSET" not in d:
            continue
        for i in range(mm.model.n_layer if "{i}" in pattern else 1):
            name = pattern.format(i=i)
            rows, cols = np.shape(tensors[name])
            nib, res = read_jobs(data, at(d, "WEIGHTS", f"{macro}_NIBBLE", i),
                                 at(d, "WEIGHTS", f"{macro}_RESIDUE", i), rows, cols, config)
            n_scales = 1 if bsfp.group_size is None else rows * -(-cols // bsfp.group_size)
            assert d[f"WEIGHTS_{macro}_SCALES_SIZE"] == n_scales
            s_at = at(d, "WEIGHTS", f"{macro}_SCALES", i)
            k = np.frombuffer(data[s_at:s_at + n_scales], np.uint8)
            k = k[0] if bsfp.group_size is None else k.reshape(rows, -1)
            if drafts is not None and config.linear.draft_plane:
                # The draft plane holds the nibble plane again, striped.
                drafts[name] = (read_draft(data, at(d, "WEIGHTS", f"{macro}_DRAFT", i), rows,
                                           cols, config), nib)
            stored = merge_planes(nib, res)
            scaled = restore_stored(stored, config=bsfp)
            k_each = expand_scales(k, shape=(rows, cols), group_size=bsfp.group_size)
            out[name] = unscale(scaled, k_each)
    return out


def fp16_bits(a):
    return np.asarray(a, dtype=np.float64).astype(np.float16).view(np.uint16)


def tiny_tensors(scale_in_proj=1.0, tie=True):
    lm = MambaLM.from_seed(lm_preset("tiny", tie_embeddings=tie), seed=3, head_gain=4.0)
    t = dict(lm.tensors)
    name = "backbone.layers.1.mixer.in_proj.weight"
    t[name] = t[name] * scale_in_proj
    return lm.config, t


@pytest.mark.parametrize("case", ["plain", "scaled", "groups", "untied", "split"])
def test_every_weight_reads_back_bit_for_bit(case):
    config = preset("sim")
    if case == "groups":
        config = replace(config, bsfp=BSFPConfig(group_size=8))
    if case == "split":
        # An 8 × 4 array cuts in_proj's last tile (88 − 2·32 = 24 rows) into 16 rows
        # packed 2 and 8 packed 4.
        config = replace(config, linear=replace(config.linear, rows=8, split_tiles=True))
    model, tensors = tiny_tensors(scale_in_proj=16.0 if case in ("scaled", "groups") else 1.0,
                                  tie=case != "untied")
    img = build_image(tensors, model=model, config=config)
    # Every weight kept exactly by Algorithm 1, so the FP16 words must come back unchanged.
    assert set(img.inexact.values()) == {0}
    if case in ("scaled", "groups"):
        assert int(np.max(img.encoded["backbone.layers.1.mixer.in_proj.weight"].scales)) > 0
    drafts = {}
    got = read_back(img, tensors, config, drafts)
    # The sim preset keeps the draft plane: its nibbles are the nibble plane's, striped.
    assert config.linear.draft_plane and set(drafts) == set(got)
    for name, (draft, nib) in drafts.items():
        np.testing.assert_array_equal(draft, nib, err_msg=f"{name}: the draft plane")
    expect = {n for n in MATRIX_TENSORS.values() if "{i}" not in n and n in tensors} | \
        {p.format(i=i) for p in MATRIX_TENSORS.values() if "{i}" in p for i in range(model.n_layer)}
    assert set(got) == expect
    for name, bits in got.items():
        np.testing.assert_array_equal(bits, fp16_bits(tensors[name]), err_msg=name)
    if case == "split":
        # The pieces are laid out as pieces: read as one tile, in_proj comes back wrong.
        whole = replace(config, linear=replace(config.linear, split_tiles=False))
        name = "backbone.layers.0.mixer.in_proj.weight"
        assert not np.array_equal(read_back(img, tensors, whole)[name],
                                  fp16_bits(tensors[name]))


@pytest.mark.parametrize("mutation", ["residue nibbles swapped", "rows reversed"])
def test_the_read_back_can_fail(monkeypatch, mutation):
    """A plane writer with the two weights of a residue byte swapped, or with the matrix's
    rows in the wrong order, is caught."""
    from specgen.golden import weight_planes
    real = weight_planes.pack_matrix

    def wrong(stored, **kw):
        nibble, residue, jobs = real(stored, **kw)
        if mutation == "rows reversed":
            return real(np.ascontiguousarray(np.asarray(stored)[::-1]), **kw)
        r = np.frombuffer(residue, np.uint8)
        return nibble, ((r & 0xF) << 4 | r >> 4).astype(np.uint8).tobytes(), jobs
    config = preset("sim")
    model, tensors = tiny_tensors()
    monkeypatch.setattr(weight_planes, "pack_matrix", wrong)
    got = read_back(build_image(tensors, model=model, config=config), tensors, config)
    name = "backbone.embedding.weight"
    assert not np.array_equal(got[name], fp16_bits(tensors[name]))


def test_the_draft_read_back_can_fail(monkeypatch):
    """A draft-plane writer with the matrix's rows in the wrong order is caught: its
    nibbles differ from the nibble plane's."""
    from specgen.golden import weight_planes
    real = weight_planes.pack_matrix_draft

    def wrong(stored, **kw):
        return real(np.ascontiguousarray(np.asarray(stored)[::-1]), **kw)
    config = preset("sim")
    model, tensors = tiny_tensors()
    monkeypatch.setattr(weight_planes, "pack_matrix_draft", wrong)
    drafts = {}
    read_back(build_image(tensors, model=model, config=config), tensors, config, drafts)
    draft, nib = drafts["backbone.embedding.weight"]
    assert not np.array_equal(draft, nib)


def test_planes_are_the_engine_jobs():
    """A matrix wider than ``max_k`` and taller than the array is several jobs, each the
    column beats the weight stream delivers for its tile (golden.weight_planes)."""
    from specgen.golden.weight_planes import (column_beats, matrix_plane_bytes, pack_jobs,
                                              pack_matrix, stream_word_bits)
    config = preset("sim")
    lin, word = config.linear, stream_word_bits(config)
    rng = np.random.default_rng(5)
    stored = rng.integers(0, 1 << 16, (2 * lin.rows * lin.cols + 3, 2 * lin.max_k + 5),
                          dtype=np.uint16)
    nibble, residue, jobs = pack_matrix(stored, rows=lin.rows, cols=lin.cols, max_k=lin.max_k,
                                        word_bits=word)
    assert [(j.row0, j.k0, j.n_rows, j.n_k) for j in jobs][:4] == [
        (0, 0, 8, 16), (0, 16, 8, 16), (0, 32, 8, 5), (8, 0, 8, 16)]
    assert len(jobs) == 9 and jobs[-1].n_rows == 3
    tiles = [column_beats(stored[j.row0:j.row0 + j.n_rows, j.k0:j.k0 + j.n_k], rows=lin.rows,
                          cols=lin.cols) for j in jobs]
    # The last tile's 3 rows use slot 0 of each column alone: two beats a sub-beat.
    assert (nibble, residue) == pack_jobs(tiles, word_bits=word, packs=[1] * 6 + [2] * 3)[:2]
    assert (nibble, residue) != pack_jobs(tiles, word_bits=word)[:2]
    assert (len(nibble), len(residue)) == matrix_plane_bytes(
        *stored.shape, rows=lin.rows, cols=lin.cols, max_k=lin.max_k, word_bits=word)
    got = read_jobs(nibble + residue, 0, len(nibble), *stored.shape, config)
    assert np.array_equal(merge_planes(*got), stored)


def test_layer_parameters_states_and_tokens():
    config = preset("sim")
    model, tensors = tiny_tensors()
    img = build_image(tensors, model=model, config=config)
    d, data = defines(img.memory_map), bytes(img.data)
    m = model
    for i in range(m.n_layer):
        p = f"backbone.layers.{i}."
        a = at(d, "WEIGHTS", "LAYER_PARAMS", i)
        words = np.frombuffer(data[a:a + 4 * layer_param_words(m)], "<f4")
        want = np.concatenate([
            np.float32(tensors[p + "mixer.conv1d.weight"][:, 0, :]).ravel(),
            np.float32(tensors[p + "mixer.conv1d.bias"]),
            np.float32(tensors[p + "norm.weight"]), np.float32(tensors[p + "mixer.norm.weight"])])
        np.testing.assert_array_equal(words, want)
        # The SSM engine's parameters: A = −exp(A_log), dt_bias, D, one word per head each.
        a = at(d, "WEIGHTS", "SSM_PARAMS", i)
        words = np.frombuffer(data[a:a + 4 * 3 * m.nheads], "<f4")
        want = np.concatenate([np.float32(-np.exp(tensors[p + "mixer.A_log"])),
                               np.float32(tensors[p + "mixer.dt_bias"]),
                               np.float32(tensors[p + "mixer.D"])])
        np.testing.assert_array_equal(words, want)
    a = at(d, "WEIGHTS", "NORM_F")
    np.testing.assert_array_equal(np.frombuffer(data[a:a + 4 * m.d_model], "<f4"),
                                  np.float32(tensors["backbone.norm_f.weight"]))
    # A state after three tokens, and the tokens of a tree.
    lm = MambaLM(model, tensors)
    _, state = lm.prefill([1, 2, 3])
    img.write_state("draft", state)
    img.write_tokens([5, 7, 9])
    data = bytes(img.data)
    for i in range(m.n_layer):
        # Slots target0, target1, draft0, …: the draft's committed bank 0 is slot 2.
        a = at(d, "STATE", "SSM", i) + 2 * d["STATE_SSM_SLOT_STRIDE"]
        np.testing.assert_array_equal(
            np.frombuffer(data[a:a + 4 * m.state_elems], "<f4"), np.float32(state.ssm[i]).ravel())
        a = at(d, "STATE", "DRAFT_CONV", i)
        np.testing.assert_array_equal(
            np.frombuffer(data[a:a + 4 * m.conv_elems], "<f4"), np.float32(state.conv[i]).ravel())
        a = at(d, "STATE", "SSM", i)
        assert not any(data[a:a + 4 * m.state_elems])     # the target's is still the zero state
    a = at(d, "IO", "TOKENS_IN")
    assert np.frombuffer(data[a:a + 12], "<u4").tolist() == [5, 7, 9]
    assert img.bases(1 << 32) == {k: (1 << 32) + v for k, v in img.memory_map.class_offsets}


def test_shipped_target_fits_its_map():
    from specgen.gen.models import load_model
    lm = load_model("target")
    img = image_of(lm, config=preset("sim"))
    assert img.size == MemoryMap.build(config=preset("sim"), model=lm.config).total_bytes
    assert set(img.inexact.values()) == {0}


@pytest.mark.parametrize("bad,fragment", [
    (float("nan"), "first nan at index (0, 2)"),
    (float("inf"), "first inf at index (0, 2)"),
    (1e6, "first 1000000.0 at index (0, 2)"),
])
def test_a_weight_without_fp16_form_is_named(bad, fragment):
    model, tensors = tiny_tensors()
    w = np.array(tensors["backbone.layers.0.mixer.out_proj.weight"])
    w[0, 2] = bad
    tensors["backbone.layers.0.mixer.out_proj.weight"] = w
    with pytest.raises(ImageError) as exc:
        build_image(tensors, model=model, config=preset("sim"))
    msg = str(exc.value)
    assert "'backbone.layers.0.mixer.out_proj.weight' has 1 value(s)" in msg
    assert fragment in msg
    assert "allowed: finite values with |w| <= 65504 (FP16)" in msg


def test_missing_and_misshapen_tensors_are_named():
    model, tensors = tiny_tensors()
    del tensors["backbone.layers.1.mixer.D"]
    with pytest.raises(ImageError, match=r"missing tensor 'backbone.layers.1.mixer.D' \(shape \(8,\)\)"):
        build_image(tensors, model=model, config=preset("sim"))
    model, tensors = tiny_tensors()
    tensors["backbone.norm_f.weight"] = np.ones(3)
    with pytest.raises(ImageError, match=r"'backbone.norm_f.weight' must have shape \(16,\), not \(3,\)"):
        build_image(tensors, model=model, config=preset("sim"))


def test_runtime_lays_out_the_loaded_model():
    from specgen.gen.runtime.runtime import Runtime
    config = preset("sim")
    rt = Runtime(config=config)
    lm = rt.load_model("tiny", seed=2)
    got = read_back(rt.image(), lm.tensors, config)
    name = "backbone.layers.0.mixer.in_proj.weight"
    np.testing.assert_array_equal(got[name], fp16_bits(lm.tensors[name]))


def test_dimensions_are_checked_against_the_built_geometry():
    from specgen.hw.regmap import accelerator_regmap
    from specgen.gen.runtime.image import check_fits
    from specgen.gen.models import load_model
    regmap = accelerator_regmap(preset("vhk158"))
    check_fits(lm_preset("2.7B"), regmap=regmap)           # the SSM unit is built for it
    with pytest.raises(ImageError, match=r"d_state = 256 \(from tensor "
                       r"'backbone.layers.0.mixer.conv1d.weight'\) does not fit the accelerator: "
                       r"at most 128, CAPS_SSM.D_STATE"):
        check_fits(lm_preset("2.7B", d_state=256), regmap=regmap)
    with pytest.raises(ImageError, match=r"n_layer = 300 .* at most 255, the 8-bit field "
                       r"DIM_MODEL.N_LAYER"):
        check_fits(lm_preset("2.7B", n_layer=300), regmap=regmap)
    # The sim preset's SSM unit (2 heads of 2 rows, 8 columns) is smaller than the shipped model.
    with pytest.raises(ImageError, match=r"nheads = 8 .* at most 2, CAPS_SSM.NHEADS"):
        check_fits(load_model("target").config, regmap=accelerator_regmap(preset("sim")))
    check_fits(load_model("target").config, regmap=accelerator_regmap(preset("sim")),
               caps={"NHEADS": 8, "HEADDIM": 32, "D_STATE": 32})


def test_state_of_a_unit_sized_model_is_striped():
    """On a design whose SSM unit is the model's layer, the committed state is in the
    engine's order: row r's tile k (lanes words) at word (r·⌈N/lanes⌉ + k)·lanes of the
    tile order, whose unit words' slices p go to stripe p (read back here by index)."""
    base = preset("sim")
    model, tensors = tiny_tensors()
    ssm = replace(base.ssm, nheads=model.nheads, headdim=model.headdim,
                              d_state=model.d_state, state_ports=2)
    config = replace(base, ssm=ssm)
    img = build_image(tensors, model=model, config=config)
    lm = MambaLM(model, tensors)
    _, state = lm.prefill([4, 1, 2])
    img.write_state("target", state)
    d, data = defines(img.memory_map), bytes(img.data)
    L, S, N = ssm.lanes, ssm.state_ports, model.d_state
    K, w = -(-N // L), ssm.lanes // ssm.state_ports
    for i in range(model.n_layer):
        a = at(d, "STATE", "SSM", i)
        mem = np.frombuffer(data[a:a + 4 * model.state_elems], "<f4")
        stripe = mem.size // S
        want = np.float32(state.ssm[i]).reshape(-1, N)
        for r in range(want.shape[0]):
            for n in range(N):
                k, lane = divmod(n, L)
                word = r * K + k
                p, j = divmod(lane, w)
                assert mem[p * stripe + word * w + j] == want[r, n]
