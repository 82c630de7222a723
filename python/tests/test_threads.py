"""8 threads calling run on one Program at once get identical results."""

import threading

import numpy as np

import fcb


def test_eight_threads_run_one_program(demo_fcb, demo_io):
    x, _ = demo_io
    program = fcb.load(demo_fcb)
    want = program.run({"input": x})["output"]
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal(x.shape).astype(np.float32) for _ in range(8)]
    expected = [program.run({"input": xi})["output"] for xi in inputs]
    results, errors = [[] for _ in range(8)], []
    barrier = threading.Barrier(8)

    def worker(i):
        try:
            barrier.wait()
            session = program.session()
            for k in range(30):
                # Alternate the shared test input and this thread's own, through
                # Program.run (a fresh execution) and a per-thread session.
                results[i].append(("shared", program.run({"input": x})["output"]))
                results[i].append(("own", session.run({"input": inputs[i]})["output"]))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(8):
        assert len(results[i]) == 60
        for kind, got in results[i]:
            np.testing.assert_array_equal(got, want if kind == "shared" else expected[i])


def test_one_session_shared_by_threads_takes_turns(demo_fcb, demo_io):
    x, _ = demo_io
    program = fcb.load(demo_fcb)
    session = program.session()
    want = session.run({"input": x})["output"]
    rng = np.random.default_rng(11)
    other = rng.standard_normal(x.shape).astype(np.float32)
    want_other = program.run({"input": other})["output"]
    errors = []

    def worker(i):
        try:
            for _ in range(40):
                xi, wi = (x, want) if i % 2 == 0 else (other, want_other)
                np.testing.assert_array_equal(session.run({"input": xi})["output"], wi)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
