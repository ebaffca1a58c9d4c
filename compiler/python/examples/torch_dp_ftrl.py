"""BandMF with momentum in PyTorch through ``mfc.torch.DPFTRLOptimizer``, checking its own
claims: (1) the optimizer's parameters after every step equal the loop written by hand on
``mfc.Stream.step_examples`` (per-example gradients from ``torch.func``, heavy-ball SGD written
out) bit for bit; (2) at (epsilon, delta) = (4, 1e-6) a small MLP still learns the task (training
accuracy above 0.8 for every seed, chance is 0.5).

Privacy: one example is the unit, its whole per-sample gradient clipped to zeta = 1 by the
runtime, each example in exactly one step (one epoch, single participation), add-or-remove-one
neighbours; sigma is the blob's, calibrated for (4, 1e-6) on its recorded sensitivity.

Needs torch. Run: python compiler/python/examples/torch_dp_ftrl.py
"""

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

import mfc
from mfc.torch import DPFTRLOptimizer

STEPS, BATCH, FEATURES, BETA, LR = 64, 32, 20, 0.9, 0.5


def mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)
    )


def per_example_grads(net, x, y):
    params = {k: v.detach() for k, v in net.named_parameters()}

    def loss(p, xe, ye):
        return F.cross_entropy(functional_call(net, p, (xe[None],)), ye[None])

    out = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    return [out[k] for k in params]


def main():
    mechanism = mfc.compile(steps=STEPS, workload=f"momentum:{BETA}", form="bandmf",
                            epsilon=4.0, delta=1e-6, progress=False)
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(STEPS * BATCH, FEATURES)
        y = (x[:, :2].sum(1) > 0).long()
        stream_seed = bytes([seed + 1]) * 32  # a simulation seed, shared with the hand loop

        net, by_hand = mlp(), mlp()
        by_hand.load_state_dict(net.state_dict())
        optimizer = DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=LR, momentum=BETA),
                                    mechanism, expected_batch_size=BATCH, seed=stream_seed)
        stream = mfc.Stream(mechanism, optimizer.dim, stream_seed)
        buf = None
        for t in range(STEPS):
            xb, yb = x[t * BATCH:(t + 1) * BATCH], y[t * BATCH:(t + 1) * BATCH]
            optimizer.zero_grad()
            optimizer.step(grad_samples=per_example_grads(net, xb, yb))
            # By hand: a BandMF momentum stream releases the noisy gradient itself.
            grads = per_example_grads(by_hand, xb, yb)
            examples = torch.cat([g.reshape(BATCH, -1) for g in grads], dim=1).numpy()
            g = torch.from_numpy(stream.step_examples(examples) / np.float32(BATCH))
            buf = g.clone() if buf is None else buf.mul(BETA).add(g)
            with torch.no_grad():
                offset = 0
                for p in by_hand.parameters():
                    p.add_(buf[offset:offset + p.numel()].view_as(p), alpha=-LR)
                    offset += p.numel()
            for a, b in zip(net.parameters(), by_hand.parameters()):
                assert torch.equal(a, b), f"seed {seed}, step {t}: differs from the hand loop"
        with torch.no_grad():
            accuracy = (net(x).argmax(1) == y).float().mean().item()
        print(f"seed {seed}: {STEPS} steps equal to the hand loop bit for bit, "
              f"training accuracy {accuracy:.3f}")
        assert accuracy > 0.8, accuracy
    print(optimizer.privacy["statement"])


if __name__ == "__main__":
    main()
