"""cocotb bench of :class:`hw.tree_verifier.TreeVerifier` against :mod:`golden.tree`.

Each cycle the bench drives every input just after the rising edge (random
idle on the ``tree`` and ``match`` sources, random back-pressure on the
``schedule`` and ``path`` sinks), waits for the outputs to settle, and records
the transfers. Every schedule beat is compared, in order, with
:func:`golden.tree.schedule_beats` (node, parent slot or root, write slot,
released slot, last of pass), and when a tree's path ends, the path, its token
count, ``peak_level`` and ``error`` with :func:`golden.tree.accepted_path` and
the schedule's peak occupancy. Expected values always come from golden.
"""

import random

import cocotb

from specgen.golden.tree import (TreeShape, accepted_path, fifo_schedule, overflow_node, schedule_beats,
                         seed_shapes)
from specgen.hw.bits import index_width
from specgen.sim.bench import TB, RandomResets, params, seed

FIELDS = ("node_valid", "node", "root", "parent_slot", "write_slot", "release", "release_slot", "last")


def random_tree(rng, *, max_nodes, max_depth=6, max_branch=3):
    """A random irregular BFS tree: every node below ``max_depth`` gets 0–3 children."""
    depth_limit = rng.randint(1, max_depth)
    parents, depth = [-1], [0]
    i = 0
    while i < len(parents):
        if depth[i] < depth_limit:
            lo = 1 if i == 0 else 0
            for _ in range(rng.randint(lo, max_branch)):
                if len(parents) == max_nodes:
                    break
                parents.append(i)
                depth.append(depth[i] + 1)
        i += 1
    return parents


def random_shape_tree(rng, *, max_nodes):
    """A random full tree from a per-depth branching list (1–3 per depth, depth 1–6)."""
    while True:
        shape = TreeShape(tuple(rng.randint(1, 3) for _ in range(rng.randint(1, 6))))
        if shape.num_nodes <= max_nodes:
            return [int(x) for x in shape.parents]


def expected(parents, match, *, fifo_depth, passes):
    """Everything the DUT must produce for one tree, from golden."""
    ov = overflow_node(parents, fifo_depth=fifo_depth)
    if ov is None:
        sched = fifo_schedule(parents, fifo_depth=fifo_depth)
        beats, peak = schedule_beats(sched, passes=passes), sched.peak_live
    else:
        sched = fifo_schedule(parents, fifo_depth=fifo_depth, check=False)
        beats, peak = schedule_beats(sched, upto=ov), int(sched.live[:ov].max())
    path = accepted_path(parents, match)
    return dict(beats=beats, peak=peak, error=int(ov is not None), path=list(path.nodes),
                tokens=path.tokens)


class Job:
    """One tree in flight: its input beats and the outputs still expected."""

    def __init__(self, parents, match, passes, fifo_depth, bad=False):
        self.parents, self.match, self.passes = parents, match, passes
        if bad:
            # A broken BFS order: golden defines no schedule or path for it, so only
            # ``error`` and the absence of schedule beats are checked.
            self.exp = dict(beats=[], peak=0, error=1, path=None, tokens=None)
        else:
            self.exp = expected(parents, match, fifo_depth=fifo_depth, passes=passes)
        self.bad = bad
        self.restart()

    def restart(self):
        self.tree_i = 0
        self.match_i = 0
        self.beats = []
        self.path = []
        self.sched_cycles = []
        self.match_last_cycle = None
        self.path_first_cycle = None


def _unpack(value, widths):
    out = {}
    for name, w in widths:
        out[name] = value & ((1 << w) - 1)
        value >>= w
    return out


