# amaranth: UnusedElaboratable=no
"""The decoder core's step programs (``hw.step_program``) and its parameter checks,
without simulation; ``tests/test_decoder_core.py`` runs the programs on the RTL."""

import dataclasses

import numpy as np
import pytest
from amaranth.lib import data
from specgen.hw.step_program import StepPlan, in_proj_segments
from specgen.golden.config import VectorConfig
from specgen.golden.decoder import HardwareLM
from specgen.golden.lm import LMConfig, MambaLM
from specgen.golden.tree import ROOT, fifo_schedule, node_table, tree_entries
from specgen.hw.decoder import DecoderCore
from specgen.hw.sequencer import OP_END, record_layout
from specgen.sim.decoder_core import make_core
from tests.test_decoder_core import DESIGN


@pytest.fixture(scope="module")
def built():
    config, model, core = make_core(DESIGN)
    lm = HardwareLM(MambaLM.from_seed(model, seed=3), config=config)
    return config, model, core, lm


@pytest.mark.parametrize("groups", [1, 2, 5])
@pytest.mark.parametrize("cols", [1, 3, 4, 84])
def test_in_proj_segments_are_aligned_and_disjoint(cols, groups):
    m = LMConfig.from_model("2.7B")
    segs, padded = in_proj_segments(m, cols, groups)
    assert [s.name for s in segs] == ["B", "C", "dt"] + [f"x{g}" for g in range(groups)] + ["z"]
    # Every model row exactly once, each segment on a record, none overlapping.
    rows = sorted(r for s in segs for r in range(s.row0, s.row0 + s.rows))
    assert rows == list(range(m.d_in_proj))
    for s, nxt in zip(segs, segs[1:] + [None]):
        assert s.at % cols == 0
        assert s.at + s.rows <= (nxt.at if nxt else padded)
    assert padded - m.d_in_proj < len(segs) * cols
    # In the model's order z, x, B, C, dt: group g's x rows are heads g·Hg … of x.
    Hg, P = m.nheads // groups, m.headdim
    by = {s.name: s for s in segs}
    assert by["z"].row0 == 0 and by["B"].row0 == 2 * m.d_inner
    assert by["dt"].row0 == 2 * m.d_inner + 2 * m.d_state and by["dt"].rows == m.nheads
    for g in range(groups):
        assert by[f"x{g}"].row0 == m.d_inner + g * Hg * P and by[f"x{g}"].rows == Hg * P
    if cols == 84 and groups <= 2:
        # VHK158's two 5,376-row tiles hold 2.7B's in_proj with one or two head groups.
        assert padded <= 2 * 64 * 84


def test_node_table_follows_the_fifo_schedule():
    parents = [ROOT, 0, 0, 1, 2, 2]
    table = node_table(parents, fifo_depth=4)
    s = fifo_schedule(parents, fifo_depth=4)
    assert [t[0] for t in table] == [1, 0, 0, 0, 0, 0]
    for v in range(1, len(parents)):
        # a child reads the slot its parent wrote
        assert table[v][1] == table[parents[v]][2] == int(s.write_slot[parents[v]])


