"""Long calls release the GIL: a Python thread keeps counting while `compile` and `Stream.step`
run in the main thread. Were the GIL held, it would count only until the main thread took the
GIL back: one switch interval, 5 ms, of a call lasting over 50 ms, so at most a tenth of the
free rate, where the test asks for a fifth. (50 ms, not more: a step of 6 rows of 2·10⁶ floats
takes about 0.1 s, less on a fast machine.)"""

import threading
import time

import numpy as np

import mfc


def counting_rate(call):
    """Increments per second of a Python thread's counter while `call()` runs, and the call's
    duration."""
    count = [0]
    running = threading.Event()
    stop = threading.Event()

    def spin():
        running.set()
        while not stop.is_set():
            count[0] += 1

    thread = threading.Thread(target=spin)
    thread.start()
    running.wait()
    before = count[0]
    started = time.perf_counter()
    call()
    elapsed = time.perf_counter() - started
    during = count[0] - before
    stop.set()
    thread.join()
    return during / elapsed, elapsed


def test_compile_and_step_release_the_gil():
    free, _ = counting_rate(lambda: time.sleep(0.2))
    rate, elapsed = counting_rate(
        lambda: mfc.compile(steps=384, band=4, rank=4, noise_multiplier=1.0)
    )
    assert elapsed > 0.05 and rate > 0.2 * free, (rate, free, elapsed)
    m = mfc.compile(steps=8, band=1, rank=1, noise_multiplier=1.0)
    s = mfc.Stream(m, 2_000_000, seed="77" * 32)
    x = np.zeros((6, 2_000_000), np.float32)
    rate, elapsed = counting_rate(lambda: s.step(x))
    assert elapsed > 0.05 and rate > 0.2 * free, (rate, free, elapsed)