async def _run(dut, jobs, *, idle, stall, reset_every=None, max_cycles=200_000):
    p = params()
    nb, sb = index_width(p["max_nodes"]), index_width(p["fifo_depth"])
    sched_w = [("node_valid", 1), ("node", nb), ("root", 1), ("parent_slot", sb), ("write_slot", sb),
               ("release", 1), ("release_slot", sb), ("last", 1)]
    path_w = [("node", nb), ("tokens", nb + 1), ("last", 1)]
    tb = TB(dut)
    rng = tb.rng
    for port in ("tree__valid", "tree__payload", "match__valid", "match__payload", "schedule__ready",
                 "path__ready", "passes"):
        getattr(dut, port).value = 0
    await tb.reset()
    stats = {"trees": 0, "beats": 0, "resets": 0, "errors": 0, "cycles": 0}
    quiet = True  # no tree beat taken since reset or since the last path: busy must be low
    resets = RandomResets(rng, reset_every)
    k = 0
    job = jobs[0]
    for cycle in range(max_cycles):
        if k == len(jobs):
            break
        rst = resets()
        n = len(job.parents)
        tree_valid = int(job.tree_i < n and rng.random() >= idle)
        ti = min(job.tree_i, n - 1)
        dut.tree__valid.value = tree_valid
        dut.tree__payload.value = (max(job.parents[ti], 0) & ((1 << nb) - 1)) | (int(ti == n - 1) << nb)
        dut.passes.value = job.passes
        match_valid = int(job.match_i < n and rng.random() >= idle)
        mi = min(job.match_i, n - 1)
        dut.match__valid.value = match_valid
        dut.match__payload.value = int(job.match[mi]) | (int(mi == n - 1) << 1)
        sched_ready = int(rng.random() >= stall)
        path_ready = int(rng.random() >= stall)
        dut.schedule__ready.value = sched_ready
        dut.path__ready.value = path_ready
        dut.rst.value = int(bool(rst))
        await tb.settle()
        if quiet:
            assert int(dut.busy.value) == 0, f"cycle {cycle}: busy while idle"
        if rst:
            job.restart()
            quiet = True
            stats["resets"] += 1
            await tb.edge()
            dut.rst.value = 0
            continue
        if job.tree_i < n and tree_valid and int(dut.tree__ready.value):
            job.tree_i += 1
            quiet = False
        if job.match_i < n and match_valid and int(dut.match__ready.value):
            job.match_i += 1
            if job.match_i == n:
                job.match_last_cycle = cycle
        if int(dut.path__valid.value) and job.path_first_cycle is None:
            job.path_first_cycle = cycle
        if int(dut.schedule__valid.value):
            job.sched_cycles.append(cycle)
            if sched_ready:
                got = _unpack(int(dut.schedule__payload.value), sched_w)
                beat = tuple(got[f] for f in FIELDS)
                i = len(job.beats)
                assert i < len(job.exp["beats"]), (
                    f"cycle {cycle}: tree {k} {job.parents}: extra schedule beat {got}")
                want = job.exp["beats"][i]
                assert beat == want, (f"cycle {cycle}: tree {k} {job.parents} beat {i}: "
                                      f"{dict(zip(FIELDS, beat))}, golden {dict(zip(FIELDS, want))}")
                job.beats.append(beat)
                stats["beats"] += 1
        if int(dut.path__valid.value) and path_ready:
            got = _unpack(int(dut.path__payload.value), path_w)
            job.path.append(got["node"])
            if not job.bad:
                assert got["tokens"] == job.exp["tokens"], (
                    f"cycle {cycle}: tree {k}: tokens {got['tokens']}, golden {job.exp['tokens']}")
            if got["last"]:
                exp = job.exp
                assert len(job.beats) == len(exp["beats"]), (
                    f"tree {k} {job.parents}: {len(job.beats)} schedule beats, golden {len(exp['beats'])}")
                if not job.bad:
                    assert job.path == exp["path"], (
                        f"tree {k} {job.parents} match {job.match}: path {job.path}, golden {exp['path']}")
                    assert int(dut.peak_level.value) == exp["peak"], (
                        f"tree {k} {job.parents}: peak_level {int(dut.peak_level.value)}, golden {exp['peak']}")
                assert int(dut.error.value) == exp["error"], (
                    f"tree {k} {job.parents}: error {int(dut.error.value)}, golden {exp['error']}")
                assert int(dut.busy.value) == 1
                stats["trees"] += 1
                stats["errors"] += exp["error"]
                quiet = True
                k += 1
                if k < len(jobs):
                    job = jobs[k]
        await tb.edge()
        stats["cycles"] += 1
    assert k == len(jobs), f"only {k} of {len(jobs)} trees finished in {max_cycles} cycles: {stats}"
    await tb.settle()
    dut._log.info("stats: %s", stats)
    return stats


