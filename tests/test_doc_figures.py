"""The docs' pictures: the performance plots, the BSFP exponent histogram, the block
diagram, the utilization charts and the WaveDrom timing diagrams (``specgen figures``)."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="matplotlib not installed (dev extra)")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from specgen.golden.config import preset  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*created but never used")

DOCS = Path(__file__).resolve().parent.parent / "docs"


def overlapping_texts(fig):
    """Pairs of the texts we place on ``fig`` (annotations, titles, axis labels,
    legend entries, figure notes; not matplotlib's tick labels) whose boxes overlap."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    candidates = list(fig.texts) + [t for lg in fig.legends for t in lg.get_texts()]
    for ax in fig.axes:
        candidates += list(ax.texts) + [ax.title, ax.xaxis.label, ax.yaxis.label]
        if ax.get_legend():
            candidates += ax.get_legend().get_texts()
    texts = [(t.get_text(), t.get_window_extent(renderer)) for t in candidates
             if t.get_visible() and t.get_text().strip()]
    return [(a, b) for i, (a, ba) in enumerate(texts) for b, bb in texts[i + 1:]
            if ba.overlaps(bb)]


def legend_labels(fig):
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [t.get_text() for lg in legends for t in lg.get_texts()]


def test_overlap_check_can_fail():
    fig, ax = plt.subplots()
    ax.annotate("verify", (1, 1))
    ax.annotate("verify (SPEQ)", (1, 1))
    assert overlapping_texts(fig)
    plt.close(fig)


# --- the roofline -----------------------------------------------------------------------

def test_roofline_has_a_legend_every_point_and_no_overlapping_labels():
    from specgen.gen.perf.report import BOARDS, PHASE_MARKERS, roofline_figure
    from specgen.gen.perf.system import SIZINGS, accelerator, seed_step, speq_step, step_model
    fig = roofline_figure()
    labels = legend_labels(fig)
    for phase in PHASE_MARKERS:
        assert any(phase in label for label in labels), (phase, labels)
    for word in ("SpecMamba", "SPEQ", "device roof", "LUT-built MACs", *SIZINGS):
        assert any(word in label for label in labels), (word, labels)
    assert overlapping_texts(fig) == []
    # Each panel's device roof: every DSP58 of the part, one FP16 MAC (2 operations) a cycle.
    for ax, board in zip(fig.axes, BOARDS):
        b = preset(board).board
        tops = {round(max(ln.get_ydata())) for ln in ax.get_lines()}
        assert round(2 * b.dsp58 * b.clock_mhz * 1e6) in tops, board
    # Every phase of both steps that takes time is a point of its board's panel (the
    # model, read again); a wholly hidden one is none.
    for ax, board in zip(fig.axes, BOARDS):
        points = {tuple(np.round(np.log10(c.get_offsets()[0]), 6)) for c in ax.collections}
        assert all(np.isfinite(np.log10(c.get_offsets()[0])).all() for c in ax.collections)
        for sizing in SIZINGS:
            acc = accelerator(preset(board), sizing=sizing)
            for step in (seed_step(), speq_step()):
                for p in step_model(acc, step).phases:
                    if not p.time:
                        continue
                    xy = (p.intensity, 2 * p.macs / p.time)
                    assert tuple(np.round(np.log10(xy), 6)) in points, (board, sizing, p.name)
    plt.close(fig)


# --- the acceptance plot ----------------------------------------------------------------

def test_acceptance_plot_marks_specmamba_claim_on_vhk158_only():
    from specgen.gen.perf.report import BOARDS, acceptance_figure
    from specgen.gen.perf.claims import SEED
    claim = SEED["specmamba_tok_s"]
    fig = acceptance_figure(alphas=(0.7, 0.95))
    for ax, board in zip(fig.axes, BOARDS):
        marks = [ln for ln in ax.get_lines()
                 if len(set(ln.get_ydata())) == 1 and ln.get_ydata()[0] == claim]
        if board == "vhk158":
            assert len(marks) == 1
            assert f"{claim:g} tok/s" in marks[0].get_label()
            assert any(f"{claim:g} tok/s" in label for label in legend_labels(fig))
            lo, hi = ax.get_ylim()
            assert lo < claim < hi
        else:
            assert marks == []
    assert overlapping_texts(fig) == []
    plt.close(fig)


# --- the BSFP exponent histogram --------------------------------------------------------

def title_percent(title):
    m = re.search(r"([0-9.]+) ?% in 0-15", title)
    assert m, title
    return m.group(1)


@pytest.mark.parametrize("above", [0, 1, 5, 1000])
def test_exponent_title_agrees_with_its_bars(above):
    from specgen.gen.studies.bsfp import exponent_figure
    hist = np.zeros(32, dtype=np.int64)
    hist[:16] = 1_419_576       # about 22.7 M weights, as all-MiniLM-L6-v2
    hist[16], hist[17] = above // 2, above - above // 2
    fig = exponent_figure(hist)
    ax = fig.axes[0]
    bars = np.array([p.get_height() for p in ax.patches])
    assert bars.tolist() == hist.tolist()
    shown = title_percent(ax.get_title())
    share = 100 * bars[:16].sum() / bars.sum()
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    assert float(shown) == pytest.approx(share, abs=0.6 * 10 ** -decimals)
    # A share below 100 % never prints as 100 %, and a full one always does.
    assert (float(shown) == 100) == (above == 0)
    if above:
        assert f"{above:,} above" in ax.get_title()
    plt.close(fig)


# --- the block diagram ------------------------------------------------------------------

@pytest.mark.parametrize("board", ["sim", "vhk158"])
def test_block_diagram_shows_every_block_and_port_of_the_design(board):
    from specgen.gen.studies.figures import accelerator_children, block_diagram_figure
    config = preset(board)
    top, children = accelerator_children(config)
    # Read independently: the names Accelerator.elaborate gives its submodules.
    m = top.elaborate(None)
    assert [c["name"] for c in children] == list(m._named_submodules)
    fig = block_diagram_figure(config)
    texts = "\n".join(t.get_text() for t in fig.findobj(Text))
    for c in children:
        assert f"{c['name']}: {c['kind']}" in texts
    # Every port is named, alone or in a run of indexed ports ("a0 … 5" over "6 × ...").
    runs = re.findall(r"^(\w*?)(\d+) … (\d+)\n(\d+) × ", texts, re.M)
    in_run = {f"{p}{i}" for p, a, b, n in runs if int(b) - int(a) + 1 == int(n)
              for i in range(int(a), int(b) + 1)}
    for port in top.signature.members:
        assert port in in_run or re.search(rf"^{port}\b", texts, re.M), port
    assert top.module_name in texts
    assert overlapping_texts(fig) == []
    # and none runs off the figure
    renderer = fig.canvas.get_renderer()
    for t in fig.findobj(Text):
        if t.get_text():
            box = t.get_window_extent(renderer)
            assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1, t.get_text()
    plt.close(fig)


# --- the utilization charts -------------------------------------------------------------

def test_capacity_sources_read_the_presets():
    from specgen.gen.studies.figures import capacity_sources
    vck = capacity_sources(preset("vck190").board)
    assert vck["DSP58"][0] == "AMD"
    assert {vck[k][0] for k in ("LUT", "FF", "BRAM36", "URAM288")} == {"assumption"}
    vhk = capacity_sources(preset("vhk158").board)
    # Vivado's device model for the part (docs/boards.md), and SpecMamba's DSP58 count
    # beside it
    assert {vhk[k][0] for k in ("LUT", "FF", "BRAM36", "URAM288", "DSP58")} == {"AMD"}
    assert set(vck) == set(vhk) == set(preset("vck190").board.capacities)


@pytest.mark.parametrize("board", ["vck190", "vhk158"])
def test_utilization_bars_are_the_fit_summary(board):
    from specgen.gen.estimate.report import fit_summary
    from specgen.gen.studies.figures import CLIP_PCT, capacity_sources, estimate_results, utilization_figure
    config = preset(board)
    report = json.loads((DOCS / "estimate.json").read_text())[board]
    fig, fit = utilization_figure(config, report)
    assert fit == fit_summary(estimate_results(report), config)
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names == list(config.board.capacities)
    bars = {round(p.get_y() + p.get_height() / 2): p for p in ax.patches}
    sources = capacity_sources(config.board)
    for y, name in zip(ax.get_yticks(), names):
        share = fit[name]["share"]
        if share is None:
            assert round(y) not in bars
            continue
        bar = bars[round(y)]
        assert bar.get_width() == pytest.approx(min(100 * share, CLIP_PCT))
        assert bool(bar.get_hatch()) == (sources[name][0] != "AMD"), name
    assert fit["verdict"] in ax.get_title()
    assert overlapping_texts(fig) == []
    plt.close(fig)


# --- the WaveDrom diagrams --------------------------------------------------------------

def waves(source):
    """``{name: wave}`` of every signal of a WaveDrom source, groups flattened."""
    out = {}

    def visit(items, prefix):
        for item in items:
            if isinstance(item, list):
                visit(item[1:], item[0] + " ")
            else:
                out[prefix + item["name"]] = item
    visit(source["signal"], "")
    return out


def expand(wave):
    """Per-cycle characters of a WaveDrom wave (``.`` repeats the previous one)."""
    out = []
    for ch in wave:
        out.append(out[-1] if ch == "." else ch)
    return out


def transfers(sig, valid, ready):
    """Data labels of the cycles where valid and ready are both high."""
    v, r, d = expand(valid["wave"]), expand(ready["wave"]), sig["wave"]
    labels, out = iter(sig["data"]), []
    current = None
    for cyc, ch in enumerate(d):
        if ch == "=":
            current = next(labels)
        elif ch == "x":
            current = None
        if v[cyc] == "1" and r[cyc] == "1":
            out.append(current)
    return out


def test_stream_handshake_moves_each_item_once_in_order():
    from specgen.gen.studies.figures import stream_handshake
    w = waves(stream_handshake())
    sent = transfers(w["write (w) payload"], w["write (w) valid"], w["write (w) ready"])
    got = transfers(w["read (r) payload"], w["read (r) valid"], w["read (r) ready"])
    assert len(sent) == 3 and None not in sent
    assert got == sent
    # The reader stalls: some cycle has r.valid high and r.ready low.
    rv, rr = expand(w["read (r) valid"]["wave"]), expand(w["read (r) ready"]["wave"])
    assert any(v == "1" and r == "0" for v, r in zip(rv, rr))


def test_axi_lite_sequence_reads_back_what_it_wrote():
    from specgen.gen.studies.figures import axi_lite_sequence
    from specgen.hw.regmap import accelerator_regmap
    config = preset("sim")
    w = waves(axi_lite_sequence(config=config, register="MODE"))
    addr = transfers(w["write address awaddr"], w["write address awvalid"],
                     w["write address awready"])
    data = transfers(w["write data wdata"], w["write data wvalid"], w["write data wready"])
    raddr = transfers(w["read address araddr"], w["read address arvalid"],
                      w["read address arready"])
    rdata = transfers(w["read data rdata"], w["read data rvalid"], w["read data rready"])
    offset = accelerator_regmap(config)["MODE"].offset
    assert addr == raddr == [hex(offset)]
    assert rdata == data and len(data) == 1
    assert transfers(w["write response bresp"], w["write response bvalid"],
                     w["write response bready"]) == ["OKAY"]


def test_axi_lite_sequence_refuses_a_register_without_rw_fields():
    from specgen.gen.studies.figures import axi_lite_sequence
    with pytest.raises(ValueError, match="'ID' has no RW field"):
        axi_lite_sequence(config=preset("sim"), register="ID")


def png_size(data):
    """``(width, height)`` from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_docs_figures_rewrites_the_committed_pictures(tmp_path):
    """``specgen docs figures`` (without the slow performance plots here) gives the
    committed timing diagrams byte for byte (wavedrom is pinned) and PNGs of the
    committed size (their bytes depend on the matplotlib release); twice the same bytes."""
    pytest.importorskip("wavedrom", reason="wavedrom not installed (dev extra)")
    from specgen.gen.studies.figures import FIGURES, write_figures
    paths = write_figures(out=tmp_path / "a", perf_plots=False)
    again = write_figures(out=tmp_path / "b", perf_plots=False)
    assert [p.name for p in paths] == list(FIGURES)
    for p, q in zip(paths, again):
        data, committed = p.read_bytes(), (DOCS / p.name).read_bytes()
        assert data == q.read_bytes(), p.name
        if p.suffix == ".svg":
            assert data == committed, p.name
        else:
            assert png_size(data) == png_size(committed), p.name
    # Each picture is embedded in a page that names the command near its top.
    for name in FIGURES:
        pages = [d for d in DOCS.glob("*.md") if f"({name})" in d.read_text()]
        assert pages, name
        for page in pages:
            assert "specgen docs figures" in "\n".join(page.read_text().splitlines()[:8]), page


def test_perf_doc_names_the_plots_command():
    from specgen.gen.perf.report import PLOTS
    head = "\n".join((DOCS / "perf.md").read_text().splitlines()[:4])
    assert "specgen docs figures" in head and "make bench" in head
    text = (DOCS / "perf.md").read_text()
    for name in PLOTS.values():
        assert f"({name})" in text
