"""mfc.flower: the sampler against an independent check of the schema over many random schemas
(brute force: every round's eligible set recomputed from the record); the strategy driven
round by round against a hand-written loop on the numpy stream (bit for bit); and a Flower
simulation (``flwr.simulation.start_simulation``, Ray) of 20 rounds whose recorded participation
keeps the schema and whose global model equals the hand-written loop."""

import os
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("ray")

from flwr.common import (  # noqa: E402
    Code,
    FitRes,
    Status,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server import ServerConfig  # noqa: E402
from flwr.server.client_manager import SimpleClientManager  # noqa: E402
from flwr.server.client_proxy import ClientProxy  # noqa: E402
from flwr.server.strategy import FedAvg  # noqa: E402

import mfc  # noqa: E402
from mfc.flower import (  # noqa: E402
    DifferentialPrivacyServerSideCorrelatedNoise,
    ParticipationSampler,
)

from flower_clients import FEATURES, Client, client_fn, client_update  # noqa: E402

SEED = "3c" * 32
DIM = FEATURES + 1  # w (4,) and b (1,)


# --- the schema, checked independently -------------------------------------------------------


def schema_violations(history, schema, num_clients, clients_per_round):
    """Every way ``history`` (the clients of each round) breaks ``schema``: exactly
    clients_per_round distinct valid clients a round; at most k rounds a client; two of its
    rounds at least b apart (min-separation), adjacent ones exactly b apart (fixed epoch order)."""
    bad = []
    rounds = {}
    for r, clients in enumerate(history):
        if len(clients) != clients_per_round or len(set(clients)) != len(clients):
            bad.append(("round size", r, clients))
        for c in clients:
            if not 0 <= c < num_clients:
                bad.append(("client", r, c))
            rounds.setdefault(c, []).append(r)
    k = schema["max_participations"]
    for c, rs in rounds.items():
        if len(rs) > k:
            bad.append(("more than k", c, rs))
        gaps = np.diff(rs)
        if schema["kind"] == "min-separation" and (gaps < schema["separation"]).any():
            bad.append(("closer than b", c, rs))
        if schema["kind"] == "fixed-epoch-order" and (gaps != schema["separation"]).any():
            bad.append(("not exactly b apart", c, rs))
    return bad


def eligible_count(history, schema, num_clients, round_index):
    """Brute force: how many clients could join round ``round_index`` after ``history``."""
    n = 0
    for c in range(num_clients):
        mine = [r for r, clients in enumerate(history) if c in clients]
        trial = [*mine, round_index]
        if len(trial) > schema["max_participations"]:
            continue
        gaps = np.diff(trial)
        if schema["kind"] == "min-separation" and (gaps < schema["separation"]).any():
            continue
        if schema["kind"] == "fixed-epoch-order" and (gaps != schema["separation"]).any():
            continue
        n += 1
    return n


def random_schema(rng):
    kind = rng.choice(["single", "min-separation", "fixed-epoch-order"])
    if kind == "single":
        return {"kind": "single", "max_participations": 1}
    return {
        "kind": str(kind),
        "max_participations": int(rng.integers(1, 6)),
        "separation": int(rng.integers(1, 7)),
    }


def test_sampler_keeps_random_schemas():
    rng = np.random.default_rng(0)
    refused = completed = 0
    for trial in range(300):
        schema = random_schema(rng)
        num_clients = int(rng.integers(1, 25))
        per_round = int(rng.integers(1, num_clients + 1))
        b = schema.get("separation", 1)
        if schema["kind"] != "single" and b * per_round > num_clients:
            with pytest.raises(ValueError, match=f"needs at least b\\*clients_per_round={b * per_round}"):
                ParticipationSampler(schema, num_clients, per_round, seed=trial)
            continue
        sampler = ParticipationSampler(schema, num_clients, per_round, seed=trial)
        assert sampler.schema == schema
        for r in range(int(rng.integers(1, 40))):
            available = eligible_count(sampler.history, schema, num_clients, r)
            mask = sampler.eligible(r)
            assert int(mask.sum()) == available, (schema, r)
            if available < per_round:
                expected = f"round {r} \\(Flower's server_round {r + 1}\\): {available} of "
                with pytest.raises(ValueError, match=expected + "num_clients"):
                    sampler.sample(r)
                assert len(sampler.history) == r  # unchanged
                refused += 1
                break
            chosen = sampler.sample(r)
            assert all(mask[c] for c in chosen)
        else:
            completed += 1
        assert schema_violations(sampler.history, schema, num_clients, per_round) == []
    assert refused > 20 and completed > 20, (refused, completed)


def test_eligibility_rule_on_arbitrary_histories():
    """The rule itself, on histories the sampler would not draw (its priority hides some rules:
    a fixed-epoch-order client skipped when due): the sampler's state loaded by hand, each
    client's eligibility against brute force."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        schema = random_schema(rng)
        num_clients = int(rng.integers(1, 10))
        per_round = 1
        sampler = ParticipationSampler(
            schema, max(num_clients, schema.get("separation", 1)), per_round)
        num_clients = sampler.num_clients
        rounds = int(rng.integers(0, 15))
        most = min(3, num_clients + 1)
        history = [tuple(int(c) for c in rng.choice(num_clients, int(rng.integers(0, most)),
                                                    replace=False)) for _ in range(rounds)]
        for r, clients in enumerate(history):
            sampler._count[list(clients)] += 1
            sampler._last[list(clients)] = r
        mask = sampler.eligible(rounds)
        for c in range(num_clients):
            mine = [r for r, clients in enumerate(history) if c in clients]
            # The new round against every earlier one (min-separation) or the last (fixed order).
            gaps = rounds - np.array(mine, dtype=np.int64)
            ok = len(mine) < schema["max_participations"] and not (
                schema["kind"] == "min-separation" and (gaps < schema["separation"]).any()
            ) and not (
                schema["kind"] == "fixed-epoch-order" and (gaps[-1:] != schema["separation"]).any()
            )
            assert mask[c] == ok, (schema, history, c)


def test_sampler_refusals():
    schema = {"kind": "min-separation", "max_participations": 2, "separation": 3}
    sampler = ParticipationSampler(schema, 6, 2, seed=1)
    with pytest.raises(ValueError, match="round_index=1: the sampler is at round 0"):
        sampler.sample(1)
    sampler.sample(0)
    with pytest.raises(ValueError, match="round_index=0: the sampler is at round 1"):
        sampler.sample(0)
    with pytest.raises(ValueError, match="kind='cyclic-poisson'.*CyclicPoissonSampling"):
        ParticipationSampler({"kind": "cyclic-poisson", "cycle_length": 2}, 6, 2)
    with pytest.raises(ValueError, match="clients_per_round=7: expected at most num_clients=6"):
        ParticipationSampler(schema, 6, 7)
    # Fixed epoch order with exactly b*clients_per_round clients: the cyclic schedule, k epochs.
    fixed = {"kind": "fixed-epoch-order", "max_participations": 3, "separation": 4}
    sampler = ParticipationSampler(fixed, 8, 2, seed=2)
    for r in range(12):
        sampler.sample(r)
    assert all(set(sampler.history[r]) == set(sampler.history[r % 4]) for r in range(12))
    with pytest.raises(ValueError, match=r"round 12 \(Flower.s server_round 13\): 0 of "
                       "num_clients=8 clients are eligible"):
        sampler.sample(12)


# --- the strategy against a hand-written loop -------------------------------------------------


def reference(mechanism, rounds_pids, clients_per_round, lr, momentum):
    """The hand-written loop: the numpy stream's prefix sums, differenced; the clients' updates
    in the order sampled; v ← β v + ĝ/cpr, θ ← θ + lr v (float32)."""
    stream = mfc.Stream(mechanism, DIM, seed=SEED)
    theta = np.zeros(DIM, np.float32)
    velocity = np.zeros(DIM, np.float32)
    previous = np.zeros(DIM, np.float32)
    for pids in rounds_pids:
        rows = np.stack(
            [np.concatenate(client_update(p, theta[:FEATURES], theta[FEATURES:])) - theta
             for p in pids]
        )
        release = stream.step_examples(rows)
        noisy, previous = release - previous, release
        velocity = np.float32(momentum) * velocity + noisy / np.float32(clients_per_round)
        theta = theta + np.float32(lr) * velocity
    return theta


def initial():
    return ndarrays_to_parameters([np.zeros(FEATURES, np.float32), np.zeros(1, np.float32)])


class LocalProxy(ClientProxy):
    """A client in this process (the strategy is driven round by round without Flower's server)."""

    def __init__(self, cid):
        super().__init__(cid)
        self.client = Client(int(cid))

    def fit(self, ins, timeout, group_id):
        w, b = client_update(self.client.pid, *parameters_to_ndarrays(ins.parameters))
        return FitRes(Status(Code.OK, ""), ndarrays_to_parameters([w, b]), 8, {})

    def get_properties(self, ins, timeout, group_id):
        raise NotImplementedError

    def get_parameters(self, ins, timeout, group_id):
        raise NotImplementedError

    def evaluate(self, ins, timeout, group_id):
        raise NotImplementedError

    def reconnect(self, ins, timeout, group_id):
        raise NotImplementedError


@pytest.mark.parametrize(
    "options,momentum",
    [
        (dict(epochs=3, min_sep=5), 0.0),
        (dict(epochs=3, every=6), 0.0),
        (dict(), 0.0),
        (dict(epochs=4, min_sep=4), 0.9),
    ],
    ids=["min-sep", "fixed-epoch-order", "single", "min-sep-momentum"],
)
def test_strategy_equals_a_hand_written_loop(options, momentum, capsys):
    rounds, num_clients, per_round, lr = 20, 30, 3, 0.7
    if not options:
        num_clients = rounds * per_round
    mechanism = mfc.compile(steps=rounds, form="bandmf", bands=2, clip_norm=0.5, epsilon=4.0,
                            delta=1e-6, progress=False, **options)
    strategy = DifferentialPrivacyServerSideCorrelatedNoise(
        FedAvg(initial_parameters=initial(), fraction_evaluate=0.0),
        mechanism,
        mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED)),
        num_clients=num_clients, clients_per_round=per_round,
        server_learning_rate=lr, server_momentum=momentum, sampler_seed=7,
    )
    manager = SimpleClientManager()
    for pid in range(num_clients):
        manager.register(LocalProxy(str(pid)))
    parameters = strategy.initialize_parameters(manager)
    for server_round in range(1, rounds + 1):
        instructions = strategy.configure_fit(server_round, parameters, manager)
        results = [(proxy, proxy.fit(ins, None, None)) for proxy, ins in instructions]
        results.reverse()  # arrival order must not matter
        parameters, metrics = strategy.aggregate_fit(server_round, results, [])
        assert metrics["clients_aggregated"] == per_round
    printed = capsys.readouterr().out
    assert printed.count("mfc privacy statement:") == 1
    assert strategy.statement in printed and "one record" in strategy.statement
    schema = mechanism.report["participation_schema"]
    assert schema_violations(strategy.sampler.history, schema, num_clients, per_round) == []
    # The population is ordered by id ("0" < "1" < "10" < ...): the record names the clients.
    population = sorted(str(pid) for pid in range(num_clients))
    assert strategy.participation == [[population[i] for i in h] for h in strategy.sampler.history]
    history = [[int(cid) for cid in cids] for cids in strategy.participation]
    assert schema_violations(history, schema, num_clients, per_round) == []
    expected = reference(mechanism, history, per_round, lr, momentum)
    got = np.concatenate(parameters_to_ndarrays(parameters))
    assert got.dtype == np.float32 and got.tobytes() == expected.tobytes()


