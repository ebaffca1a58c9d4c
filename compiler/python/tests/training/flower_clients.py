"""The clients of test_flower.py, in a module of their own: Flower's Ray simulation unpickles
them in its workers, which import this module (not the test, whose ``conftest`` they would
resolve to another folder's)."""

import numpy as np
from flwr.client import NumPyClient

FEATURES = 4
CLIENT_LR = np.float32(0.5)


def client_data(pid):
    rng = np.random.default_rng(1000 + pid)
    x = rng.standard_normal((8, FEATURES)).astype(np.float32)
    y = (x @ np.arange(1, FEATURES + 1, dtype=np.float32) + np.float32(pid % 3)).astype(np.float32)
    return x, y


def client_update(pid, w, b):
    """One local full-batch gradient step of the squared loss (float32 numpy)."""
    x, y = client_data(pid)
    r = x @ w + b - y
    gw = (x * r[:, None]).sum(axis=0) / np.float32(len(y))
    gb = r.sum(keepdims=True) / np.float32(len(y))
    return w - CLIENT_LR * gw, b - CLIENT_LR * gb


class Client(NumPyClient):
    def __init__(self, pid):
        self.pid = pid

    def fit(self, parameters, config):
        w, b = client_update(self.pid, *parameters)
        return [w, b], 8, {"partition": self.pid}




def client_fn(context):
    """Flower's client of the simulated node: its ``partition-id`` is the client's data."""
    return Client(int(context.node_config["partition-id"])).to_client()
