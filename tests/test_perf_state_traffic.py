"""The SSM-state traffic term of the performance model (gen.perf.system.StateTraffic).

Every expected value is worked out here by hand from the presets' documented facts
(docs/boards.md, docs/blocks-tree-ssm.md): the state is striped over ``ssm.state_ports``
ports each way, each ``min(memory port, 32 bits per SSM lane / state_ports)`` wide; a
port moves one beat a memory cycle, but a write master takes one beat a fabric cycle
and a read master hands on one slice (its packed beats) a fabric cycle, so a port is
no faster than that either; one layer's state is ``nheads × headdim × d_state``
binary32 words.
"""

import dataclasses
from fractions import Fraction

import pytest

from specgen.golden.config import preset

from specgen.gen.perf.roofline import roofline
from specgen.gen.perf.system import (StateTraffic, StepConfig, accelerator, seed_step,
                                     state_traffic, step_model)

SEED_TREE = StepConfig(target="2.7B", draft="370M", tree=(2, 2, 1, 1), tokens_per_step=4.91)


def _traffic(board, **kw):
    cfg = preset(board)
    s = cfg.ssm
    return state_traffic(cfg, state_elems=s.nheads * s.headdim * s.d_state, elem_bytes=4, **kw)


def test_sim_preset_by_hand():
    # sim: 2 heads x 2 x 8 state, 4 lanes, one state port -> a 4 x 32 = 128-bit port (the
    # widest memory port, 512, is wider); memory clock 150 MHz, fabric 100 MHz: one beat
    # a fabric cycle each way (the read master packs nothing); no shared bandwidth.
    cfg = preset("sim")
    assert (cfg.ssm.nheads, cfg.ssm.headdim, cfg.ssm.d_state, cfg.ssm.lanes) == (2, 2, 8, 4)
    assert (cfg.board.memory_clock_mhz, cfg.board.clock_mhz, cfg.ssm.state_ports) == (150, 100, 1)
    st = _traffic("sim")
    layer = 2 * 2 * 8 * 4                                  # 128 bytes
    port = Fraction(128, 8) * 100_000_000                  # 1.6 GB/s
    assert st.layer_bytes == layer and st.port_bits == 128 and st.shared_bytes_per_s is None
    assert st.read_port_bytes_per_s == st.write_port_bytes_per_s == port
    tree = Fraction(layer) / port                          # 80 ns
    assert tree == Fraction(80, 10**9)
    assert st.seconds(reads=1, writes=0) == pytest.approx(float(tree), rel=1e-12)
    # Reads and writes on their own ports: a commit takes as long as a tree pass.
    assert st.seconds(reads=1, writes=1) == pytest.approx(float(tree), rel=1e-12)
    # Four draft tokens read their parents and write their own: 4 states each way.
    assert st.seconds(reads=4, writes=4) == pytest.approx(float(4 * tree), rel=1e-12)
    two = _traffic("sim", ports=2)
    assert two.seconds(reads=4, writes=4) == pytest.approx(float(2 * tree), rel=1e-12)


def test_vhk158_by_hand():
    # One Mamba2-2.7B layer: 80 x 64 x 128 binary32 = 2,621,440 B, striped over 16 state
    # ports each way, each a 256-bit HBM_NMU port (8,192 bits of the 256 lanes / 16 = a
    # 512-bit slice a fabric cycle): at 450 MHz a port moves 14.4 GB/s, and its master
    # packs (splits) two beats into (from) a slice a 250 MHz cycle, faster than that:
    # 230.4 GB/s over the 16, 90 % of the unit's word a cycle.
    st = _traffic("vhk158")
    layer = 80 * 64 * 128 * 4
    port = 256 // 8 * 450_000_000
    assert st.layer_bytes == layer == 2_621_440 and st.ports == 16 and st.port_bits == 256
    assert (st.read_pack, st.write_pack) == (2, 2)
    assert st.read_port_bytes_per_s == st.write_port_bytes_per_s == port
    per_state = Fraction(layer, 16 * port)                 # 11.38 us = 2,844.4 fabric cycles
    assert per_state == Fraction(25600, 9 * 250_000_000)
    assert st.seconds(reads=1, writes=0) == pytest.approx(float(per_state), rel=1e-12)
    assert st.seconds(reads=1, writes=1) == pytest.approx(float(per_state), rel=1e-12)
    # With one beat a fabric cycle on the write side (no split), the master binds: 8 GB/s.
    slow = dataclasses.replace(st, write_pack=1)
    assert slow.write_port_bytes_per_s == 256 // 8 * 250_000_000
    # A commit of 5 nodes computes 5 x 2,560 cycles (80 x 64 x 128 / 256 lanes) at
    # 250 MHz = 51.2 us: one port each way is 182.0 us, 4 ports per direction (45.5 us)
    # make it compute-bound, 3 (60.7 us) do not.
    compute = 5 * Fraction(80 * 64 * 128, 256) / 250_000_000
    one = dataclasses.replace(st, ports=1)
    assert one.ports_needed(float(compute), reads=1, writes=1) == 4
    # One draft node, 10.24 us: more than the 16 (18 would do): the unit waits on them.
    assert one.ports_needed(float(compute / 5), reads=1, writes=1) == 18


