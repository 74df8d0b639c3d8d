import pytest

from specgen.golden.ring_fifo import RingFIFOModel
from specgen.hw.ring_fifo import RingFIFO
from specgen.sim.runner import run_bench, simulator_available

RANDOM_TESTS = ["random_traffic", "boundaries", "full_throughput", "reset_mid_stream"]

CONFIGS = [
    pytest.param(8, 1, id="w8-d1"),
    pytest.param(8, 2, id="w8-d2"),
    pytest.param(8, 3, id="w8-d3"),
    pytest.param(5, 16, id="w5-d16"),
    pytest.param(32, 100, id="w32-d100"),
    pytest.param(16, 1024, id="w16-d1024"),
]


@pytest.mark.sim
@pytest.mark.parametrize("width,depth", CONFIGS)
def test_ring_fifo_verilator(width, depth):
    # A one-entry FIFO is always full or empty, so it cannot stream at full rate.
    tests = RANDOM_TESTS if depth >= 2 else [t for t in RANDOM_TESTS if t != "full_throughput"]
    run_bench(RingFIFO(width=width, depth=depth), name=f"ring_fifo_w{width}_d{depth}",
              module="specgen.sim.ring_fifo", testcase=tests,
              params={"width": width, "depth": depth, "cycles": 3000})


@pytest.mark.sim
@pytest.mark.parametrize("width,depth", [pytest.param(8, 3, id="w8-d3"), pytest.param(16, 16, id="w16-d16")])
def test_ring_fifo_icarus(width, depth):
    ok, reason = simulator_available("icarus")
    if not ok:
        pytest.skip(reason)
    run_bench(RingFIFO(width=width, depth=depth), name=f"ring_fifo_w{width}_d{depth}",
              module="specgen.sim.ring_fifo", simulator="icarus", testcase=RANDOM_TESTS,
              params={"width": width, "depth": depth, "cycles": 1500})


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("width,depth", [pytest.param(8, 3, id="w8-d3"), pytest.param(16, 16, id="w16-d16")])
def test_ring_fifo_long(width, depth):
    run_bench(RingFIFO(width=width, depth=depth), name=f"ring_fifo_w{width}_d{depth}",
              module="specgen.sim.ring_fifo", testcase=["random_traffic", "reset_mid_stream"],
              params={"width": width, "depth": depth, "cycles": 200_000})


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"width": 8, "depth": 0}, ValueError, "RingFIFO.depth must be an integer >= 1, not 0"),
    ({"width": -1, "depth": 4}, ValueError, "RingFIFO.width must be an integer >= 1, not -1"),
    ({"width": 8, "depth": 4.0}, TypeError, "RingFIFO.depth must be an integer >= 1, not 4.0"),
    ({"width": True, "depth": 4}, TypeError, "RingFIFO.width must be an integer >= 1, not True"),
    ({"width": "8", "depth": 4}, TypeError, "RingFIFO.width must be an integer >= 1, not '8'"),
])
def test_ring_fifo_rejects_bad_parameters(kwargs, exc, message):
    with pytest.raises(exc) as info:
        RingFIFO(**kwargs)
    assert str(info.value) == message


def test_ring_fifo_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        RingFIFO(8, 4)


def test_ring_fifo_properties():
    fifo = RingFIFO(width=12, depth=5)
    assert (fifo.width, fifo.depth, fifo.latency) == (12, 5, 1)
    assert fifo.level.shape().width == 3


def test_model_rejects_bad_depth():
    with pytest.raises(ValueError, match=r"RingFIFOModel.depth must be an integer >= 1, not 0"):
        RingFIFOModel(depth=0)


def test_model_against_plain_queue(seed):
    """The model against a second, independent formulation (a list and counters)."""
    import random
    rng = random.Random(seed)
    for depth in (1, 2, 3, 7):
        model = RingFIFOModel(depth=depth)
        items, peak = [], 0
        for _ in range(5000):
            w_valid, r_ready, rst = rng.random() < 0.6, rng.random() < 0.5, rng.random() < 0.01
            payload = rng.getrandbits(16)
            out = model.outputs()
            assert out["level"] == len(items) and out["peak_level"] == peak
            assert out["w_ready"] == (len(items) != depth) and out["r_valid"] == (len(items) != 0)
            if items:
                assert out["r_payload"] == items[0]
            model.clock(w_valid=w_valid, w_payload=payload, r_ready=r_ready, rst=rst)
            if rst:
                items, peak = [], 0
                continue
            can_pop, can_push = bool(items), len(items) < depth
            if r_ready and can_pop:
                items.pop(0)
            if w_valid and can_push:
                items.append(payload)
            peak = max(peak, len(items))
