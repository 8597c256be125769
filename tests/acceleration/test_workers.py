"""Module 18, section 1: `parallel_rows` keeps its worker threads off the calling thread's core (Linux).

Each test starts a pool of its own (the module's state is put back afterwards) and pins the test's thread to a
core, so where the caller runs is known. The worker threads' allowed cores are read back with
`os.sched_getaffinity(thread id)`.
"""
import os
import threading

import numpy as np
import pytest

from tinytorch import fast

LINUX_AFFINITY = fast._current_core is not None and hasattr(os, "sched_getaffinity")
CORES = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
pytestmark = pytest.mark.skipif(not LINUX_AFFINITY or len(CORES) < 2,
                                reason="needs Linux's sched_getcpu/sched_setaffinity and 2 or more cores")

BIG = 1 << 22                                  # nbytes over PARALLEL_MIN_BYTES: the work is split


@pytest.fixture
def workers(monkeypatch):
    "A fresh pool of 2 workers; the test's thread gets its cores back, the pool is shut down, the state restored."
    for name, value in (("pool", None), ("threads", []), ("allowed", None), ("apart", None), ("count", 2)):
        monkeypatch.setattr(fast._Workers, name, value)
    monkeypatch.setattr(fast, "KEEP_WORKERS_APART", True)
    mine = os.sched_getaffinity(0)
    yield fast._Workers
    os.sched_setaffinity(0, mine)
    if fast._Workers.pool is not None:
        fast._Workers.pool.shutdown(wait=True)


def run_split(record=None):
    "parallel_rows over 2 ranges; `record` gets (range start, thread id, core) for each."
    def work(start, stop):
        if record is not None:
            record.append((start, threading.get_native_id(), fast._current_core()))
    fast.parallel_rows(2, work, BIG)


def on_core(core):
    os.sched_setaffinity(0, {core})            # 0: the calling thread


def test_the_workers_may_run_on_every_core_but_the_callers(workers):
    run_split()                                                    # the pool starts with every core allowed
    assert workers.allowed == set(CORES)
    for core in CORES[:2]:
        on_core(core)
        seen = []
        run_split(seen)
        assert workers.threads, "the pool noted no worker thread"
        for thread in workers.threads:
            assert os.sched_getaffinity(thread) == set(CORES) - {core}, f"caller on core {core}"
        worker_ranges = [(tid, where) for start, tid, where in seen if tid in workers.threads]
        assert worker_ranges and all(where != core for _, where in worker_ranges)
        assert workers.apart == (core, len(workers.threads))


def test_turned_off_the_workers_get_every_core_back(workers, monkeypatch):
    on_core(CORES[0])
    run_split()                                                    # the pool is made on core 0 alone: nothing to do
    assert workers.allowed == {CORES[0]} and workers.apart is None
    os.sched_setaffinity(0, set(CORES))
    workers.allowed = set(CORES)                                   # as if the pool had been made with every core
    on_core(CORES[1])
    run_split()
    assert all(os.sched_getaffinity(t) == set(CORES) - {CORES[1]} for t in workers.threads)
    monkeypatch.setattr(fast, "KEEP_WORKERS_APART", False)
    run_split()
    assert all(os.sched_getaffinity(t) == set(CORES) for t in workers.threads) and workers.apart is None


def test_a_worker_started_after_the_move_is_moved_too(workers):
    run_split()
    on_core(CORES[0])
    run_split()
    release, started = threading.Event(), threading.Event()

    def late_worker():                        # a thread the pool noted later, as a second worker would be
        fast._started()
        started.set()
        release.wait(10)
    thread = threading.Thread(target=late_worker)
    thread.start()
    started.wait(10)
    try:
        run_split()
        late = workers.threads[-1]
        assert os.sched_getaffinity(late) == set(CORES) - {CORES[0]}
    finally:
        release.set()
        thread.join()


def test_the_numbers_do_not_depend_on_where_the_workers_run(workers, monkeypatch):
    rng = np.random.default_rng(0)
    table, ids = rng.standard_normal((5000, 256), dtype=np.float32), rng.integers(0, 5000, 4096)
    apart = fast.gather_rows(table, ids)
    monkeypatch.setattr(fast, "KEEP_WORKERS_APART", False)
    together = fast.gather_rows(table, ids)
    assert np.array_equal(apart, table[ids]) and np.array_equal(together, apart)


def test_a_forked_child_forgets_the_parents_workers(workers):
    run_split()
    assert workers.threads
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                                   # the child: report, then leave at once
        ok = fast._Workers.threads == [] and fast._Workers.apart is None and fast._Workers.pool is None
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1", "the child kept the parent's worker thread ids"