def test_strategy_refusals():
    mechanism = mfc.compile(steps=4, form="bandmf", bands=2, epochs=2, min_sep=2, epsilon=4.0,
                            delta=1e-6, progress=False)
    other = mfc.compile(steps=5, form="bandmf", bands=2, epsilon=4.0, delta=1e-6, progress=False)
    privatizer = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    with pytest.raises(ValueError, match="make the privatizer's Stream from this mechanism"):
        DifferentialPrivacyServerSideCorrelatedNoise(
            FedAvg(), other, privatizer, num_clients=4, clients_per_round=2)
    with pytest.raises(ValueError, match="needs at least b\\*clients_per_round=6 clients"):
        DifferentialPrivacyServerSideCorrelatedNoise(
            FedAvg(), mechanism, privatizer, num_clients=5, clients_per_round=3)
    strategy = DifferentialPrivacyServerSideCorrelatedNoise(
        FedAvg(initial_parameters=initial()), mechanism, privatizer, num_clients=4,
        clients_per_round=2)
    manager = SimpleClientManager()
    for pid in range(4):
        manager.register(LocalProxy(str(pid)))
    with pytest.raises(ValueError, match="server_round=2: the stream has released 0 steps"):
        strategy.configure_fit(2, initial(), manager)
    wrong = ndarrays_to_parameters([np.zeros(FEATURES, np.float64), np.zeros(1, np.float32)])
    with pytest.raises(TypeError, match="array 0 is float64, expected float32"):
        strategy.configure_fit(1, wrong, manager)
    instructions = strategy.configure_fit(1, initial(), manager)
    proxy, ins = instructions[0]
    res = FitRes(Status(Code.OK, ""), wrong, 8, {})
    with pytest.raises(TypeError, match=f"client {proxy.cid}: array 0 is float64"):
        strategy.aggregate_fit(1, [(proxy, res)], [])
    assert privatizer.steps_released == 0