def _jobs(rng, *, count, shapes=True, bad_every=None):
    p = params()
    max_nodes, fifo_depth = p["max_nodes"], p["fifo_depth"]
    jobs = []
    seeds = [[int(x) for x in s.parents] for s in seed_shapes() if s.num_nodes <= max_nodes] if shapes else []
    for t in range(count):
        if seeds and t < len(seeds):
            parents = seeds[t]
        elif rng.random() < 0.5:
            parents = random_tree(rng, max_nodes=max_nodes)
        else:
            parents = random_shape_tree(rng, max_nodes=max_nodes)
        # Match bits dense enough that paths often go deep.
        density = rng.choice((0.3, 0.7, 0.95))
        match = [int(rng.random() < density) for _ in parents]
        passes = rng.randint(1, min(3, p["max_passes"]))
        bad = bad_every is not None and len(parents) > 2 and t % bad_every == bad_every - 1
        if bad:
            parents = list(parents)
            j = rng.randint(1, len(parents) - 1)
            parents[j] = j  # a parent that is not below its node
        jobs.append(Job(parents, match, passes, fifo_depth, bad=bad))
    return jobs


@cocotb.test()
async def random_trees(dut):
    """Random trees and the SpecMamba notes' tree shapes, random idle and back-pressure on every stream."""
    jobs = _jobs(random.Random(seed() + 1), count=params().get("trees", 60))
    stats = await _run(dut, jobs, idle=0.3, stall=0.3)
    assert stats["trees"] == len(jobs)


@cocotb.test()
async def full_rate(dut):
    """No idle, no stalls: schedule beats leave one per cycle, without bubbles."""
    rng = random.Random(seed() + 2)
    jobs = _jobs(rng, count=20)
    stats = await _run(dut, jobs, idle=0.0, stall=0.0)
    for job in jobs:
        depth = len(job.exp["path"]) - 1
        assert job.path_first_cycle - job.match_last_cycle == depth + 4, (
            f"path latency {job.path_first_cycle - job.match_last_cycle}, documented depth + 4 = {depth + 4}")
        if job.exp["beats"]:
            c = job.sched_cycles
            assert c == list(range(c[0], c[0] + len(c))), f"bubbles in the schedule of {job.parents}"
            assert len(c) == len(job.exp["beats"])
    assert stats["trees"] == len(jobs)


@cocotb.test()
async def reset_mid_stream(dut):
    """Synchronous resets at random points; the interrupted tree is sent again from scratch."""
    jobs = _jobs(random.Random(seed() + 3), count=params().get("trees", 60) // 2)
    stats = await _run(dut, jobs, idle=0.2, stall=0.3, reset_every=120)
    assert stats["resets"] > 0, stats


@cocotb.test()
async def errors(dut):
    """Trees wider than the ring, larger than ``max_nodes`` or out of BFS order raise ``error``
    without deadlock."""
    p = params()
    rng = random.Random(seed() + 4)
    jobs = []
    wide = [-1] + [0] * min(p["max_nodes"] - 1, p["fifo_depth"] + 2)  # a star: every leaf waits
    if len(wide) > p["fifo_depth"]:
        jobs.append(Job(wide, [1] * len(wide), 2, p["fifo_depth"]))
    # More nodes than max_nodes: a chain (two live slots at most), so only the size is wrong.
    big = [-1] + list(range(p["max_nodes"] + 1))
    jobs.append(Job(big, [1] * len(big), 1, p["fifo_depth"], bad=True))
    jobs += _jobs(rng, count=12, shapes=False, bad_every=3)
    stats = await _run(dut, jobs, idle=0.2, stall=0.2)
    assert stats["errors"] > 0, stats
