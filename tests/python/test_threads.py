"""Concurrent use from Python threads (DESIGN.md section 8).

Value reads and syncs release the GIL, so these threads really interleave inside the runtime.
Each test loops many steps and checks exact values; none relies on a sleep.
"""
import threading

import pytest

import lazuli as lz

STEPS = 300



def run_threads(*fns):
    """Runs each fn on its own thread; returns the exceptions they raised."""
    errors = []

    def guarded(fn):
        try:
            fn()
        except Exception as e:  # reported by the test, with the step it happened at
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(fn,)) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_donating_barrier_in_another_thread_keeps_reads_exact(backend):
    # Item 3: a barrier in another thread donates acc's old buffer to its new value while this
    # thread records (acc * 2); the read must neither fail ("donated to an earlier program") nor
    # leave acc unreadable.
    acc = lz.zeros(4)
    lz.sync(wait=True)
    done = threading.Event()
    wrong = []

    def reader():
        try:
            for i in range(1, STEPS + 1):
                acc.add_(1)
                got = (acc * 2).sum().item()
                if got != 8.0 * i:
                    wrong.append((i, got))
        finally:
            done.set()

    def syncer():
        while not done.is_set():
            lz.sync()

    errors = run_threads(reader, syncer)
    assert errors == []
    assert wrong == []
    assert acc.tolist() == [float(STEPS)] * 4


def test_threads_syncing_each_other_read_their_own_values(backend):
    # Item 2 in Python: every thread's barrier also syncs the other threads' tensors.
    wrong = []

    def worker(tid):
        def run():
            for k in range(STEPS // 3):
                c = (lz.full((8,), tid) + k).sum()
                lz.sync()
                got = c.item()
                if got != 8.0 * (tid + k):
                    wrong.append((tid, k, got))
        return run

    errors = run_threads(*(worker(t) for t in range(4)))
    assert errors == []
    assert wrong == []