def test_a_privatizer_of_another_blob_refused_and_server_momentum_checked():
    """The privatizer's stream must be the mechanism's blob: one of the same steps, form and
    schema but another noise multiplier (ε = 40 against 4) is refused naming both. A
    ``momentum:β`` blob with another ``server_momentum`` warns, naming both."""
    weak = mfc.compile(steps=4, form="bandmf", bands=2, epsilon=40.0, delta=1e-6,
                       progress=False)
    strong = mfc.compile(steps=4, form="bandmf", bands=2, epsilon=4.0, delta=1e-6,
                         progress=False)
    with pytest.raises(ValueError, match=r"noise_multiplier, clip_norm\).*this mechanism"):
        DifferentialPrivacyServerSideCorrelatedNoise(
            FedAvg(), strong, mfc.GradientPrivatizer(mfc.Stream(weak, DIM, seed=SEED)),
            num_clients=4, clients_per_round=2)
    momentum = mfc.compile(steps=4, form="bandmf", bands=2, workload="momentum:0.9",
                           epsilon=4.0, delta=1e-6, progress=False)
    with pytest.warns(UserWarning, match=r"momentum:0.9.*server_momentum=0.0.*server_momentum=0.9"):
        DifferentialPrivacyServerSideCorrelatedNoise(
            FedAvg(), momentum, mfc.GradientPrivatizer(mfc.Stream(momentum, DIM, seed=SEED)),
            num_clients=4, clients_per_round=2)