def test_program_records(built):
    config, model, core, lm = built
    parents = [ROOT, 0, 0, 1, 2]
    plan = StepPlan(core, lm, nodes=len(parents))
    tokens = [5, 0, 15, 5, 9]
    prog, n = plan.program(parents, tokens)
    rb = core.record_bits // 8
    assert len(prog) == n * rb
    jobs_in, jobs_out = len(plan.layers[0]["in_jobs"]), len(plan.layers[0]["out_jobs"])
    per_layer = 1 + jobs_in + 3 * len(parents) + 1 + 1 + 1 + jobs_out + 1
    assert n == len(parents) + model.n_layer * per_layer + 1 + len(plan.head_jobs) + 1 + 1 + 1
    lay = record_layout(core.record_bits)
    recs = [data.Const(lay, int.from_bytes(prog[i * rb:(i + 1) * rb], "little"))
            for i in range(n)]
    ops = [int(r.op) for r in recs]
    assert ops[-1] == OP_END and OP_END not in ops[:-1]
    # the step ends with the greedy acceptance of the tree, after the argmax
    assert int(recs[-1].wait) == 1 << core.index("accept")
    acc = recs[-2]
    assert int(acc.engine) == core.index("accept") and int(acc.wait) == 1 << core.index("argmax")
    acc_lay = plan.layouts["accept"]
    a = data.Const(acc_lay, int(acc.payload) & ((1 << acc_lay.size) - 1))
    assert (int(a.elements), int(a.node_addr), int(a.best_addr), int(a.path_addr)) == (
        len(parents), plan.tree, plan.am, plan.path)
    at, table = plan.tree_table(parents, tokens)
    assert at == plan.tree and table == tree_entries(parents, tokens).astype("<u8").tobytes()
    # a draft pass ends at the argmax
    d_prog, d_n = plan.program(parents, tokens, accept=False)
    assert d_n == n - 1 and d_prog[-rb:] != prog[-rb:]
    d_end = data.Const(lay, int.from_bytes(d_prog[-rb:], "little"))
    assert int(d_end.op) == OP_END and int(d_end.wait) == 1 << core.index("argmax")
    # the SSM pass of each layer waits for the conv1d and the dt copy
    ssm = [r for r in recs if int(r.op) != OP_END and int(r.engine) == core.index("ssm")]
    assert len(ssm) == model.n_layer
    assert all(int(r.wait) == (1 << core.index("conv1d")) | (1 << core.index("copy"))
               for r in ssm)
    # the step opens with the gather of every node's embedding row into h, and the first
    # pre-norm waits for it
    copy_lay = plan.layouts["copy"]
    for v, t in enumerate(tokens):
        assert int(recs[v].engine) == core.index("copy") and int(recs[v].wait) == 0
        c = data.Const(copy_lay, int(recs[v].payload) & ((1 << copy_lay.size) - 1))
        assert int(c.x_addr) == plan.emb + t * 4 * model.d_model
        assert int(c.y_addr) == plan.h + v * plan.h_stride
        # the copy engine's beats hold plan.lanes["copy"] words
        assert int(c.elements) * plan.lanes["copy"] == model.d_model
        row = np.frombuffer(plan.get(int(c.x_addr), 4 * model.d_model), np.float32)
        assert np.array_equal(row, lm.embed(t))
    first_norm = recs[len(tokens)]
    assert int(first_norm.engine) == core.index("norm")
    assert int(first_norm.wait) == 1 << core.index("copy")


def test_plan_state_and_window_round_trip(built):
    config, model, core, lm = built
    plan = StepPlan(core, lm, nodes=2)
    rng = np.random.default_rng(0)
    conv = rng.standard_normal((model.d_conv - 1, model.conv_dim)).astype(np.float32)
    # a node's window slot holds the layout write_state gives the committed one
    slot0 = plan.layers[1]["win"][0]
    plan.layers[1]["win"][1] = slot0
    state = lm.initial_state()
    state = type(state)(conv=(state.conv[0], conv), ssm=state.ssm)
    plan.write_state(state)
    assert np.array_equal(plan.window_of(plan.data, 1, 0), conv)


def test_plan_rejects_what_the_core_cannot_run(built):
    config, model, core, lm = built
    with pytest.raises(ValueError, match=r"StepPlan.nodes must be in \[1, 8\]"):
        StepPlan(core, lm, nodes=9)
    other = HardwareLM(MambaLM.from_seed(LMConfig(**{**DESIGN["model"], "vocab": 20}), seed=1),
                       config=config)
    with pytest.raises(ValueError, match="does not have the widths the core is built for"):
        StepPlan(core, other, nodes=2)
    # fewer layers (a layer-skipping draft) fit the same core
    fewer = HardwareLM(MambaLM.from_seed(LMConfig(**{**DESIGN["model"], "n_layer": 1}), seed=1),
                       config=config)
    assert len(StepPlan(core, fewer, nodes=2).layers) == 1
    plan = StepPlan(core, lm, nodes=3)
    with pytest.raises(ValueError, match="4 nodes, the plan holds at most 3"):
        plan.program([ROOT, 0, 0, 1], [0] * 4)
    with pytest.raises(ValueError, match=r"tokens must be 2 ids in \[0, 16\) \(one a node\)"):
        plan.program([ROOT, 0], [0, 16])


