"""Federated training with mfc's correlated noise in Flower: a server-side strategy wrapper,
``DifferentialPrivacyServerSideCorrelatedNoise``, built like Flower's own
``DifferentialPrivacyServerSideFixedClipping`` (it wraps a strategy such as ``FedAvg``), whose
server adds the matrix factorization mechanism's correlated noise to the sum of the clients'
clipped model updates each round, and whose client sampling (``ParticipationSampler``) enforces
the blob's participation schema.

Privacy: the unit is one *client* (its model update, clipped to the blob's ``ζ`` by mfc's
runtime: ``GradientPrivatizer.privatize``, one row per client), under the blob's participation
schema (``Mechanism.report["participation_schema"]``) and neighbouring relation; the statement
(``Stream.privacy["statement"]``) is printed once per run, when Flower initializes the
parameters (its "record" is a client here). Clients may clip too; the server clips every update
anyway. Only the training rounds' model are covered: what else clients send the server —
federated evaluation's losses and metrics (the wrapped strategy's ``configure_evaluate``,
``aggregate_evaluate``), ``num_examples``, fit metrics — is outside the guarantee; turn
federated evaluation off (``fraction_evaluate=0.0``) or account for it separately.

Choices:

- **Flower API.** The strategy API of ``flwr.server.strategy`` (``configure_fit``,
  ``aggregate_fit``, ``initialize_parameters``; Flower 1.x), run by Flower's simulation
  (``flwr.simulation.start_simulation``, Ray). Evaluation (``configure_evaluate``,
  ``aggregate_evaluate``, ``evaluate``) and ``initialize_parameters`` are the wrapped
  strategy's; training rounds are this wrapper's own: the wrapped strategy's sampling and
  weighted averaging are not used (weighting by ``num_examples`` would change the sensitivity).
- **One round is one step** of the stream: round ``r`` (Flower counts from 1) is step ``r - 1``;
  the run cannot outlast the blob's horizon.
- **Sampling.** Exactly ``clients_per_round`` of the ``num_clients`` clients each round, under
  the schema: single participation (each client at most once); min-separation ``(k, b)`` (at most
  ``k`` rounds per client, any two at least ``b`` rounds apart); fixed epoch order ``(k, b)`` (at
  most ``k``, adjacent ones exactly ``b`` apart). The least-used eligible clients are drawn first
  (a fixed-epoch-order client due this round before a new one), uniformly at random among equals;
  a round without enough eligible clients is refused (``ValueError`` with the numbers), never
  filled with an ineligible one. Cyclic Poisson blobs are refused: a fixed number of clients per
  round is not Poisson sampling. The population is fixed at the first round (``num_clients``
  connected clients, ordered by id); ``sampler.history`` and ``participation`` record who was
  sampled in each round.
- **Scaling and the server optimizer.** ``ĝ_t`` (the clipped updates' sum plus this round's
  noise) is divided by ``clients_per_round`` (the number sampled, not the number that answered),
  then ``v ← server_momentum·v + ĝ_t / clients_per_round`` and ``θ ← θ + server_learning_rate·v``
  in float32 (FedAvgM's names; ``server_momentum = β`` for a BandMF ``momentum:β`` blob, 0 for
  DP-FTRL; another ``server_momentum`` for a ``momentum:β`` blob gives a ``UserWarning``). A client that fails contributes nothing; the round still takes its step.
- Client parameters must be float32 arrays of the global model's shapes (``TypeError`` /
  ``ValueError`` naming the array otherwise).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Optional, Union

import numpy as np
from flwr.common import (
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    Parameters,
    Scalar,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from ._mfc import Mechanism
from .training import GradientPrivatizer, _workload_momentum

__all__ = ["DifferentialPrivacyServerSideCorrelatedNoise", "ParticipationSampler"]

# Seconds the first round waits for the population to connect.
CONNECT_TIMEOUT = 600


def _count(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}={value!r}: expected an integer >= {low}")
    if value < low:
        raise ValueError(f"{name}={value}: expected an integer >= {low}")
    return int(value)


class ParticipationSampler:
    """Draws ``clients_per_round`` of clients ``0..num_clients-1`` per round under a blob's
    participation schema (see the module): ``schema`` is ``Mechanism.report
    ["participation_schema"]`` (``from_mechanism``). ``sample(r)`` draws round ``r`` (0, 1, 2, …
    in order; another round is refused) and records it in ``history``; it raises ``ValueError``
    naming the round and the numbers when fewer than ``clients_per_round`` clients are eligible,
    leaving the sampler unchanged. ``num_clients``: the fixed population (clients
    ``0..num_clients-1``); ``clients_per_round``: drawn each round (at most ``num_clients``, and
    ``b·clients_per_round ≤ num_clients`` under a separation ``b``). ``seed``: numpy's
    ``default_rng`` seed (``None``: OS entropy);
    the choice among equally eligible clients does not affect privacy, which rests on the
    schema only."""

    def __init__(
        self,
        schema: Mapping[str, Any],
        num_clients: int,
        clients_per_round: int,
        *,
        seed: Union[int, None] = None,
    ) -> None:
        self.num_clients = _count("num_clients", num_clients, 1)
        self.clients_per_round = _count("clients_per_round", clients_per_round, 1)
        if self.clients_per_round > self.num_clients:
            raise ValueError(
                f"clients_per_round={clients_per_round}: expected at most "
                f"num_clients={num_clients}"
            )
        kind = schema.get("kind")
        if kind == "single":
            self.kind, self.max_participations, self.separation = "single", 1, 1
        elif kind in ("min-separation", "fixed-epoch-order"):
            self.kind = kind
            self.max_participations = _count(
                "max_participations", schema.get("max_participations"), 1
            )
            self.separation = _count("separation", schema.get("separation"), 1)
            if self.separation * self.clients_per_round > self.num_clients:
                raise ValueError(
                    f"num_clients={num_clients}: {kind} with b={self.separation} needs at least "
                    f"b*clients_per_round={self.separation * self.clients_per_round} clients"
                )
        else:
            raise ValueError(
                f"participation schema kind={kind!r}: the sampler enforces 'single', "
                "'min-separation' and 'fixed-epoch-order' (a cyclic Poisson blob needs Poisson "
                "sampling: mfc.CyclicPoissonSampling)"
            )
        self._rng = np.random.default_rng(seed)
        self._count = np.zeros(self.num_clients, np.int64)
        self._last = np.full(self.num_clients, -1, np.int64)
        self.history: list[tuple[int, ...]] = []

    @classmethod
    def from_mechanism(
        cls,
        mechanism: Mechanism,
        num_clients: int,
        clients_per_round: int,
        *,
        seed: Union[int, None] = None,
    ) -> "ParticipationSampler":
        """The sampler of ``mechanism``'s stored schema (``report["participation_schema"]``),
        with ``num_clients``, ``clients_per_round`` and ``seed`` as for the constructor."""
        return cls(
            mechanism.report["participation_schema"], num_clients, clients_per_round, seed=seed
        )

    @property
    def schema(self) -> dict[str, Any]:
        """The schema enforced, as ``Mechanism.report["participation_schema"]`` states it."""
        if self.kind == "single":
            return {"kind": "single", "max_participations": 1}
        return {
            "kind": self.kind,
            "max_participations": self.max_participations,
            "separation": self.separation,
        }

    def eligible(self, round_index: int) -> np.ndarray:
        """The clients round ``round_index`` may take, as a boolean mask (the schema's rule)."""
        fresh = self._count == 0
        if self.kind == "single":
            return fresh
        room = self._count < self.max_participations
        gap = round_index - self._last
        if self.kind == "min-separation":
            return room & (fresh | (gap >= self.separation))
        return room & (fresh | (gap == self.separation))  # fixed epoch order: exactly b

    def sample(self, round_index: int) -> list[int]:
        """Round ``round_index``'s clients (see the class), in the order drawn."""
        if round_index != len(self.history):
            raise ValueError(
                f"round_index={round_index}: the sampler is at round {len(self.history)} "
                "(rounds are drawn once each, in order)"
            )
        mask = self.eligible(round_index)
        candidates = np.flatnonzero(mask)
        if candidates.size < self.clients_per_round:
            raise ValueError(
                f"round {round_index} (Flower's server_round {round_index + 1}): "
                f"{candidates.size} of num_clients={self.num_clients} "
                f"clients are eligible under {self.kind} (k={self.max_participations}, "
                f"b={self.separation}), clients_per_round={self.clients_per_round} needed"
            )
        # Priority: a fixed-epoch-order client due now, then the least used; random among equals.
        due = (self._count > 0)[candidates] if self.kind == "fixed-epoch-order" else None
        order = np.lexsort(
            (
                self._rng.random(candidates.size),
                self._count[candidates],
                *(() if due is None else (~due,)),
            )
        )
        chosen = [int(c) for c in candidates[order[: self.clients_per_round]]]
        self._count[chosen] += 1
        self._last[chosen] = round_index
        self.history.append(tuple(chosen))
        return chosen

    def participations(self) -> dict[int, list[int]]:
        """Each sampled client's rounds, from ``history``."""
        out: dict[int, list[int]] = {}
        for r, clients in enumerate(self.history):
            for c in clients:
                out.setdefault(c, []).append(r)
        return out


class DifferentialPrivacyServerSideCorrelatedNoise(Strategy):
    """Wraps ``strategy`` (e.g. ``FedAvg``) to train with mfc's correlated noise added on the
    server (see the module). ``mechanism``: the compiled blob whose schema the sampling enforces;
    ``privatizer``: its ``GradientPrivatizer`` (a ``Stream`` of that mechanism whose ``dim`` is the
    model's number of parameters; checked against ``mechanism``). ``num_clients``: the fixed
    population; ``clients_per_round``: sampled each round (the divisor of ``ĝ``).
    ``server_learning_rate`` (default 1.0, positive) and ``server_momentum`` (default 0.0, in
    [0, 1); the blob's ``β`` for a ``momentum:β`` blob, else a warning): the server's update
    ``v ← server_momentum·v + ĝ / clients_per_round``, ``θ ← θ + server_learning_rate·v``.
    ``sampler_seed``: the ``ParticipationSampler``'s. ``participation``: the client ids sampled in
    each round."""

    def __init__(
        self,
        strategy: Strategy,
        mechanism: Mechanism,
        privatizer: GradientPrivatizer,
        *,
        num_clients: int,
        clients_per_round: int,
        server_learning_rate: float = 1.0,
        server_momentum: float = 0.0,
        sampler_seed: Optional[int] = None,
    ) -> None:
        super().__init__()
        if not isinstance(privatizer, GradientPrivatizer):
            raise TypeError(
                f"privatizer: expected an mfc.GradientPrivatizer, got {type(privatizer).__name__}"
            )
        if not isinstance(mechanism, Mechanism):
            raise TypeError(f"mechanism: expected an mfc.Mechanism, got {type(mechanism).__name__}")
        stream = privatizer.stream
        if stream.shard is not None:
            raise ValueError(f"privatizer: a shard {stream.shard}; the server needs the whole model")
        theirs = (
            stream.horizon,
            stream.form,
            stream.privacy["participation"],
            stream.privacy["blob_noise_multiplier"],
            stream.clip_norm,
        )
        mine = (
            mechanism.steps,
            mechanism.form,
            mechanism.report["participation"],
            mechanism.report["noise_multiplier"],
            mechanism.report["clip_norm"],
        )
        if theirs != mine:
            raise ValueError(
                "privatizer: its stream's blob (steps, form, participation, noise_multiplier, "
                f"clip_norm) = {theirs!r}, the mechanism's {mine!r}: make the privatizer's "
                "Stream from this mechanism"
            )
        if not 0.0 <= float(server_momentum) < 1.0:
            raise ValueError(f"server_momentum={server_momentum}: expected a number in [0, 1)")
        if not float(server_learning_rate) > 0.0:
            raise ValueError(f"server_learning_rate={server_learning_rate}: expected a number > 0")
        beta = _workload_momentum(mechanism)
        if beta is not None and float(server_momentum) != beta:
            warnings.warn(
                f"the blob's workload is momentum:{beta} (heavy-ball momentum {beta}), "
                f"server_momentum={server_momentum}: still private (post-processing), but not "
                f"the workload the noise was optimized for (use server_momentum={beta})",
                UserWarning,
                stacklevel=2,
            )
        self.strategy = strategy
        self.privatizer = privatizer
        self.sampler = ParticipationSampler.from_mechanism(
            mechanism, num_clients, clients_per_round, seed=sampler_seed
        )
        self.clients_per_round = self.sampler.clients_per_round
        self.server_learning_rate = np.float32(server_learning_rate)
        self.server_momentum = np.float32(server_momentum)
        self.statement: str = stream.privacy["statement"]
        self.participation: list[list[str]] = []
        self._population: Optional[list[str]] = None
        self._printed = False
        self._global: Optional[list[np.ndarray]] = None
        self._velocity: Optional[np.ndarray] = None
        self._sampled: list[str] = []

    def __repr__(self) -> str:
        return "Differential Privacy Strategy Wrapper (Server-Side Correlated Noise, mfc)"

    def initialize_parameters(self, client_manager: ClientManager) -> Optional[Parameters]:
        """The wrapped strategy's initial parameters (from ``client_manager`` if it has none);
        prints the privacy statement (once)."""
        if not self._printed:
            print(f"mfc privacy statement: {self.statement}", flush=True)
            self._printed = True
        return self.strategy.initialize_parameters(client_manager)

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        """Samples this round's clients under the schema (see ``ParticipationSampler``) among
        ``client_manager``'s, sending them ``parameters``, the global model. ``server_round``:
        Flower's round (1, 2, …), which must be the stream's next step plus one."""
        step = self.privatizer.steps_released
        if server_round != step + 1:
            raise ValueError(
                f"server_round={server_round}: the stream has released {step} steps, so the "
                f"next round is {step + 1}"
            )
        horizon = self.privatizer.stream.horizon
        if server_round > horizon:
            raise ValueError(
                f"server_round={server_round}: the blob has {horizon} steps (one per round, "
                f"compiled with steps={horizon}); run at most num_rounds={horizon} "
                "(ServerConfig), or compile the blob with more steps"
            )
        arrays = parameters_to_ndarrays(parameters)
        self._check_arrays("the global model", arrays, None)
        size = sum(a.size for a in arrays)
        if size != self.privatizer.dim:
            raise ValueError(
                f"the model has {size} parameters, the privatizer's stream dim={self.privatizer.dim}"
            )
        if self._population is None:
            client_manager.wait_for(self.sampler.num_clients, timeout=CONNECT_TIMEOUT)
            population = sorted(client_manager.all())
            if len(population) != self.sampler.num_clients:
                raise ValueError(
                    f"{len(population)} clients connected, num_clients={self.sampler.num_clients}"
                )
            self._population = population
        clients = client_manager.all()
        chosen = [self._population[i] for i in self.sampler.sample(server_round - 1)]
        missing = [cid for cid in chosen if cid not in clients]
        if missing:
            raise ValueError(f"round {server_round}: sampled clients {missing} are not connected")
        self._global = arrays
        self._sampled = chosen
        self.participation.append(chosen)
        config: dict[str, Scalar] = {}
        fit_config = getattr(self.strategy, "on_fit_config_fn", None)
        if fit_config is not None:
            config = fit_config(server_round)
        fit_ins = FitIns(parameters, config)
        return [(clients[cid], fit_ins) for cid in chosen]

    @staticmethod
    def _check_arrays(
        what: str, arrays: list[np.ndarray], like: Optional[list[np.ndarray]]
    ) -> None:
        for i, a in enumerate(arrays):
            if a.dtype != np.float32:
                raise TypeError(
                    f"{what}: array {i} is {a.dtype}, expected float32 (convert it with "
                    ".astype(np.float32))"
                )
        if like is not None and [a.shape for a in arrays] != [a.shape for a in like]:
            raise ValueError(
                f"{what}: shapes {[a.shape for a in arrays]}, the global model's "
                f"{[a.shape for a in like]}"
            )

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[Union[tuple[ClientProxy, FitRes], BaseException]],
    ) -> tuple[Optional[Parameters], dict[str, Scalar]]:
        """``θ ← θ + lr·v``, ``v ← β·v + ĝ / clients_per_round`` (see the module), ``ĝ`` the
        clipped updates of the clients that answered, in the order sampled, plus the noise.
        ``server_round``: the round ``configure_fit`` configured; ``results``: the sampled
        clients' ``(proxy, FitRes)`` (an unsampled client is refused); ``failures``: the clients
        that did not answer (they contribute nothing; the round still takes its step)."""
        if self._global is None or server_round != self.privatizer.steps_released + 1:
            raise ValueError(f"aggregate_fit: round {server_round} was not configured")
        global_flat = np.concatenate([a.reshape(-1) for a in self._global])
        by_cid = {}
        for proxy, res in results:
            if proxy.cid not in self._sampled:
                raise ValueError(f"round {server_round}: a result from unsampled client {proxy.cid}")
            arrays = parameters_to_ndarrays(res.parameters)
            self._check_arrays(f"client {proxy.cid}", arrays, self._global)
            by_cid[proxy.cid] = np.concatenate([a.reshape(-1) for a in arrays]) - global_flat
        rows = [by_cid[cid] for cid in self._sampled if cid in by_cid]
        examples = np.stack(rows) if rows else np.zeros((0, global_flat.size), np.float32)
        noisy = self.privatizer.privatize(examples)
        update = noisy / np.float32(self.clients_per_round)
        if self._velocity is None:
            self._velocity = np.zeros_like(update)
        self._velocity = self.server_momentum * self._velocity + update
        new_flat = global_flat + self.server_learning_rate * self._velocity
        out, start = [], 0
        for a in self._global:
            out.append(new_flat[start : start + a.size].reshape(a.shape))
            start += a.size
        self._global = None
        return ndarrays_to_parameters(out), {
            "clients_sampled": len(self._sampled),
            "clients_aggregated": len(rows),
            "failures": len(failures),
        }

    def configure_evaluate(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, EvaluateIns]]:
        """The wrapped strategy's (``server_round``, ``parameters``, ``client_manager`` passed
        on): federated evaluation is outside the privacy guarantee (see the module)."""
        return self.strategy.configure_evaluate(server_round, parameters, client_manager)

    def aggregate_evaluate(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, EvaluateRes]],
        failures: list[Union[tuple[ClientProxy, EvaluateRes], BaseException]],
    ) -> tuple[Optional[float], dict[str, Scalar]]:
        """The wrapped strategy's (``server_round``, ``results``, ``failures`` passed on):
        outside the privacy guarantee (see the module)."""
        return self.strategy.aggregate_evaluate(server_round, results, failures)

    def evaluate(
        self, server_round: int, parameters: Parameters
    ) -> Optional[tuple[float, dict[str, Scalar]]]:
        """The wrapped strategy's server-side evaluation of ``parameters`` after
        ``server_round`` (post-processing of the private model when it uses no client data)."""
        return self.strategy.evaluate(server_round, parameters)
