"""Beat efficiency of the AXI4 read master on the weight stream (``specgen bench --only memory``).

The ``read_efficiency`` bench of ``sim/axi_master.py`` on Verilator streams
long contiguous regions (the weight planes of a layer) through
:class:`hw.axi_master.AXI4ReadMaster` sized by ``from_config`` for one HBM_NMU
port of the ``vhk158`` preset, at that board's fabric and memory clocks, with a
read latency of :data:`LATENCY_NS` converted to memory cycles and random
stalls on AR, R and the output stream. Beat efficiency is data beats divided
by the output's ready cycles while streaming (first word to last): the cycles
in which the consumer could have taken a word. Every beat is checked against
the memory model.

:func:`littles_law_rows` is the sizing table of ``docs/memory.md``: what a port
must keep in flight at that latency, against the HBM_NMU's read reorder buffer.
"""

import contextlib
import json
import sys
import tempfile
from pathlib import Path

from specgen.golden.config import HBM_NMU_PORTS, MEMORY_LATENCY_NS, READ_REORDER_BYTES, preset

__all__ = ["LATENCY_NS", "STALL", "CLOCKS", "CASES", "bench_params", "measure", "benchmarks", "latency_cycles", "littles_law_rows",
           "littles_law_markdown", "RROB_BYTES", "HBM_NMU_PORTS", "measure_weight_stream",
           "weight_stream_rows", "weight_stream_benchmarks"]

COMMAND = "specgen bench --only memory --json"
#: Read latency the masters are sized for and measured at (golden.config).
LATENCY_NS = MEMORY_LATENCY_NS
#: Probability of a stall cycle on AR, R and the output stream.
STALL = 0.1
#: The HBM_NMU's read reorder buffer (golden.config; PG406 "Read Reorder Buffer" gives
#: the same 64 x 64 B for the NoC2 NMU).
RROB_BYTES = READ_REORDER_BYTES
#: Beats streamed by the benchmark (512 KB of 256-bit beats) and by the test's short run.
STREAM_BEATS = 16384
#: Byte-address width of the benchmark's memory model (1 MB).
BENCH_ADDR_WIDTH = 20


def _progress_to_stderr():
    """The runner's progress lines go to stderr, so ``--json`` prints JSON alone on stdout."""
    return contextlib.redirect_stdout(sys.stderr)


def latency_cycles(board, latency_ns=LATENCY_NS):
    """``latency_ns`` in cycles of ``board``'s memory clock, rounded up."""
    return board.memory_latency_cycles(latency_ns)


#: Clock pairs of the benchmark: ``"memory"`` runs the fabric side at the memory
#: clock too, with words of one beat, so the consumer asks for a beat in every
#: memory cycle it is ready (the master must then keep latency × rate beats in
#: flight); ``"board"`` runs the board's fabric clock with ``from_config``'s
#: wider word (512 bits at 250 MHz on vhk158), which asks for as many beats per
#: second as the port delivers.
CLOCKS = ("memory", "board")


def bench_params(master, board, *, clocks="memory", latency_ns=LATENCY_NS, stall=STALL,
                 stream_beats=STREAM_BEATS):
    """The ``sim.axi_master`` parameters of one efficiency run.

    Ready stalls on AR and on the output stream (R itself never pauses here:
    a pause of the memory's valid would bound the figure by the model, not by
    the master; the correctness benches pause R too).
    """
    if clocks not in CLOCKS:
        raise ValueError(f"clocks must be one of {', '.join(CLOCKS)}, not {clocks!r}")
    sync_mhz = board.memory_clock_mhz if clocks == "memory" else board.clock_mhz
    return dict(addr_width=master.addr_width, data_width=master.data_width,
                out_width=master.out_width, max_burst=master.max_burst, max_outstanding=master.max_outstanding,
                sync_mhz=sync_mhz, mem_mhz=board.memory_clock_mhz,
                latency=latency_cycles(board, latency_ns), ar_stall=stall, r_stall=0.0,
                out_stall=stall, stream_beats=stream_beats)


def measure(board_name="vhk158", *, clocks="memory", latency_ns=LATENCY_NS, stall=STALL,
            stream_beats=STREAM_BEATS, seed=1, **overrides):
    """Run the efficiency bench; returns ``(master, params, stats)``.

    ``overrides`` replace ``from_config``'s sizes (``fifo_depth=32`` shows what
    too few bytes in flight cost).
    """
    from specgen.hw.axi_master import AXI4ReadMaster
    from specgen.sim.runner import run_bench

    config = preset(board_name)
    if clocks == "memory":
        # One beat per memory cycle asked: words of one beat.
        overrides.setdefault("out_width", config.board.memory_port_bits)
    master = AXI4ReadMaster.from_config(config, addr_width=BENCH_ADDR_WIDTH, **overrides)
    params = bench_params(master, config.board, clocks=clocks, latency_ns=latency_ns,
                          stall=stall, stream_beats=stream_beats)
    with tempfile.TemporaryDirectory() as tmp, _progress_to_stderr():
        report = Path(tmp) / "efficiency.json"
        run_bench(master, name=master.module_name, module="specgen.sim.axi_master",
                  testcase="read_efficiency", seed=seed, params=dict(params, report=str(report)))
        stats = json.loads(report.read_text())
    return master, params, stats