def test_core_rejects_a_model_it_cannot_run(built):
    config, model, core, lm = built
    wrong = LMConfig(**{**DESIGN["model"], "headdim": 4})
    with pytest.raises(ValueError, match=r"nheads is 4, the design's SSM unit is built for 2 "
                                         r"\(ssm.nheads\)"):
        DecoderCore(config=config, model=wrong, max_records=8, addr_width=18)
    narrow = config.replace(linear=dataclasses.replace(config.linear, max_k=8))
    with pytest.raises(ValueError, match=r"d_inner \(16, the inputs of "
                                         r"backbone.layers.\*.mixer.out_proj.weight\) "
                                         r"exceeds linear.max_k \(8\)"):
        DecoderCore(config=narrow, model=model, max_records=8, addr_width=18)
    with pytest.raises(ValueError, match=r"max_nodes must be in \[1, 16\]"):
        DecoderCore(config=config, model=model, max_records=8, addr_width=18, max_nodes=17)
    # 4 lanes do not divide the model's 2 heads (the dt moves of the copy engine)
    wide = config.replace(linear=dataclasses.replace(config.linear, cols=12),
                          vector=VectorConfig(lanes=4))
    with pytest.raises(ValueError, match=r"^DecoderCore: the model's nheads \(2\) is not a "
                                         r"multiple of the copy engine's lanes \(4, vector.lanes "
                                         r"4\)$"):
        DecoderCore(config=wide, model=model, max_records=8, addr_width=18)


def _records(core, prog, n):
    rb = core.record_bits // 8
    lay = record_layout(core.record_bits)
    return [data.Const(lay, int.from_bytes(prog[i * rb:(i + 1) * rb], "little"))
            for i in range(n)]


def _descs(plan, prog, n, engine):
    """The descriptors of ``engine``'s records of a program, in order."""
    core = plan.core
    return [_desc(plan, r, engine) for r in _records(core, prog, n)
            if int(r.engine) == core.index(engine)]


def test_commit_program_replays_the_path_into_the_other_bank(built):
    config, model, core, lm = built
    plan = StepPlan(core, lm, nodes=5)
    prog, n = plan.commit_program([0, 2, 4])
    assert n == 2 * model.n_layer + 1
    recs = _records(core, prog, n)
    assert int(recs[-1].op) == OP_END
    assert int(recs[-1].wait) == (1 << core.index("ssm")) | (1 << core.index("copy"))
    ssm_lay = plan.layouts["ssm"]
    copy_lay = plan.layouts["copy"]
    for i, L in enumerate(plan.layers):
        d = data.Const(ssm_lay, int(recs[2 * i].payload) & ((1 << ssm_lay.size) - 1))
        assert int(recs[2 * i].engine) == core.index("ssm")
        assert (int(d.nodes), int(d.out_node), int(d.out_en), int(d.y_en)) == (3, 2, 1, 0)
        assert int(d.state_in_addr) == L["state"][0]
        assert int(d.state_out_addr) == L["state"][1]
        assert int(d.input_addr) == L["ssm_in"]
        c = data.Const(copy_lay, int(recs[2 * i + 1].payload) & ((1 << copy_lay.size) - 1))
        assert int(recs[2 * i + 1].engine) == core.index("copy")
        assert int(c.x_addr) == L["win"][1 + 4] and int(c.y_addr) == L["win"][0]
        assert int(c.elements) * plan.lanes["copy"] * 4 == model.conv_dim * plan.wb
    # the table is a chain reading the path's records
    assert [(j, src) for j, _, src in plan.commit_table([0, 2, 4])] == [(0, 0), (1, 2), (2, 4)]
    # after the flip, the tree pass and the next commit read the other bank
    plan.flip()
    d = data.Const(ssm_lay, int(_records(core, *plan.commit_program([0]))[0].payload)
                   & ((1 << ssm_lay.size) - 1))
    assert int(d.state_in_addr) == plan.layers[0]["state"][1]
    assert (int(d.nodes), int(d.out_node), int(d.out_en)) == (1, 0, 1)


