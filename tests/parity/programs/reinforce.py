"""PyTorch's reinforcement_learning REINFORCE example on a toy task: a policy of two Linear layers with
dropout and a softmax, each action from torch.distributions.Categorical (its log_prob of a [1] action
kept per step), returns discounted and normalised, `torch.cat(policy_loss).sum()`, Adam; a running
reward logged as the example does. The environment is a small deterministic walk of four features
(CartPole's state size); actions are drawn by inverting the categorical's CDF at uniforms the caller
passes, so that both frameworks act alike (m.sample()'s shape and dtype are still recorded). Dropout is
0 here: its random masks are each framework's own."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

HORIZON, GAMMA = 10, 0.99


def build(torch: Any) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.affine1 = nn.Linear(4, 32)
            self.dropout = nn.Dropout(p=0.0)
            self.affine2 = nn.Linear(32, 2)

            self.saved_log_probs = []
            self.rewards = []

        def forward(self, x):
            x = self.affine1(x)
            x = self.dropout(x)
            x = F.relu(x)
            action_scores = self.affine2(x)
            return F.softmax(action_scores, dim=1)

    return Policy()


def step_env(state: np.ndarray, action: int) -> tuple[np.ndarray, float]:
    """A pole that action 1 pushes right and action 0 left; the reward is 1 while it stays near 0."""
    x, v, a, w = state
    push = 0.1 if action == 1 else -0.1
    w = w + push - 0.05 * a
    a = a + w
    v = v + push
    x = x + 0.1 * v
    new = np.array([x, v, a, w], np.float32)
    return new, 1.0 if abs(a) < 0.5 else 0.0


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None, episodes: int = 10
) -> dict[str, Any]:
    Categorical = torch.distributions.Categorical
    torch.manual_seed(0)
    policy = build(torch).to(dtype or torch.float32)
    if saved is not None:
        record.load(torch, policy, saved)
    out: dict[str, Any] = {"state": record.state(policy), "losses": [], "actions": [], "log": []}
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    eps = np.finfo(np.float32).eps.item()
    rng = np.random.default_rng(5)

    def select_action(state, u):
        state = torch.from_numpy(state).to(dtype or torch.float32).unsqueeze(0)
        probs = policy(state)
        m = Categorical(probs)
        drawn = m.sample()
        out.setdefault("sampled", (tuple(drawn.shape), drawn.dtype == torch.int64))
        action = (probs.cumsum(1) < u).sum(1).clamp(max=1)  # m.sample() from the uniform u
        policy.saved_log_probs.append(m.log_prob(action))
        return action.item()

    def finish_episode():
        R = 0
        policy_loss = []
        returns = []
        for r in policy.rewards[::-1]:
            R = r + GAMMA * R
            returns.insert(0, R)
        returns = torch.tensor(returns, dtype=dtype)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for log_prob, R in zip(policy.saved_log_probs, returns):
            policy_loss.append(-log_prob * R)
        optimizer.zero_grad()
        policy_loss = torch.cat(policy_loss).sum()
        policy_loss.backward()
        if "grads0" not in out:
            out["loss0"], out["grads0"] = policy_loss.item(), record.grads(policy)
        optimizer.step()
        out["losses"].append(policy_loss.item())
        del policy.rewards[:]
        del policy.saved_log_probs[:]

    running_reward = 10
    for i_episode in range(episodes):
        state, ep_reward = np.array([0.0, 0.0, 0.05, -0.02], np.float32), 0
        uniforms = rng.random(HORIZON).astype(np.float32)
        for t in range(HORIZON):
            action = select_action(state, float(uniforms[t]))
            out["actions"].append(action)
            state, reward = step_env(state, action)
            policy.rewards.append(reward)
            ep_reward += reward
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        finish_episode()
        out["log"].append(
            f"Episode {i_episode}\tLast reward: {ep_reward:.2f}\tAverage reward: {running_reward:.2f}"
        )

    with torch.no_grad():
        probs = policy(
            torch.from_numpy(np.random.default_rng(1).standard_normal((5, 4))).to(dtype or torch.float32)
        )
        m = Categorical(probs)
        out["eval"] = [
            probs.numpy().copy(),
            m.entropy().numpy().copy(),
            m.log_prob(torch.tensor([0, 1, 1, 0, 1])).numpy().copy(),
        ]
    return out