def test_vck190_shared_ddr_binds():
    # 64 lanes x 32 = 2,048 bits > 512: one 512-bit port at 300 MHz = 19.2 GB/s, but the
    # DDR's 12 GB/s carry reads and writes (and weights) together.
    # The read master packs 4 beats into its 2,048-bit word, so it is the memory clock
    # (300 MHz) that limits both directions (the fabric runs at 400 MHz).
    st = _traffic("vck190")
    layer = 80 * 64 * 128 * 4
    assert st.port_bits == 512 and st.ports == 1 and st.read_pack == 4
    assert st.read_port_bytes_per_s == st.write_port_bytes_per_s == 512 // 8 * 300_000_000
    assert st.seconds(reads=1, writes=0) == pytest.approx(layer / 12e9, rel=1e-12)
    assert st.seconds(reads=1, writes=1) == pytest.approx(2 * layer / 12e9, rel=1e-12)
    # No port count beats the DDR.
    assert st.ports_needed(100e-6, reads=1, writes=1, max_ports=64) is None


@pytest.mark.parametrize("flow", ["node", "prefix"])
def test_step_counts_state_per_pass_by_hand(flow):
    # One state port each way (--state-ports 1): a 256-bit beat a 450 MHz memory cycle (its
    # masters pack and split the 256 lanes' whole word, faster than that).
    acc = accelerator(preset("vhk158"), state_ports=1)
    step = dataclasses.replace(SEED_TREE, tokens_per_step=None, alpha=0.8, draft_flow=flow)
    res = step_model(acc, step)
    assert res.step.draft_flow == flow
    port = 256 / 8 * 450e6
    tgt, drf = 80 * 64 * 128 * 4, 32 * 64 * 128 * 4        # 2.7B and 370M layers
    # The accepted path reaches depth 4 (no draft pass ran its node) with probability
    # (1 - 0.2^2)^2 * 0.8^2 at alpha 0.8 on the tree 2,2,1,1.
    deep = (1 - 0.2 ** 2) ** 2 * 0.8 ** 2
    # Tree pass: the committed state read once per layer of the target's 64.
    assert res.phase("verify").t_state == pytest.approx(64 * tgt / port, rel=1e-12)
    # Draft, 48 layers of the 370M draft. node: every expanded node of depths 0-3
    # (1 + 2 + 4 + 4 = 11) reads its parent's state and writes its own, on their own
    # ports: one state time a pass. prefix: a pass a depth, the committed state read
    # once each. In both, the path's last node on depth 4 (probability `deep`) rides in
    # the next step's passes (carried: the root's pass in the node flow), no state
    # traffic of its own.
    assert 0 < deep < 1
    passes = 11 if flow == "node" else 4
    assert res.phase("draft").t_state == pytest.approx(48 * passes * drf / port, rel=1e-12)
    # Commits: the target's replay, the committed state read, one new state written, on
    # their own ports; the draft's the same (prefix) or none (node: its last node's
    # stored state is adopted).
    draft_commit = 0 if flow == "node" else 48 * drf
    assert res.phase("restore").t_state == pytest.approx((64 * tgt + draft_commit) / port,
                                                         rel=1e-12)
    d = res.phase("draft")
    if flow == "node":
        # The SSM part of a one-node pass waits for its state: the draft is state-bound.
        assert d.bound == "state" and d.t_compute >= d.t_state > d.t_ssm
    # The roofline with the state is below the review's limit, which ignores it.
    roof = roofline(res)
    assert roof.state_limit < roof.limit
    assert roof.tokens_per_s <= roof.state_limit * (1 + 1e-12)


def test_more_state_ports_help_until_compute_bound():
    rates = [step_model(accelerator(preset("vhk158"), state_ports=n), seed_step()).tokens_per_s
             for n in (1, 2, 4, 8, 16, 32)]
    assert rates == sorted(rates) and rates[0] < rates[-1]
    # Past 16 ports per direction nothing in the step waits on the state.
    assert rates[-2] == rates[-1]
    res = step_model(accelerator(preset("vhk158"), state_ports=16), seed_step())
    assert all(p.bound != "state" for p in res.phases)


def test_state_ports_validated():
    with pytest.raises(ValueError, match="Accelerator.state_ports"):
        accelerator(preset("vhk158"), state_ports=0)
    with pytest.raises(ValueError, match="state_traffic.ports"):
        _traffic("sim", ports=0)
    assert dataclasses.is_dataclass(StateTraffic)


def test_cli_state_ports(capsys):
    import json

    from specgen.gen.cli.commands import main
    argv = ["perf", "--board", "vhk158", "--target", "2.7B", "--draft", "370M", "--json"]
    assert main(argv + ["--state-ports", "4"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = step_model(accelerator(preset("vhk158"), state_ports=4), seed_step())
    assert got["tokens_per_s"] == pytest.approx(want.tokens_per_s, rel=1e-12)
    assert got["assumptions"]["state_ports"] == 4
    assert main(argv + ["--state-ports", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "specgen perf: error: --state-ports must be an integer >= 1, not 0"