@pytest.mark.parametrize("path", [[], [1, 3], [0, 7], [0, -1]])
def test_commit_program_rejects_a_bad_path(built, path):
    config, model, core, lm = built
    plan = StepPlan(core, lm, nodes=5)
    with pytest.raises(ValueError, match=r"a commit path must start at the root \(node 0\) "
                                         r"and name nodes of the step in \[0, 5\)"):
        plan.commit_program(path)


@pytest.mark.parametrize("design", ["built", "grouped", "planes"])
def test_committed_state_round_trip(design, request):
    """The committed state in, and out, as the core holds it; in head groups each group's
    image is the engine's layout of its heads, one after the other."""
    config, model, core, lm = request.getfixturevalue(design)
    plan = StepPlan(core, lm, nodes=2)
    rng = np.random.default_rng(1)
    state = lm.initial_state()
    conv = tuple(rng.standard_normal(c.shape).astype(np.float32) for c in state.conv)
    ssm = tuple(rng.standard_normal(s.shape).astype(np.float32) for s in state.ssm)
    plan.write_state(type(state)(conv=conv, ssm=ssm))
    for i in range(model.n_layer):
        w, s = plan.committed_of(plan.data, i)
        assert np.array_equal(w, conv[i]) and np.array_equal(s, ssm[i])
    G, Hg = config.ssm.head_groups, model.nheads // config.ssm.head_groups
    assert plan.G == G
    from specgen.golden.memory_map import state_image
    for g in range(G):
        at = plan.layers[0]["state"][0] + g * plan.group_state_bytes
        img = np.frombuffer(plan.get(at, plan.group_state_bytes), np.float32)
        want = state_image(config.ssm.pass_config, ssm[0][g * Hg:(g + 1) * Hg])
        assert np.array_equal(img, np.asarray(want, np.float32).ravel())


def test_node_program_runs_one_node_from_its_parents_state(built):
    """A draft's pass one node at a time: node 3 from node 1's state and window, its own
    window, input record and state written where the tree program would; the root from
    the committed ones."""
    config, model, core, lm = built
    plan = StepPlan(core, lm, nodes=5, node_states=True)
    for v, parent in ((3, 1), (0, ROOT)):
        prog, n = plan.node_program(v, parent, token=2)
        assert plan.n == 1
        ssm = _descs(plan, prog, n, "ssm")
        conv = _descs(plan, prog, n, "conv1d")
        assert len(ssm) == model.n_layer and len(conv) == 3 * model.n_layer
        for i, L in enumerate(plan.layers):
            d = ssm[i]
            assert (int(d.nodes), int(d.out_node), int(d.out_en), int(d.y_en)) == (1, 0, 1, 1)
            assert int(d.state_in_addr) == (L["state"][0] if parent == ROOT
                                             else L["node_state"][0][parent])
            assert int(d.state_out_addr) == L["node_state"][0][v]
            # its own record, as record 0 of its table
            assert int(d.input_addr) == L["ssm_in"] + v * plan.ssm_rec
            src = L["win"][0] if parent == ROOT else L["win"][1 + parent]
            for c in conv[3 * i:3 * i + 3]:
                assert src <= int(c.window_addr) < src + model.conv_dim * plan.wb
                assert (L["win"][1 + v] <= int(c.new_window_addr)
                        < L["win"][1 + v] + model.conv_dim * plan.wb)
                assert (L["ssm_in"] + v * plan.ssm_rec <= int(c.y_addr)
                        < L["ssm_in"] + (v + 1) * plan.ssm_rec)
        # dt into the node's own record
        dts = [c for c in _descs(plan, prog, n, "copy") if int(c.vectors) == 1
               and int(c.y_vstride) == plan.ssm_rec]
        assert [int(c.y_addr) for c in dts] == [
            L["ssm_in"] + v * plan.ssm_rec + 8 * model.d_state + 4 * model.d_inner
            for L in plan.layers]
    assert plan.node_table() == [(0, plan.table([ROOT])[0][1], 0)]
    # The draft's commit after node programs names the drafted tree's nodes.
    assert plan.commit_program([0, 1, 3], nodes=5)[1] == 2 * model.n_layer + 1
    with pytest.raises(ValueError, match=r"name nodes of the step in \[0, 1\)"):
        plan.commit_program([0, 1, 3])


