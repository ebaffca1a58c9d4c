"""Federated learning in Flower with mfc's correlated noise added on the server
(``mfc.flower.DifferentialPrivacyServerSideCorrelatedNoise`` wrapping ``FedAvg``): 30 clients,
3 per round for 20 rounds, each client in at most 3 rounds at least 6 apart (the blob's
min-separation schema, enforced by the sampler), run by Flower's simulation (Ray), checking its
own claims.

Privacy: one client is the unit (its model update clipped to zeta = 0.5 on the server), under
min-separation (k, b) = (3, 6), add-or-remove-one-client neighbours, (epsilon, delta) = (8, 1e-6).

Run: python compiler/python/examples/flower_correlated_noise.py (needs flwr[simulation]).
"""

import numpy as np
from flwr.client import NumPyClient
from flwr.common import ndarrays_to_parameters
from flwr.server import ServerConfig
from flwr.server.strategy import FedAvg
from flwr.simulation import start_simulation

import mfc
from mfc.flower import DifferentialPrivacyServerSideCorrelatedNoise

ROUNDS, CLIENTS, PER_ROUND, FEATURES = 20, 30, 3, 4
W_TRUE = np.array([1.0, -2.0, 0.5, 3.0], np.float32)


def data(cid):
    rng = np.random.default_rng(cid)
    x = rng.standard_normal((16, FEATURES)).astype(np.float32)
    return x, (x @ W_TRUE).astype(np.float32)


class Client(NumPyClient):
    def __init__(self, cid):
        self.cid = cid

    def fit(self, parameters, config):
        (w,) = parameters
        x, y = data(self.cid)
        for _ in range(5):  # a few local steps of least squares
            w = w - np.float32(0.1) * (x.T @ (x @ w - y)) / np.float32(len(y))
        return [w.astype(np.float32)], len(y), {}


def loss(w):
    return float(np.mean([np.mean((data(c)[0] @ w - data(c)[1]) ** 2) for c in range(CLIENTS)]))


models = {}
mechanism = mfc.compile(steps=ROUNDS, form="bandmf", bands=2, epochs=3, min_sep=6,
                        clip_norm=0.5, epsilon=8.0, delta=1e-6, progress=False)
strategy = DifferentialPrivacyServerSideCorrelatedNoise(
    FedAvg(initial_parameters=ndarrays_to_parameters([np.zeros(FEATURES, np.float32)]),
           fraction_evaluate=0.0,
           evaluate_fn=lambda rnd, arrays, config: models.__setitem__(rnd, arrays[0].copy())),
    mechanism,
    mfc.GradientPrivatizer(mfc.Stream(mechanism, FEATURES)),
    num_clients=CLIENTS, clients_per_round=PER_ROUND, server_learning_rate=1.0,
)
start_simulation(
    client_fn=lambda context: Client(int(context.node_config["partition-id"])).to_client(),
    num_clients=CLIENTS, config=ServerConfig(num_rounds=ROUNDS), strategy=strategy,
    client_resources={"num_cpus": 1, "num_gpus": 0.0},
    ray_init_args={"num_cpus": 2, "include_dashboard": False, "log_to_driver": False},
)

# Claims: every client's rounds keep the schema the blob was compiled for; the model learned.
schema = mechanism.report["participation_schema"]
assert schema == {"kind": "min-separation", "max_participations": 3, "separation": 6}
for client, rounds in strategy.sampler.participations().items():
    assert len(rounds) <= 3 and all(b - a >= 6 for a, b in zip(rounds, rounds[1:])), rounds
print(f"participation: {len(strategy.sampler.participations())} clients, at most "
      f"{max(map(len, strategy.sampler.participations().values()))} rounds each, min gap "
      f"{min((b - a for r in strategy.sampler.participations().values() for a, b in zip(r, r[1:])), default=None)}")
print(f"loss {loss(models[0]):.3f} -> {loss(models[ROUNDS]):.3f} after {ROUNDS} private rounds")
assert loss(models[ROUNDS]) < 0.5 * loss(models[0])
print("claims checked: the participation keeps min-separation (3, 6); the loss at least halves")
