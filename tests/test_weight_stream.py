# amaranth: UnusedElaboratable=no
"""The weight stream (hw/weight_stream.py), its plane layout (golden/weight_planes.py) and
the cocotb bench of sim/weight_stream.py on Verilator."""

import dataclasses

import numpy as np
import pytest

from specgen.golden import weight_planes as wp
from specgen.golden.bsfp import BSFPConfig, encode, merge_planes, pack_nibbles, split_planes
from specgen.golden.config import VectorConfig, preset
from specgen.hw.weight_stream import WeightStream
from specgen.sim.runner import run_bench

SIM = preset("sim").board

#: A small stream: 4 weights per beat (16-bit sub-beats, 4 to a 64-bit port beat), 64 KB
#: of memory, bursts of at most 16 beats, 4 in flight.
SMALL = dict(rows=4, max_beats=512, addr_width=16, data_width=64, max_burst=16,
             max_outstanding=4, fifo_depth=64)

#: 200 ns of read latency at the sim memory clock (150 MHz: 30 cycles), stalls on AR, R
#: and the weight output.
STRESS = dict(latency=SIM.memory_latency_cycles(200.0), ar_stall=0.3, r_stall=0.3,
              out_stall=0.3, cmd_idle=0.1)


def _rng_tile(seed, n_rows, k):
    rng = np.random.default_rng(seed)
    return encode((rng.standard_normal((n_rows, k)) * 3).astype(np.float16),
                  config=BSFPConfig())


# --- golden: the plane layout against split_planes / merge_planes ------------------------