@pytest.mark.parametrize("kwargs, message", [
    ({"node_states": False}, "needs a plan made with node_states=True"),
    ({"v": 5}, r"node 5 and parent 1 must be distinct nodes in \[0, 5\)"),
    ({"v": 1}, r"node 1 and parent 1 must be distinct"),
    ({"parent": -2}, r"node 3 and parent -2"),
    ({"token": 16}, r"token and before must be in \[0, 16\), not \[16\]"),
    ({"before": 16}, r"token and before must be in \[0, 16\), not \[16, 2\]"),
    ({"v": 0, "parent": ROOT, "before": 3}, r"node 0 \(with the node before it in slot -1\)"),
    ({"v": 2, "before": 3}, r"node 2 \(with the node before it in slot 1\) and parent 1"),
])
def test_node_program_rejects_bad_arguments(built, kwargs, message):
    config, model, core, lm = built
    plan = StepPlan(core, lm, nodes=5, node_states=kwargs.pop("node_states", True))
    args = {"v": 3, "parent": 1, "token": 2, "before": None, **kwargs}
    with pytest.raises(ValueError, match=message):
        plan.node_program(args["v"], args["parent"], args["token"], before=args["before"])


def test_node_program_runs_a_carried_node_before_the_root(built):
    """A draft whose last path ended on a node no pass ran carries it: the next root's
    pass runs it first, in slot v − 1, from the committed state, then the root from it
    (a chain of two: the root's conv1d reads the carried node's window), and keeps the
    root's state alone."""
    config, model, core, lm = built
    plan = StepPlan(core, lm, nodes=5, node_states=True)
    prog, n = plan.node_program(2, ROOT, token=2, before=5)
    assert plan.n == 2
    ssm, conv = _descs(plan, prog, n, "ssm"), _descs(plan, prog, n, "conv1d")
    assert len(ssm) == model.n_layer and len(conv) == 6 * model.n_layer
    for i, L in enumerate(plan.layers):
        d = ssm[i]
        assert (int(d.nodes), int(d.out_node), int(d.out_en), int(d.y_en)) == (2, 1, 1, 1)
        assert int(d.state_in_addr) == L["state"][0]
        assert int(d.state_out_addr) == L["node_state"][0][2]
        assert int(d.input_addr) == L["ssm_in"] + 1 * plan.ssm_rec
        first, second = conv[6 * i:6 * i + 3], conv[6 * i + 3:6 * i + 6]
        for c in first:
            assert L["win"][0] <= int(c.window_addr) < L["win"][0] + model.conv_dim * plan.wb
            assert L["win"][2] <= int(c.new_window_addr) < L["win"][2] + model.conv_dim * plan.wb
        for c in second:
            assert L["win"][2] <= int(c.window_addr) < L["win"][2] + model.conv_dim * plan.wb
            assert L["win"][3] <= int(c.new_window_addr) < L["win"][3] + model.conv_dim * plan.wb
            assert (L["ssm_in"] + 2 * plan.ssm_rec <= int(c.y_addr)
                    < L["ssm_in"] + 3 * plan.ssm_rec)
    assert plan.node_table(2) == plan.table([ROOT, 0])
    # Its second table entry is not a commit's: it cannot run one beside it.
    layers, table = plan.commit_parts([0], nodes=5)
    with pytest.raises(ValueError, match="cannot run beside a commit"):
        plan.node_program(2, ROOT, token=2, before=5, beside=(layers, table))
    with pytest.raises(ValueError, match=r"StepPlan.nodes must be an integer in \[1, 2\], not 3"):
        plan.node_table(3)