#: The benchmark's runs: (clocks, stall probability). The last one, with no stall
#: anywhere, measures latency hiding alone at one beat per memory cycle.
CASES = (("memory", STALL), ("board", STALL), ("memory", 0.0))


def benchmarks():
    """The named benchmark ``memory``: beat efficiency of the read master (:data:`CASES`)."""
    board = preset("vhk158").board
    rows = []
    for clocks, stall in CASES:
        master, params, stats = measure(clocks=clocks, stall=stall)
        rows.append({
            "name": f"memory: AXI4 read master beat efficiency (vhk158 HBM_NMU port, "
                    f"{clocks} clocks, {100 * stall:g} % stalls)",
            "value": round(stats["efficiency"], 4), "unit": "fraction", "command": COMMAND,
            "note": (f"{stats['beats']:,} beats of {master.data_width} bits in "
                     f"{stats['words']:,} words of {master.out_width}, each checked against "
                     f"memory; {stats['ready_cycles']:,} ready cycles of {stats['cycles']:,} "
                     f"while streaming; fabric {params['sync_mhz']:g} MHz, memory "
                     f"{board.memory_clock_mhz:g} MHz; read latency {params['latency']} memory "
                     f"cycles ({LATENCY_NS:g} ns); {100 * stall:g} % ready stalls on AR and the "
                     f"output; {master.module_name}, at most {stats['max_in_flight']} bursts in "
                     f"flight; Verilator, seed 1"),
        })
    return rows + weight_stream_benchmarks()


def littles_law_rows(latency_ns=LATENCY_NS):
    """Per board: a port's bandwidth, the bytes it keeps in flight at ``latency_ns``,
    the ports the board's bandwidth needs, and the master's default sizes."""
    from specgen.hw.axi_master import AXI4ReadMaster

    rows = []
    for name in ("vck190", "vhk158"):
        config = preset(name)
        board = config.board
        master = AXI4ReadMaster.from_config(config)
        master._MustUse__silence = True    # built for its sizes, not elaborated
        port_gbs = board.memory_port_gbs
        bytes_ = board.memory_port_bits // 8
        in_flight = port_gbs * latency_ns      # GB/s x ns = bytes
        rows.append({
            "board": name, "memory": board.memory, "mem_bw_gbs": board.mem_bw_gbs,
            "port_bits": board.memory_port_bits, "memory_clock_mhz": board.memory_clock_mhz,
            "port_gbs": port_gbs, "ports": board.memory_ports,
            "ports_gbs": board.memory_ports * port_gbs,
            "in_flight_bytes": in_flight, "rrob_bytes": RROB_BYTES,
            "latency_cycles": latency_cycles(board, latency_ns),
            "max_burst": master.max_burst, "max_outstanding": master.max_outstanding,
            "fifo_depth": master.fifo_depth,
            "window_bytes": master.max_burst * master.max_outstanding * bytes_,
            "fifo_bytes": master.fifo_depth * bytes_,
        })
    return rows