def test_round_beyond_the_horizon_refused_before_sampling():
    """A round past the blob's steps is refused in ``configure_fit`` naming ``steps`` and
    ``num_rounds``, before any client is sampled (the record stays that of the rounds run)."""
    mechanism = mfc.compile(steps=2, form="bandmf", bands=1, epsilon=4.0, delta=1e-6,
                            progress=False)
    privatizer = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    strategy = DifferentialPrivacyServerSideCorrelatedNoise(
        FedAvg(initial_parameters=initial()), mechanism, privatizer, num_clients=4,
        clients_per_round=1)
    manager = SimpleClientManager()
    for pid in range(4):
        manager.register(LocalProxy(str(pid)))
    for server_round in (1, 2):
        (proxy, _), = strategy.configure_fit(server_round, initial(), manager)
        res = FitRes(Status(Code.OK, ""), initial(), 8, {})
        strategy.aggregate_fit(server_round, [(proxy, res)], [])
    with pytest.raises(ValueError, match=r"server_round=3: the blob has 2 steps.*num_rounds=2"):
        strategy.configure_fit(3, initial(), manager)
    assert len(strategy.sampler.history) == 2 and len(strategy.participation) == 2


# --- Flower's simulation ----------------------------------------------------------------------


def test_flower_simulation(capsys):
    from flwr.simulation import start_simulation

    rounds, num_clients, per_round, lr = 20, 24, 3, 0.7
    mechanism = mfc.compile(steps=rounds, form="bandmf", bands=2, epochs=3, min_sep=6,
                            clip_norm=0.5, epsilon=4.0, delta=1e-6, progress=False)
    partitions = {}

    class Recording(DifferentialPrivacyServerSideCorrelatedNoise):
        def aggregate_fit(self, server_round, results, failures):
            assert not failures, failures
            partitions.update({p.cid: r.metrics["partition"] for p, r in results})
            return super().aggregate_fit(server_round, results, failures)

    models = {}

    def evaluate_fn(server_round, arrays, config):
        """Server-side evaluation, called with the global model after every round."""
        models[server_round] = np.concatenate(arrays)
        return None

    strategy = Recording(
        FedAvg(initial_parameters=initial(), fraction_evaluate=0.0, evaluate_fn=evaluate_fn),
        mechanism,
        mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED)),
        num_clients=num_clients, clients_per_round=per_round, server_learning_rate=lr,
        sampler_seed=11,
    )
    start = time.perf_counter()
    history = start_simulation(
        client_fn=client_fn,
        num_clients=num_clients,
        config=ServerConfig(num_rounds=rounds),
        strategy=strategy,
        client_resources={"num_cpus": 1, "num_gpus": 0.0},
        ray_init_args={
            "num_cpus": 2,
            "include_dashboard": False,
            "log_to_driver": False,
            # Ray's workers unpickle flower_clients.Client: they need its folder on their path.
            "runtime_env": {"env_vars": {"PYTHONPATH": os.pathsep.join(
                [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
            )}},
        },
    )
    seconds = time.perf_counter() - start
    assert len(strategy.participation) == rounds
    assert capsys.readouterr().out.count("mfc privacy statement:") == 1
    with capsys.disabled():
        print(f"\nFlower simulation (Ray): {rounds} rounds, {num_clients} clients, {seconds:.1f} s")
    schema = mechanism.report["participation_schema"]
    assert schema == {"kind": "min-separation", "max_participations": 3, "separation": 6}
    by_pid = [[partitions[cid] for cid in cids] for cids in strategy.participation]
    assert schema_violations(by_pid, schema, num_clients, per_round) == []
    assert schema_violations(strategy.sampler.history, schema, num_clients, per_round) == []
    # The global model after the last round (the server's evaluate_fn saw it) against the loop.
    assert sorted(models) == list(range(rounds + 1)) and history is not None
    expected = reference(mechanism, by_pid, per_round, lr, 0.0)
    assert models[rounds].dtype == np.float32 and models[rounds].tobytes() == expected.tobytes()