def test_a_node_program_runs_another_plans_commit_beside_it(built):
    """A draft's node pass with the target's commit beside it: each of the commit's layers
    right after the pass's gated norm of that layer (its SSM replay then overlaps the
    pass's linear jobs), the commit's table for both, and an END that waits for both."""
    config, model, core, lm = built
    target = StepPlan(core, lm, nodes=5)
    draft = StepPlan(core, lm, nodes=5, base=len(target.data) + 4096, node_states=True)
    layers, table = target.commit_parts([0, 2, 4])
    assert table == target.commit_table([0, 2, 4])
    alone, n_alone = draft.node_program(3, 1, token=2)
    prog, n = draft.node_program(3, 1, token=2, beside=(layers, table))
    assert n == n_alone + 2 * model.n_layer
    recs = _records(core, prog, n)
    eng = [int(r.engine) for r in recs[:-1]]
    gates = [i for i, e in enumerate(eng) if e == core.index("gate_norm")]
    rb = core.record_bits // 8
    for i, g in enumerate(gates):
        # the commit's layer i: its replay and its window copy, byte for byte
        assert prog[(g + 1) * rb:(g + 3) * rb] == b"".join(layers[i])
    assert int(recs[-1].op) == OP_END
    assert int(recs[-1].wait) == sum(1 << core.index(e) for e in ("argmax", "ssm", "copy"))
    # the commit program is the same records, one after the other
    whole, count = target.commit_program([0, 2, 4])
    assert whole[:-rb] == b"".join(r for layer in layers for r in layer)
    with pytest.raises(ValueError, match="beside must be a commit's"):
        draft.node_program(3, 1, token=2, beside=(layers, table[1:]))
    # A draft of fewer layers: the target's other layers follow its last gated norm.
    short = StepPlan(core, HardwareLM(lm.lm.truncated(1), config=config), nodes=5,
                     base=len(target.data) + 4096, node_states=True)
    prog, n = short.node_program(3, 1, token=2, beside=(layers, table))
    g = [i for i, r in enumerate(_records(core, prog, n)) if int(r.engine) == core.index("gate_norm")]
    assert len(g) == 1 and model.n_layer == 2
    assert prog[(g[0] + 1) * rb:(g[0] + 5) * rb] == b"".join(layers[0] + layers[1])


def test_a_draft_commit_adopts_the_last_nodes_stored_state(built):
    """The node flow's commit: the windows of the path's last node into the committed slot,
    then its stored state is the committed one; the next node programs write the other
    set, so it stays whole; a replay commit (flip) goes back to the banks."""
    config, model, core, lm = built
    plan = StepPlan(core, lm, nodes=5, node_states=True)
    prog, n = plan.window_program(3)
    recs = _records(core, prog, n)
    assert n == model.n_layer + 1 and int(recs[-1].wait) == 1 << core.index("copy")
    copy_lay = plan.layouts["copy"]
    for i, L in enumerate(plan.layers):
        c = data.Const(copy_lay, int(recs[i].payload) & ((1 << copy_lay.size) - 1))
        assert int(c.x_addr) == L["win"][1 + 3] and int(c.y_addr) == L["win"][0]
    plan.adopt(3)

    def ssm_descs(prog, n):
        return _descs(plan, prog, n, "ssm")
    # The root's next pass starts from node 3's state of set 0 and writes set 1.
    for L, d in zip(plan.layers, ssm_descs(*plan.node_program(0, ROOT, 2))):
        assert int(d.state_in_addr) == L["node_state"][0][3]
        assert int(d.state_out_addr) == L["node_state"][1][0]
    for L, d in zip(plan.layers, ssm_descs(*plan.node_program(2, 0, 2))):
        assert int(d.state_in_addr) == L["node_state"][1][0]
    # A replay commit reads the adopted state and writes the other bank; after it, the bank.
    for L, d in zip(plan.layers, ssm_descs(*plan.commit_program([0], nodes=5))):
        assert int(d.state_in_addr) == L["node_state"][0][3]
        assert int(d.state_out_addr) == L["state"][1]
    plan.flip()
    assert [plan.committed_state(L) for L in plan.layers] == [L["state"][1] for L in plan.layers]
    with pytest.raises(ValueError, match=r"node 5 must be in \[0, 5\)"):
        plan.window_program(5)
    with pytest.raises(ValueError, match="needs a plan made with node_states=True"):
        StepPlan(core, lm, nodes=5).window_program(0)