@pytest.mark.parametrize("rows,word_bits", [(4, 64), (2, 32), (64, 256), (64, 512), (3, 64)])
def test_plane_images_match_split_planes(rows, word_bits):
    """The images' 4-bit fields, read back, are split_planes' nibble plane and residue
    plane; merged they give the stored words back."""
    t = _rng_tile(rows, rows * 3 - 1, 11)
    words = wp.column_beats(t.stored, rows=rows, cols=3, ports=1, port=0)
    nib_img, res_img = wp.plane_images(words, word_bits=word_bits)
    n = words.shape[0]
    region = wp.region_bytes(n, rows=rows, word_bits=word_bits)
    assert len(nib_img) == region and len(res_img) == 3 * region
    assert region % (word_bits // 8) == 0 and region * 8 >= n * rows * 4
    nib = wp.unpack_slice(nib_img, n_beats=n, rows=rows)
    res = sum(wp.unpack_slice(res_img[j * region:(j + 1) * region], n_beats=n,
                              rows=rows).astype(np.uint16) << (4 * j) for j in range(3))
    want_nib, want_res = split_planes(words)
    np.testing.assert_array_equal(nib, want_nib)
    np.testing.assert_array_equal(res, want_res)
    np.testing.assert_array_equal(merge_planes(nib, res), words)
    # The padding is zero.
    assert not any(nib_img[(n * rows * 4 + 7) // 8:])
    if rows % 2 == 0:
        # Sub-beats of whole bytes: the nibble region is pack_nibbles of the beats.
        assert nib_img[:n * rows // 2] == pack_nibbles(want_nib).tobytes()


@pytest.mark.parametrize("n_out,k,rows,cols,max_k,word_bits", [
    (1, 1, 1, 1, 1, 8), (17, 40, 2, 4, 16, 512), (5376, 2560, 64, 84, 8192, 256),
    (2560, 5120, 64, 84, 8192, 256), (100, 33, 3, 5, 7, 64), (9, 16, 2, 4, 16, 32)])
@pytest.mark.parametrize("ports", [1, 2])
@pytest.mark.parametrize("split", [False, True], ids=["whole", "split"])
@pytest.mark.parametrize("beats", [1, 2])
def test_matrix_sizes_are_the_sum_of_the_jobs(n_out, k, rows, cols, max_k, word_bits, ports,
                                              split, beats):
    """The closed forms the memory map uses equal the job list, job by job, with the last
    tile whole or cut into pieces, for one or two column beats a transfer."""
    if cols % ports:
        ports = 1
    if (cols // ports) % beats:
        beats = 1
    kw = dict(rows=rows, cols=cols, max_k=max_k, split=split)
    jobs = wp.matrix_tiles(n_out, k, **kw)
    assert wp.matrix_job_count(n_out, k, **kw) == len(jobs)
    assert sum(j.n_rows for j in jobs) == n_out * -(-k // max_k)
    starts = sorted({j.row0 for j in jobs})
    if not split:
        assert starts == list(range(0, n_out, rows * cols))
    # Every row once: the pieces follow each other, each starting on a result beat.
    assert [r for r in starts] == [0] + [j.row0 + j.n_rows for j in jobs if j.k0 == 0][:-1]
    assert all(j.row0 % cols == 0 for j in jobs)
    assert {(j.row0, j.k0) for j in jobs} == {(r, c) for r in starts for c in range(0, k, max_k)}

    def packed(n_rows):
        # Beats a sub-beat: the most of 1, 2, 4, 8 dividing rows whose share of a column's
        # slots holds every used one (row h·cols + g < n_rows has h < ceil(n_rows/cols)).
        return max(q for q in (1, 2, 4, 8) if rows % q == 0 and -(-n_rows // cols) <= rows // q)

    def subs(n_k, q):
        # An input's columns of the port, q to a sub-beat, rounded up to whole transfers.
        per = -(-(cols // ports) // q)
        return n_k * -(-per // beats) * beats
    nib = sum(ports * wp.region_bytes(subs(j.n_k, packed(j.n_rows)), rows=rows,
                                      word_bits=word_bits)
              for j in jobs)
    assert wp.matrix_plane_bytes(n_out, k, **kw, word_bits=word_bits, ports=ports,
                                 weight_beats=beats) == (nib, 3 * nib)
    if n_out * k <= 4096:
        stored = np.random.default_rng(0).integers(0, 1 << 16, (n_out, k), dtype=np.uint16)
        a, b, packed_jobs = wp.pack_matrix(stored, **kw, word_bits=word_bits, ports=ports,
                                           weight_beats=beats)
        assert (len(a), len(b)) == (nib, 3 * nib)
        assert [(j.row0, j.n_rows, j.k0) for j in packed_jobs] == [
            (j.row0, j.n_rows, j.k0) for j in jobs]


@pytest.mark.parametrize("rows,cols", [(64, 8), (64, 84), (4, 4), (2, 4), (3, 5), (12, 2),
                                       (8, 1)])
def test_split_pieces_read_the_fewest_slots_in_the_fewest_jobs(rows, cols):
    """``tile_pieces`` with ``split`` against a search over every way to cut a last tile
    of ``r`` rows into pieces starting on result beats (multiples of ``cols``): the
    pieces read the fewest slots (a piece reads its pack's share of the tile), and no
    cut reading as few takes fewer jobs. Without ``split`` the last tile is one piece."""
    S = rows * cols

    def slots(n):
        # The share of the tile a piece of n rows reads: the smallest S/q, q of 1, 2, 4, 8
        # dividing rows, whose columns hold its rows (row h·cols + g has h < rows/q).
        return min(S // q for q in (1, 2, 4, 8) if rows % q == 0 and -(-n // cols) <= rows // q)
    best = [(0, 0)]                              # (slots, pieces) of the best cut of r rows
    for r in range(1, S):
        cuts = [r] + list(range(cols, r, cols))  # the last piece, or one of whole beats
        best.append(min((slots(n) + best[r - n][0], 1 + best[r - n][1]) for n in cuts))
    for r in sorted({*range(1, S, max(1, S // 97)), S - 1, 1}):
        whole = wp.tile_pieces(S + r, rows=rows, cols=cols)
        assert whole == [(0, S), (S, r)]
        pieces = wp.tile_pieces(S + r, rows=rows, cols=cols, split=True)
        assert pieces[0] == (0, S)
        assert [a for a, _ in pieces[1:]] == [S + sum(n for _, n in pieces[1:i])
                                             for i in range(1, len(pieces))]
        assert sum(n for _, n in pieces) == S + r
        got = (sum(slots(n) for _, n in pieces[1:]), len(pieces) - 1)
        assert got == best[r], f"{rows} x {cols}, {r} rows: {pieces[1:]} read {got}, {best[r]}"
        assert got[0] <= slots(r)
    assert wp.tile_pieces(S, rows=rows, cols=cols, split=True) == [(0, S)]


def test_split_pieces_on_the_papers_shapes():
    """VCK190's 64 × 8 slots (512): the 2.7B in_proj's last tile (10,576 − 20·512 = 336
    rows) reads 384 slots as 256 rows packed 2 and 80 packed 4, not 512; the 370M
    draft's (4,384 − 8·512 = 288) 320 as 256 and 32 packed 8."""
    def last(n_out):
        return [(n, wp.pack_factor(n, rows=64, cols=8))
                for _, n in wp.tile_pieces(n_out, rows=64, cols=8, split=True) if n < 512]
    assert last(10576) == [(256, 2), (80, 4)]
    assert last(4384) == [(256, 2), (32, 8)]


def test_pack_factor_on_the_papers_shapes():
    """VHK158's 64 × 84 slots: the 370M draft's out_proj (1,024 rows) packs four beats a
    sub-beat, the 2.7B's (2,560) two, a full tile none; the sim array (2 × 4) packs a
    tile of at most 4 rows two to one."""
    assert [wp.pack_factor(n, rows=64, cols=84) for n in (1024, 2560, 5376, 672, 673, 1)] == [
        4, 2, 1, 8, 4, 8]
    assert [wp.pack_factor(n, rows=2, cols=4) for n in (1, 4, 5, 8)] == [2, 2, 1, 1]
    assert wp.pack_factor(5, rows=3, cols=4) == 1
    with pytest.raises(ValueError, match=r"n_rows must be"):
        wp.pack_factor(5377, rows=64, cols=84)


def test_packed_beats_hold_the_used_slots_in_order():
    """Packing keeps each beat's used slots, ``rows / q`` of them, one beat after another:
    the sub-beats, read as one stream of weights, are the beats' used slots in order;
    unpacking gives the beats back; a non-zero slot above them is refused."""
    rng = np.random.default_rng(5)
    for rows, q, n in ((64, 4, 13), (8, 2, 6), (8, 8, 3), (4, 1, 5)):
        used = rows // q
        beats = np.zeros((n, rows), np.uint16)
        beats[:, :used] = rng.integers(0, 1 << 16, (n, used), dtype=np.uint16)
        packed = wp.pack_beats(beats, q)
        assert packed.shape == (-(-n // q), rows)
        stream = packed.reshape(-1)
        assert np.array_equal(stream[:n * used], beats[:, :used].reshape(-1))
        assert not stream[n * used:].any()
        assert np.array_equal(wp.unpack_beats(packed, q, n), beats)
    bad = np.zeros((2, 8), np.uint16)
    bad[1, 4] = 1
    with pytest.raises(ValueError, match=r"only padding rows may be packed away"):
        wp.pack_beats(bad, 2)
    with pytest.raises(ValueError, match=r"per_input must divide the beats \(2\), not 3"):
        wp.pack_beats(np.zeros((2, 8), np.uint16), 2, per_input=3)
    with pytest.raises(ValueError, match=r"pack must be one of 1, 2, 4, 8"):
        wp.pack_beats(bad, 3)


@pytest.mark.parametrize("rows,per_input,q,align", [
    (64, 14, 2, 2), (64, 14, 4, 2), (64, 14, 8, 2), (64, 14, 1, 2), (64, 8, 8, 1),
    (4, 6, 4, 2), (2, 1, 2, 2), (8, 5, 2, 1)])
def test_packed_inputs_restart_and_fill_whole_transfers(rows, per_input, q, align):
    """Packed input by input (VHK158: 14 columns a port, two sub-beats a transfer): each
    input's beats fill ``ceil(ceil(per_input / q) / align) · align`` sub-beats, beat ``c``
    in piece ``c mod q`` of sub-beat ``c div q`` of its input, the rest zero, so no
    transfer of ``align`` sub-beats holds two inputs; unpacking gives the beats back."""
    rng = np.random.default_rng(rows + per_input + q)
    used, n_k = rows // q, 3
    beats = np.zeros((n_k * per_input, rows), np.uint16)
    beats[:, :used] = rng.integers(1, 1 << 16, (n_k * per_input, used), dtype=np.uint16)
    packed = wp.pack_beats(beats, q, per_input=per_input, align=align)
    each = -(-(-(-per_input // q)) // align) * align
    assert each == wp.input_sub_beats(per_input, q, align)
    assert packed.shape == (n_k * each, rows)
    for k in range(n_k):
        for s in range(each):
            for i in range(q):
                c = s * q + i
                piece = packed[k * each + s, i * used:(i + 1) * used]
                if c < per_input:
                    assert np.array_equal(piece, beats[k * per_input + c, :used])
                else:
                    assert not piece.any()
    assert np.array_equal(wp.unpack_beats(packed, q, len(beats), per_input=per_input,
                                          align=align), beats)
    assert wp.job_sub_beats(n_k, cols=per_input, pack=q, weight_beats=align) == n_k * each
    with pytest.raises(ValueError, match="weight_planes.weight_beats must be an integer >= 1, "
                                         "not 0"):
        wp.job_sub_beats(n_k, cols=per_input, pack=q, weight_beats=0)


def test_packed_inputs_on_the_papers_shapes():
    """An input of VHK158's weight port (14 columns, two sub-beats a transfer): 7 transfers
    unpacked, 4 packed 2 (the 2.7B out_proj), 2 packed 4 (the 370M draft's), 1 packed 8;
    VCK190's (8 columns, one a transfer): 8, 4, 2, 1; the sim array's (4, two): 2, 1."""
    assert [wp.input_sub_beats(14, q, 2) // 2 for q in (1, 2, 4, 8)] == [7, 4, 2, 1]
    assert [wp.input_sub_beats(8, q, 1) for q in (1, 2, 4, 8)] == [8, 4, 2, 1]
    assert [wp.input_sub_beats(4, q, 2) // 2 for q in (1, 2)] == [2, 1]


def test_a_small_job_reads_only_its_rows():
    """A 3-row job on a 2 × 4 array packs two beats a sub-beat: its nibble region is the
    nibbles of its real rows, column by column and input by input, and nothing else."""
    rng = np.random.default_rng(6)
    stored = rng.integers(0, 1 << 16, (3, 5), dtype=np.uint16)
    nib, res = wp.job_images(stored, rows=2, cols=4, word_bits=32)
    assert len(nib) == wp.job_port_bytes(5, rows=2, cols=4, word_bits=32, pack=2)
    # 10 sub-beats of 8 bits in 32-bit words, against 20 beats unpacked.
    assert (len(nib), wp.job_port_bytes(5, rows=2, cols=4, word_bits=32)) == (12, 20)
    # Slot 0 of column g is row g; slot 1 (row 4 + g) is padding and not stored.
    want = [((int(stored[g, k]) >> 15) << 3 | (int(stored[g, k]) >> 11) & 7) if g < 3 else 0
            for k in range(5) for g in range(4)]
    got = wp.unpack_slice(nib, n_beats=len(want) // 2, rows=2).reshape(-1)
    assert list(got) == want


@pytest.mark.parametrize("ports", [1, 2, 4])
def test_job_images_put_each_port_at_its_offset(ports):
    """Port p's regions start p (nibble) and 3p (residue) port regions into the job, each
    the column beats of its columns g ≡ p (mod ports): what the LinearEngine computes."""
    rng = np.random.default_rng(ports)
    stored = rng.integers(0, 1 << 16, (7, 5), dtype=np.uint16)
    nib, res = wp.job_images(stored, rows=2, cols=4, ports=ports, word_bits=64)
    r = wp.job_port_bytes(5, rows=2, cols=4, ports=ports, word_bits=64)
    assert len(nib) == ports * r and len(res) == 3 * ports * r
    for p in range(ports):
        words = wp.column_beats(stored, rows=2, cols=4, ports=ports, port=p)
        a, b = wp.plane_images(words, word_bits=64)
        assert nib[p * r:(p + 1) * r] == a and res[3 * p * r:3 * (p + 1) * r] == b
    with pytest.raises(ValueError, match="weight_planes.ports must divide cols \\(4\\), not 3"):
        wp.job_images(stored, rows=2, cols=4, ports=3, word_bits=64)
    # A job of at most 4 rows packs two beats to a sub-beat, port by port alike.
    small = stored[:4]
    nib, res = wp.job_images(small, rows=2, cols=4, ports=ports, word_bits=64)
    r = wp.job_port_bytes(5, rows=2, cols=4, ports=ports, word_bits=64, pack=2)
    assert len(nib) == ports * r and len(res) == 3 * ports * r
    for p in range(ports):
        words = wp.column_beats(small, rows=2, cols=4, ports=ports, port=p)
        a, b = wp.plane_images(wp.pack_beats(words, 2, per_input=4 // ports), word_bits=64)
        assert nib[p * r:(p + 1) * r] == a and res[3 * p * r:3 * (p + 1) * r] == b


def test_engine_weight_ports_keep_the_slots_busy():
    # cols / max_tokens column beats a cycle, rounded up to a divisor of cols.
    assert [wp.engine_weight_ports(preset(n)) for n in ("sim", "vck190", "vhk158")] == [1, 1, 6]
    cfg = preset("sim")
    for cols, tokens, want in [(84, 16, 6), (84, 4, 21), (10, 3, 5), (7, 2, 7), (8, 16, 1)]:
        c = cfg.replace(linear=dataclasses.replace(cfg.linear, cols=cols, max_tokens=tokens,
                                                   weight_beats=1),
                        vector=VectorConfig(lanes=1))
        assert wp.engine_weight_ports(c) == want, (cols, tokens)


def test_draft_reads_a_quarter():
    """Per job the nibble plane is a quarter of the bytes of both planes."""
    words = wp.column_beats(_rng_tile(1, 100, 40).stored, rows=64, cols=2)
    nib, res = wp.plane_images(words, word_bits=256)
    assert len(nib) * 4 == len(nib) + len(res)


def test_column_beats_order():
    """Slot h of the port's beat (k, g) is row h * cols + g, padding rows zero."""
    stored = np.arange(1, 1 + 5 * 3, dtype=np.uint16).reshape(5, 3)    # W[r, k]
    beats = wp.column_beats(stored, rows=2, cols=4, ports=2, port=1)
    # Port 1 carries columns 1, 3; rows h*4 + g: (1, 5) and (3, 7); rows 5, 7 are padding.
    want = [[stored[1, k], 0] if g == 1 else [stored[3, k], 0]
            for k in range(3) for g in (1, 3)]
    np.testing.assert_array_equal(beats, np.array(want, np.uint16))


def test_column_beats_check_can_fail():
    with pytest.raises(ValueError) as info:
        wp.column_beats(np.zeros((9, 2), np.uint16), rows=2, cols=4)
    assert str(info.value) == ("weight_planes.stored must have shape (n_rows, K) with n_rows "
                               "in [1, 8], not (9, 2)")


def test_expected_beats_restore_the_weight():
    """Verify beats carry the scaled word without bit 14 (e4 = 0 after scaling); the
    scaled word times 2**k is the original weight."""
    t = _rng_tile(3, 8, 5)
    weight, nibble = wp.expected_beats(t.stored, mode="verify")
    orig = t.reconstruct()
    scaled = ((weight >> 14) << 15) | (weight & 0x3FFF)
    back = scaled.view(np.float16).astype(np.float64) * 2.0 ** int(t.scales)
    np.testing.assert_array_equal(back, orig.view(np.float16).astype(np.float64))
    np.testing.assert_array_equal(nibble, t.nibbles)
    w_draft, n_draft = wp.expected_beats(t.stored, mode="draft")
    assert not w_draft.any()
    np.testing.assert_array_equal(n_draft, nibble)
    with pytest.raises(ValueError) as info:
        wp.expected_beats(t.stored, mode="target")
    assert str(info.value) == "weight_planes.mode must be one of 'verify', 'draft', not 'target'"


@pytest.mark.parametrize("ports,port", [(1, 0), (3, 1), (4, 3)])
def test_verify_beats_are_what_the_dsp_linear_unit_bench_drives(monkeypatch, ports, port):
    """The stream's verify beats of a tile, by this layout's route (column_beats,
    expected_beats, sim.weight_stream.beat_value), equal the weight beats that the
    DSPLinearUnit's own bench drives into the RTL for that tile (sim.dsp_linear_unit.Job,
    checked there against golden.dsp): same order, same bits."""
    from specgen.golden import bsfp
    from specgen.sim.dsp_linear_unit import Job
    from specgen.sim.weight_stream import beat_value
    tensors = []
    real = bsfp.encode

    def spy(*args, **kwargs):
        tensors.append(real(*args, **kwargs))
        return tensors[-1]

    monkeypatch.setattr(bsfp, "encode", spy)
    rows, cols = 4, 4
    job = Job(np.random.default_rng(7), rows=rows, cols=cols, max_tokens=2, max_k=9, mode=0,
              steps=9, n_rows=13, n_tokens=1)
    (t,) = tensors
    words = wp.column_beats(t.stored, rows=rows, cols=cols, ports=ports, port=port)
    weight, nibble = wp.expected_beats(words, mode="verify", config=t.config)
    ours = [beat_value(weight[i], nibble[i], int(t.scales), rows) for i in range(len(words))]
    assert ours == job.w_beats(port, ports)
    # The comparison tells the ports apart (and with one port, a reversed order).
    other = job.w_beats((port + 1) % ports, ports) if ports > 1 else job.w_beats(0, 1)[::-1]
    assert ours != other


# --- parameters -------------------------------------------------------------------------

@pytest.mark.parametrize("change,exc,message", [
    ({"rows": 3}, ValueError, "WeightStream.rows must make 4 * rows a power of two (2, 4, 8, "
                              "16, 32, 64, ...), not 3"),
    ({"rows": 1}, ValueError, "WeightStream.rows must be an integer >= 2, not 1"),
    ({"max_beats": 0}, ValueError, "WeightStream.max_beats must be an integer >= 1, not 0"),
    # 100,000 beats of 16 bits in four regions: 800,000 bytes, over 64 KB.
    ({"max_beats": 100000}, ValueError, "WeightStream.max_beats must leave a job's four "
                                        "regions within addr_width (16 bits), not 100000 "
                                        "(800000 bytes)"),
    ({"stages": 0}, ValueError, "WeightStream.stages must be an integer in [1, 4], not 0"),
    ({"data_width": 48}, ValueError, "AXI4ReadMaster.data_width must be one of 32, 64, 128, "
                                     "256, 512 for memory 'DDR', not 48"),
    ({"config": "E3M0"}, TypeError, "WeightStream.config must be a golden.bsfp.BSFPConfig, "
                                    "not 'E3M0'"),
])
def test_rejects_bad_parameters(change, exc, message):
    with pytest.raises(exc) as info:
        WeightStream(**(SMALL | change))
    assert str(info.value) == message


def test_parameters_are_keyword_only():
    with pytest.raises(TypeError):
        WeightStream(4, 512, 16, 64, 16, 4, 64)


@pytest.mark.parametrize("board", ["vck190", "vhk158"])
def test_from_config_follows_the_board(board):
    config = preset(board)
    ws = WeightStream.from_config(config)
    ws._MustUse__silence = True     # built for its sizes only
    assert ws.rows == config.linear.rows
    assert ws.master.data_width == config.board.memory_port_bits
    # Sub-beats of 64 weights x 4 bits, linear.weight_beats of them a transfer (VHK158 2,
    # VCK190 1), in words of that many or a port beat of two.
    assert ws.sub_beat_bits == 256
    beats = config.linear.weight_beats
    assert ws.weight_beats == ws.rate == beats == {"vhk158": 2, "vck190": 1}[board]
    assert ws.word_width == max(beats * 256, config.board.memory_port_bits) == 512
    # The memory map and the runtime image lay the planes out in this word.
    assert ws.word_width == wp.stream_word_bits(config)
    # The unpacking register and one output register.
    assert ws.latency == 2 and ws.packs == (1, 2, 4, 8)
    # Each plane's port carries at least 90 % of the sub-beats a transfer asks a fabric
    # cycle (VHK158: 14.4 GB/s for 2 x 32 B at 250 MHz, 16 GB/s; VCK190: 19.2 for 12.8).
    ask = beats * ws.sub_beat_bits / 8 * config.board.clock_mhz / 1e3
    assert config.board.memory_port_gbs >= 0.9 * ask


# --- the bench --------------------------------------------------------------------------

def _bench_params(ws, **extra):
    # Three columns on two ports (two and one) with one beat a transfer; with more, twice
    # as many columns a port as beats a transfer.
    cols = 3 if ws.weight_beats == 1 else 4 * ws.weight_beats
    return dict(rows=ws.rows, cols=cols, ports=2, max_k=40, max_beats=ws.max_beats,
                weight_beats=ws.weight_beats,
                addr_width=ws.master.addr_width, data_width=ws.master.data_width,
                word_bits=ws.word_width, max_burst=ws.master.max_burst,
                sync_mhz=SIM.clock_mhz, mem_mhz=SIM.memory_clock_mhz, **STRESS) | extra


@pytest.mark.sim
@pytest.mark.parametrize("rows,data_width,beats", [
    pytest.param(4, 64, 1, id="r4-d64"),
    # Two beats a transfer from words of two sub-beats (VHK158's shape: 256-bit sub-beats
    # in 512-bit words), and from words of four.
    pytest.param(16, 32, 2, id="r16-d32-x2", marks=pytest.mark.slow),
    pytest.param(4, 64, 2, id="r4-d64-x2", marks=pytest.mark.slow),
    pytest.param(16, 32, 1, id="r16-d32", marks=pytest.mark.slow)])
def test_weight_stream_verilator(rows, data_width, beats):
    """Both passes mixed, random latency-200 ns memory, stalls on every channel and the
    output, and a reset in mid-burst; sub-beats four to a word, and words of two beats;
    one or two beats a transfer. Draft jobs read from the draft plane (wide) among them:
    four stripes on the four masters, a transfer's elements the four groups' nibbles."""
    ws = WeightStream(**(SMALL | dict(rows=rows, data_width=data_width, weight_beats=beats,
                                      draft_plane=True)))
    run_bench(ws, name=ws.module_name, module="specgen.sim.weight_stream",
              testcase=["random_jobs", "reset_mid_burst"],
              params=_bench_params(ws, jobs=10, reset_at=200, draft_plane=True))


@pytest.mark.sim
def test_weight_stream_bench_catches_a_corrupt_byte():
    """One flipped byte in the memory image is caught, in the beat it belongs to."""
    ws = WeightStream(**SMALL)
    run_bench(ws, name=ws.module_name, module="specgen.sim.weight_stream",
              testcase="corrupt_byte_caught", params=_bench_params(ws))


# --- beat efficiency at board scale (gen/bench/memory.py), short --------------------------

@pytest.mark.sim
@pytest.mark.slow
def test_weight_stream_efficiency_at_200ns_vhk158():
    """vhk158 scale (64 weights a beat, two a transfer, four 256-bit HBM ports at 450 MHz,
    fabric at 250 MHz), 200 ns of read latency, 10 % stalls: in both passes the output's
    ready cycles carry at least 95 % of the 1.8 beats a cycle a port delivers, and the
    draft requests a quarter of the bytes."""
    from specgen.gen.bench.memory import measure_weight_stream
    # Two jobs of 1,024 beats: each job's start costs a few cycles of the ports' 1.8
    # beats a cycle (jobs of 512 measured 0.944 in verify; a 2.7B job is 14 columns ×
    # K inputs, at least 35,840 beats a port).
    got = {mode: measure_weight_stream("vhk158", mode=mode, k=1024, jobs=2)[2]
           for mode in ("verify", "draft")}
    for stats in got.values():
        assert stats["port_rate"] == pytest.approx(1.8) and stats["efficiency"] >= 0.95, stats
    verify, draft = sum(got["verify"]["ar_bytes"]), sum(got["draft"]["ar_bytes"])
    # 2,048 beats of 64 nibbles (32 B) per plane slice; verify reads four slices.
    assert draft == 2048 * 32 and verify == 4 * draft


@pytest.mark.sim
@pytest.mark.slow
def test_weight_stream_efficiency_check_can_fail():
    """Masters with a 64-beat FIFO (2 KB, less than the 2,880 B a port keeps in flight at
    200 ns) miss the target: the figure measures latency hiding."""
    from specgen.gen.bench.memory import measure_weight_stream
    _, _, stats = measure_weight_stream("vhk158", mode="verify", k=512, jobs=2, fifo_depth=64)
    assert stats["efficiency"] < 0.95, stats


def test_from_config_rejects_the_exact_array():
    with pytest.raises(ValueError) as info:
        WeightStream.from_config(preset("sim").replace(
            linear=dataclasses.replace(preset("sim").linear, contract="exact")))
    assert str(info.value) == ("WeightStream.from_config needs linear.contract 'dspfp32' (the "
                               "DSPLinearUnit's weight beats), not 'exact'")


@pytest.mark.parametrize("board", ["vhk158", "vck190"])
def test_board_scale_stream_passes_lint(board, tmp_path):
    """The board-scale stream's Verilog, every module linted with -Wall and the project's
    waivers only."""
    from specgen.sim.lint import lint_component
    ws = WeightStream.from_config(preset(board))
    ok, output = lint_component(ws, folder=tmp_path, hierarchical=True)
    assert ok, output


@pytest.mark.sim
@pytest.mark.slow
def test_weight_stream_long():
    """The random and reset benches at six times the jobs."""
    ws = WeightStream(**SMALL)
    run_bench(ws, name=ws.module_name, module="specgen.sim.weight_stream",
              testcase=["random_jobs", "reset_mid_burst"],
              params=_bench_params(ws, jobs=60, reset_at=1500))


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("corrupt,beats", [(False, 1), (True, 1), (False, 2)],
                         ids=["exact", "corrupt-byte-caught", "exact-x2"])
def test_weight_stream_feeds_the_dsp_linear_unit_verilator(corrupt, beats):
    """The stream drives a DSPLinearUnit's weight port from memory (latency 200 ns, stalls
    on every channel): every result of both passes equals golden.dsp; with one exponent
    bit flipped in memory, a result differs; with two beats a transfer too. (make
    test-slow: make test runs the same pairing inside the LinearEngine,
    tests/test_linear_engine.py.)"""
    from specgen.sim.weight_stream import streamed_linear_unit
    unit = dict(rows=2, cols=4, max_tokens=3, max_k=12)
    stream = SMALL | dict(rows=2, data_width=32, max_beats=unit["max_k"] * unit["cols"],
                          weight_beats=beats)
    top = streamed_linear_unit(unit_args=unit, stream_args=stream)
    run_bench(top, name=top.module_name, module="specgen.sim.weight_stream",
              testcase="feeds_dsp_linear_unit",
              params=dict(unit, jobs=12, max_beats=stream["max_beats"], corrupt=corrupt,
                          addr_width=stream["addr_width"], data_width=32,
                          word_bits=top.stream.word_width, sync_mhz=SIM.clock_mhz,
                          mem_mhz=SIM.memory_clock_mhz, **STRESS))


# --- the draft plane (linear.draft_plane) -----------------------------------------------

@pytest.mark.parametrize("rows,per_input,q,align,word_bits", [
    (64, 14, 1, 2, 512), (64, 14, 2, 2, 512), (64, 14, 4, 2, 512), (4, 6, 1, 2, 64),
    (2, 4, 2, 2, 32), (8, 5, 1, 1, 64), (4, 3, 4, 1, 32)])
def test_draft_plane_stripes_the_nibbles_by_hand(rows, per_input, q, align, word_bits):
    """Each input's packed sub-beats padded to whole draft transfers (4·align), cut into
    groups of ``align`` sub-beats, group g at place g div 4 of stripe g mod 4, each stripe
    read back by ``unpack_slice``; the stream's transfers (``expected_draft_transfers``) are
    the four stripes' sub-beats side by side; the sizes are the closed forms'."""
    rng = np.random.default_rng(rows + per_input + q)
    used, n_k = rows // q, 3
    beats = np.zeros((n_k * per_input, rows), np.uint16)
    beats[:, :used] = rng.integers(1, 1 << 16, (n_k * per_input, used), dtype=np.uint16)
    img = wp.draft_image(beats, word_bits=word_bits, pack=q, per_input=per_input, align=align)
    S = -(-(-(-per_input // q)) // align) * align
    D = -(-S // (4 * align)) * 4 * align
    assert D == wp.draft_input_sub_beats(per_input, q, align)
    stripe_subs = n_k * D // 4
    stripe = wp.region_bytes(stripe_subs, rows=rows, word_bits=word_bits)
    assert len(img) == 4 * stripe
    stripes = [wp.unpack_slice(img[m * stripe:(m + 1) * stripe], n_beats=stripe_subs,
                               rows=rows) for m in range(4)]
    nib = ((beats >> 15) << 3 | (beats >> 11) & 7).astype(np.uint8)   # {s, c}
    for k in range(n_k):
        for c in range(per_input):
            sub = k * D + c // q
            grp, e = divmod(sub, align)
            got = stripes[grp % 4][(grp // 4) * align + e]
            piece = slice((c % q) * used, (c % q + 1) * used)
            assert np.array_equal(got[piece], nib[k * per_input + c, :used])
    # The padding sub-beats and slots are zero.
    total = sum(int(np.count_nonzero(x)) for x in stripes)
    assert total == int(np.count_nonzero(nib[:, :used]))
    n_t, w_t = wp.expected_draft_transfers(beats, pack=q, per_input=per_input, align=align)
    assert n_t.shape == (n_k * D // (4 * align), align, rows)
    for t in range(n_t.shape[0]):
        for e in range(align):
            i = t * align + e
            assert np.array_equal(n_t[t, e], stripes[0][i])
            assert np.array_equal(w_t[t, e], stripes[1][i].astype(np.uint16)
                                  | stripes[2][i].astype(np.uint16) << 4
                                  | stripes[3][i].astype(np.uint16) << 8)


@pytest.mark.parametrize("n_out,k,rows,cols,max_k,word_bits,ports,beats", [
    (17, 40, 2, 4, 16, 512, 1, 2), (100, 33, 4, 6, 7, 64, 1, 2), (9, 16, 2, 4, 16, 32, 2, 2),
    (5376 + 700, 64, 64, 84, 8192, 512, 6, 2)])
def test_draft_plane_sizes_are_the_sum_of_the_jobs(n_out, k, rows, cols, max_k, word_bits,
                                                   ports, beats):
    """``matrix_draft_bytes`` (the memory map's) equals the plane ``pack_matrix_draft``
    builds; each job's offset follows the one before by its ports' ``job_draft_port_bytes``;
    a port's draft plane is its nibble plane's bytes again, padded to whole draft
    transfers and stripes of whole words."""
    kw = dict(rows=rows, cols=cols, max_k=max_k, word_bits=word_bits, ports=ports,
              weight_beats=beats)
    stored = np.random.default_rng(1).integers(0, 1 << 16, (n_out, k), dtype=np.uint16)
    plane, offsets = wp.pack_matrix_draft(stored, **kw)
    assert len(plane) == wp.matrix_draft_bytes(n_out, k, **kw)
    jobs = wp.matrix_tiles(n_out, k, rows=rows, cols=cols, max_k=max_k)
    sizes = [ports * wp.job_draft_port_bytes(
        j.n_k, rows=rows, cols=cols, ports=ports, word_bits=word_bits, weight_beats=beats,
        pack=wp.pack_factor(j.n_rows, rows=rows, cols=cols)) for j in jobs]
    assert offsets == [sum(sizes[:i]) for i in range(len(jobs))]
    # At least the nibble plane's bytes (at the paper's shape about them: the next test).
    nib, _ = wp.matrix_plane_bytes(n_out, k, **kw)
    assert nib <= len(plane)
    with pytest.raises(ValueError, match="weight_planes.weight_beats must be an integer"):
        wp.job_draft_port_bytes(1, rows=rows, cols=cols, ports=ports, word_bits=word_bits,
                                weight_beats=0)


def test_draft_plane_on_the_papers_shape():
    """VHK158: an input of a weight port (14 columns, two sub-beats a transfer) is 2 draft
    transfers unpacked, 1 packed 2, 4 or 8, against 7, 4, 2, 1 on the nibble plane; the
    2.7B's planes grow by the draft copy, about a quarter."""
    assert [wp.draft_input_sub_beats(14, q, 2) // 8 for q in (1, 2, 4, 8)] == [2, 1, 1, 1]
    from specgen.gen.perf.system import layout_weight_bytes, mamba_dims
    c = preset("vhk158")
    d = mamba_dims("2.7B")
    lin = c.linear
    kw = dict(rows=lin.rows, cols=lin.cols, max_k=lin.max_k, word_bits=wp.stream_word_bits(c),
              ports=wp.engine_weight_ports(c), weight_beats=lin.weight_beats)
    draft = (d.n_layer * (wp.matrix_draft_bytes(d.d_in_proj, d.d_model, **kw)
                          + wp.matrix_draft_bytes(d.d_model, d.d_inner, **kw))
             + wp.matrix_draft_bytes(d.vocab, d.d_model, **kw))
    planes = layout_weight_bytes(c, d, bits=16) - d.small_params * 2
    assert 0.25 < draft / planes < 0.30