def littles_law_markdown(latency_ns=LATENCY_NS):
    """The Little's-law table of ``docs/memory.md`` (``tests/test_axi_master.py`` checks it)."""
    lines = [
        "| board | memory | target GB/s | port | memory clock | GB/s per port | ports needed "
        "| ports × width × clock | in flight per port at "
        f"{latency_ns:g} ns | reorder buffer | max_burst × max_outstanding | data FIFO (credits) |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in littles_law_rows(latency_ns):
        lines.append(
            f"| {r['board']} | {r['memory']} | {r['mem_bw_gbs']:g} | {r['port_bits']} bit "
            f"| {r['memory_clock_mhz']:g} MHz | {r['port_gbs']:g} | {r['ports']} "
            f"| {r['ports_gbs']:g} GB/s | {r['in_flight_bytes']:,.0f} B "
            f"({r['latency_cycles']} cycles) | {r['rrob_bytes']:,} B "
            f"| {r['max_burst']} × {r['max_outstanding']} = {r['window_bytes']:,} B "
            f"| {r['fifo_depth']} beats = {r['fifo_bytes']:,} B |")
    return "\n".join(lines)


# --- the weight stream: both BSFP planes at the linear unit's rate ------------------------

#: Weight beats per efficiency run: whole tiles (one column of 64 slots, one port) of
#: WEIGHT_K inputs, WEIGHT_JOBS of them.
WEIGHT_K = 1024
WEIGHT_JOBS = 4
#: Byte-address width of the weight bench's memory (1 MB holds 4,096 verify beats of
#: 64 weights: 512 KB).
WEIGHT_ADDR_WIDTH = 20
#: Boards of the weight-stream figures.
WEIGHT_BOARDS = ("vhk158", "vck190")


def measure_weight_stream(board_name="vhk158", *, mode="verify", latency_ns=LATENCY_NS,
                          stall=STALL, k=WEIGHT_K, jobs=WEIGHT_JOBS, seed=1, **overrides):
    """Stream ``jobs`` whole tiles of ``k`` beats through ``hw.weight_stream.WeightStream``
    at ``board_name``'s scale (its rows, port width, fabric and memory clocks), the weight
    output ready every cycle except for ``stall`` random stalls; returns
    ``(stream, params, stats)``.

    ``stats`` holds ``beats_per_cycle`` (beats ÷ cycles while streaming), ``most`` (the
    beats the stream could have given: ``weight_beats`` each cycle the output was ready,
    or ``port_rate`` each cycle, what one memory port delivers, whichever is less),
    ``efficiency`` (beats ÷ ``most``) and ``ar_bytes``, the bytes requested on each
    port's AR.
    """
    from specgen.hw.weight_stream import WeightStream
    from specgen.sim.runner import run_bench

    config = preset(board_name)
    board = config.board
    ws = WeightStream.from_config(config, addr_width=WEIGHT_ADDR_WIDTH, max_beats=k,
                                  **overrides)
    # A port of as many columns as a transfer holds: whole tiles of k // cols inputs, k
    # beats a job, unpacked (an input never pads a transfer).
    cols = ws.weight_beats
    params = dict(rows=ws.rows, cols=cols, ports=1, max_k=k // cols, max_beats=k,
                  full_jobs=True,
                  weight_beats=ws.weight_beats,
                  addr_width=ws.master.addr_width, data_width=ws.master.data_width,
                  word_bits=ws.word_width, max_burst=ws.master.max_burst,
                  sync_mhz=board.clock_mhz, mem_mhz=board.memory_clock_mhz,
                  latency=latency_cycles(board, latency_ns), ar_stall=stall, r_stall=0.0,
                  out_stall=stall, jobs=jobs, mode=mode)
    with tempfile.TemporaryDirectory() as tmp, _progress_to_stderr():
        report = Path(tmp) / "weight_stream.json"
        run_bench(ws, name=ws.module_name, module="specgen.sim.weight_stream", testcase="stream",
                  seed=seed, params=dict(params, report=str(report)))
        stats = json.loads(report.read_text())
    return ws, params, stats


def weight_stream_rows():
    """Per board and pass: efficiency and bytes requested of one weight stream."""
    rows = []
    for name in WEIGHT_BOARDS:
        for mode in ("verify", "draft"):
            ws, params, stats = measure_weight_stream(name, mode=mode)
            rows.append({"board": name, "mode": mode, "stream": ws, "params": params,
                         "stats": stats})
    return rows


def weight_stream_benchmarks(rows=None):
    """The weight-stream rows of the ``memory`` benchmark."""
    rows = weight_stream_rows() if rows is None else rows
    out = []
    for r in rows:
        ws, p, s = r["stream"], r["params"], r["stats"]
        out.append({
            "name": f"memory: weight stream beat efficiency ({r['board']}, {r['mode']} pass)",
            "value": round(s["efficiency"], 4), "unit": "fraction", "command": COMMAND,
            "board": r["board"], "pass": r["mode"],
            "note": (f"{s['beats']:,} beats of {ws.rows} weights ({p['jobs']} tiles of "
                     f"{p['max_k']}), each checked against golden.weight_planes, "
                     f"{ws.weight_beats} a transfer; {s['ready_cycles']:,} ready cycles of "
                     f"{s['cycles']:,} while streaming ({s['beats_per_cycle']:.3f} beats a "
                     f"cycle), against at most {s['most']:,.0f} beats: a transfer each ready "
                     f"cycle, or the port's {s['port_rate']:.2f} sub-beats a cycle, whichever "
                     f"is less; "
                     f"fabric {p['sync_mhz']:g} MHz, memory {p['mem_mhz']:g} MHz, "
                     f"{ws.master.data_width}-bit ports, read latency {p['latency']} memory "
                     f"cycles ({LATENCY_NS:g} ns), {100 * p['out_stall']:g} % stalls on AR and "
                     f"the output; {ws.module_name}; Verilator, seed 1"),
        })
    by = {(r["board"], r["mode"]): sum(r["stats"]["ar_bytes"]) for r in rows}
    for name in WEIGHT_BOARDS:
        if (name, "verify") in by and (name, "draft") in by:
            out.append({
                "name": f"memory: weight stream draft / verify bytes requested ({name})",
                "value": round(by[(name, "draft")] / by[(name, "verify")], 4),
                "unit": "fraction", "command": COMMAND,
                "note": (f"bytes on AR over the four ports: draft {by[(name, 'draft')]:,}, "
                         f"verify {by[(name, 'verify')]:,}, for the same tiles"),
            })
    return out