@pytest.fixture(scope="module")
def grouped():
    """A core whose SSM engine runs a layer's 4 heads in two passes (``ssm.head_groups``)."""
    p = {**DESIGN, "ssm": {"nheads": 4, "headdim": 4, "d_state": 8, "head_groups": 2},
         "model": {**DESIGN["model"], "headdim": 4}}
    config, model, core = make_core(p)
    lm = HardwareLM(MambaLM.from_seed(model, seed=3), config=config)
    return config, model, core, lm


def _desc(plan, rec, engine):
    lay = plan.layouts[engine]
    return data.Const(lay, int(rec.payload) & ((1 << lay.size) - 1))


def test_head_groups_hand_over_to_the_ssm_while_in_proj_runs(grouped):
    """Per layer: in_proj's jobs up to group 0's x, group 0's conv1d (waiting for them),
    its dt copy and SSM pass; then the jobs of group 1's rows, handed out while that pass
    runs; group 1's conv1d of its x waiting for them, the copy of B and C from group 0's
    records, its pass; the rest of in_proj (z); the gated norm waiting for both engines
    and reading y group by group."""
    config, model, core, lm = grouped
    assert core.engines["ssm"].unit.cfg.nheads == 2
    parents = [ROOT, 0, 0, 1]
    plan = StepPlan(core, lm, nodes=len(parents))
    recs = _records(core, *plan.program(parents, [1, 2, 3, 4]))
    names = list(core.engines)
    eng = [names[int(r.engine)] if int(r.op) != OP_END else "END" for r in recs]
    first = eng.index("norm", len(parents))
    layer = eng[first:eng.index("gate_norm") + 1]
    ssm_at = [i for i, e in enumerate(layer) if e == "ssm"]
    assert len(ssm_at) == 2
    # Jobs between the two passes: group 1's rows, computed beside group 0's pass.
    between = layer[ssm_at[0] + 1:ssm_at[1]]
    assert "linear" in between
    # Group 0's conv1d runs x, B and C a node; group 1's its x alone, and a copy moves B
    # and C from group 0's records into its own (then dt's copy).
    before = layer[:ssm_at[0]]
    assert before.count("conv1d") == 3 * len(parents)
    assert between.count("conv1d") == len(parents) and between.count("copy") == 2
    conv1 = first + ssm_at[0] + 1 + between.index("conv1d")
    assert int(recs[conv1].wait) == 1 << core.index("linear")
    bc = _desc(plan, recs[first + ssm_at[0] + 1 + between.index("copy")], "copy")
    L0 = plan.layers[0]
    assert int(bc.x_addr) == L0["ssm_in"] and int(bc.x_vstride) == plan.ssm_rec
    assert int(bc.y_addr) == L0["ssm_in"] + plan.V * plan.ssm_rec
    assert int(bc.vectors) == len(parents)
    assert int(bc.elements) * config.stage_lanes("copy") == 2 * model.d_state
    gate = recs[first + len(layer) - 1]
    assert int(gate.wait) == (1 << core.index("ssm")) | (1 << core.index("linear"))
    L, Hg, P = plan.layers[0], 2, model.headdim
    for g, i in enumerate(ssm_at):
        d = _desc(plan, recs[first + i], "ssm")
        assert int(d.params_addr) == L["ssm_params"] + 12 * g * Hg
        assert int(d.input_addr) == L["ssm_in"] + g * plan.V * plan.ssm_rec
        assert int(d.state_in_addr) == L["state"][0] + g * plan.group_state_bytes
        assert int(d.y_addr) == plan.y + 4 * g * plan.V * Hg * P
    # The parameters a pass loads are its heads'.
    prm = lm.parameters(0)
    words = np.frombuffer(plan.get(L["ssm_params"], 12 * model.nheads), np.float32)
    want = np.concatenate([prm[k][g * Hg:(g + 1) * Hg] for g in range(2)
                           for k in ("A", "dt_bias", "D")])
    assert np.array_equal(words, want.astype(np.float32))
    g_desc = _desc(plan, gate, "gate_norm")
    assert (int(g_desc.y_chunks), int(g_desc.y_cstride), int(g_desc.y_vstride)) == (
        2, 4 * plan.V * Hg * P, 4 * Hg * P)
    # A commit replays the path group by group.
    layers, _ = plan.commit_parts([0, 1, 3])
    assert all(len(rs) == 3 for rs in layers)


