"""Two worker processes each own half of a model's coordinates and regenerate only their part
of the same correlated noise: given the whole row's clip factor (in a real job, from an
all-reduce), their concatenated releases equal the unsharded stream's, bit for bit.

Run: python compiler/python/examples/shards.py (after pip install ./compiler/python).
"""

import multiprocessing as mp

import numpy as np

import mfc

D, STEPS = 1000, 32
SEED = bytes(range(1, 33))  # a simulation seed: whoever knows it knows the noise


def worker(blob, shard, inbox, outbox):
    """Owns coordinates shard[0]..shard[1]: receives its slice of each row and the row's clip
    factor, returns its slice of the release."""
    stream = mfc.Stream(mfc.Mechanism.from_bytes(blob), D, seed=SEED, shard=shard)
    for _ in range(STEPS):
        part, clip = inbox.get()
        outbox.put(stream.step(part, clip=clip))


def main():
    mechanism = mfc.compile(steps=STEPS, band=4, rank=3, epsilon=4.0, delta=1e-6)
    zeta = mechanism.report["clip_norm"]
    shards = [(0, 512), (512, D)]
    queues = [(mp.Queue(), mp.Queue()) for _ in shards]
    workers = [
        mp.Process(target=worker, args=(mechanism.bytes, shard, inbox, outbox))
        for shard, (inbox, outbox) in zip(shards, queues)
    ]
    for w in workers:
        w.start()
    rng = np.random.default_rng(0)
    rows = (rng.standard_normal((STEPS, D)) * 0.05).astype(np.float32)
    sharded = []
    for row in rows:
        clip = mfc.clip_factor(row, zeta)  # the whole row's factor: what the all-reduce gives
        for (a, b), (inbox, _) in zip(shards, queues):
            inbox.put((row[a:b], clip))
        sharded.append(np.concatenate([outbox.get() for _, outbox in queues]))
    for w in workers:
        w.join()
        assert w.exitcode == 0
    unsharded = mfc.Stream(mechanism, D, seed=SEED).step(rows)
    assert np.array_equal(np.vstack(sharded), unsharded), "shards differ from the unsharded stream"
    print(
        f"{len(shards)} worker processes, shards {shards}: {STEPS} releases of d = {D} equal the "
        "unsharded stream's bit for bit"
    )


if __name__ == "__main__":
    main()