def test_head_groups_the_core_cannot_run():
    """A group's heads must fill the copy engine's beats (the sim preset's 2 lanes)."""
    p = {**DESIGN, "ssm": {"nheads": 2, "headdim": 8, "d_state": 8, "head_groups": 2}}
    with pytest.raises(ValueError, match=r"a head group's nheads \(1 of the model's 2 heads, "
                                         r"ssm.head_groups 2: 1\) is not a multiple of the copy "
                                         r"engine's lanes \(2"):
        make_core(p)


@pytest.fixture(scope="module")
def planes():
    """A core on 256-bit HBM ports with four vector lanes (VHK158's): the conv1d's windows
    and taps in two planes (``Config.conv1d_parts``)."""
    p = {**DESIGN, "linear": {"cols": 4}, "vector": {"lanes": 4},
         "board": {"memory": "HBM", "memory_port_bits": 256},
         "ssm": {"nheads": 4, "headdim": 4, "d_state": 8},
         "model": {**DESIGN["model"], "headdim": 4}}
    config, model, core = make_core(p)
    lm = HardwareLM(MambaLM.from_seed(model, seed=3), config=config)
    return config, model, core, lm


def test_conv1d_records_read_and_write_the_planes(planes):
    """Each conv1d record reads its window and taps, and writes its new window, in the two
    planes: plane ``j`` of an array holds lanes ``2j, 2j + 1`` of every beat, so a segment
    starting at channel ``c0`` starts at element ``c0/2`` of each, the planes ``conv_dim/2``
    elements apart; the taps in memory are the model's in that order."""
    config, model, core, lm = planes
    assert config.conv1d_parts() == 2
    parents = [ROOT, 0, 0, 1]
    plan = StepPlan(core, lm, nodes=len(parents))
    recs = _records(core, *plan.program(parents, [1, 2, 3, 4]))
    conv = [r for r in recs if int(r.op) != OP_END and int(r.engine) == core.index("conv1d")]
    L, n, wb = plan.layers[0], model.conv_dim, plan.wb
    # Node 0's records of layer 0, x then B then C: its parent is the committed window.
    for rec, c0 in zip(conv[:3], (0, model.d_inner, model.d_inner + model.d_state)):
        d = _desc(plan, rec, "conv1d")
        at, half = c0 // 2, n // 2
        assert (int(d.window_addr), int(d.window_pstride)) == (L["win"][0] + at * wb, half * wb)
        assert (int(d.taps_addr), int(d.taps_pstride)) == (
            L["conv_w"] + at * 4 * model.d_conv, half * 4 * model.d_conv)
        assert (int(d.new_window_addr), int(d.new_window_pstride)) == (
            L["win"][1] + at * wb, half * wb)
    taps = np.frombuffer(plan.get(L["conv_w"], 4 * n * model.d_conv), np.float32)
    order = [c for b in range(n // 4) for c in (4 * b, 4 * b + 1)] + [
        c for b in range(n // 4) for c in (4 * b + 2, 4 * b + 3)]
    assert np.array_equal(taps.reshape(n, model.d_conv), lm.parameters(0)["conv_w"][order])
