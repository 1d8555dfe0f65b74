"""PyTorch's reinforcement_learning actor-critic example on a toy task: a shared body with an action
head and a value head, actions drawn from torch.distributions.Categorical, returns discounted and
normalised, a policy loss of -log_prob * advantage with an entropy bonus and a smooth_l1_loss value
loss, Adam. The environment is a small deterministic chain; the actions are drawn by inverting the
categorical's CDF at uniforms the caller passes, so that both frameworks act alike."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

N_STATES, N_ACTIONS, HORIZON, GAMMA = 6, 3, 12, 0.9


def build(torch: Any) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.affine1 = nn.Linear(N_STATES, 32)
            self.action_head = nn.Linear(32, N_ACTIONS)
            self.value_head = nn.Linear(32, 1)
            self.saved_actions = []
            self.rewards = []

        def forward(self, x):
            x = F.relu(self.affine1(x))
            action_prob = F.softmax(self.action_head(x), dim=-1)
            state_values = self.value_head(x)
            return action_prob, state_values

    return Policy()


def step_env(state: int, action: int) -> tuple[int, float]:
    """Action 0 moves left, 2 right, 1 stays; the reward is 1 at the right end, a small cost elsewhere."""
    state = min(max(state + action - 1, 0), N_STATES - 1)
    return state, (1.0 if state == N_STATES - 1 else -0.05)


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, episodes: int = 10) -> dict[str, Any]:
    F = torch.nn.functional
    Categorical = torch.distributions.Categorical
    torch.manual_seed(0)
    model = build(torch)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "actions": [], "entropy": []}
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    eps = np.finfo(np.float32).eps.item()
    rng = np.random.default_rng(11)

    def select_action(state, u):
        x = torch.zeros(N_STATES)
        x[state] = 1.0
        probs, state_value = model(x)
        m = Categorical(probs)
        # m.sample(), drawn from the uniform u: the first action whose cumulative probability exceeds u
        action = (probs.cumsum(-1) < u).sum().clamp(max=N_ACTIONS - 1)
        model.saved_actions.append((m.log_prob(action), state_value, m.entropy()))
        return action.item()

    for episode in range(episodes):
        state = 0
        uniforms = torch.from_numpy(rng.random(HORIZON).astype(np.float32))
        for t in range(HORIZON):
            action = select_action(state, uniforms[t])
            out["actions"].append(action)
            state, reward = step_env(state, action)
            model.rewards.append(reward)

        R = 0
        saved_actions = model.saved_actions
        policy_losses, value_losses, returns = [], [], []
        for r in model.rewards[::-1]:
            R = r + GAMMA * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for (log_prob, value, _entropy), R in zip(saved_actions, returns):
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
        entropy = torch.stack([e for _, _, e in saved_actions]).mean()
        optimizer.zero_grad()
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum() - 0.01 * entropy
        loss.backward()
        if episode == 0:
            out["loss0"], out["grads0"] = loss.item(), record.grads(model)
        optimizer.step()
        out["losses"].append(loss.item())
        out["entropy"].append(entropy.item())
        del model.rewards[:]
        del model.saved_actions[:]

    with torch.no_grad():
        probs, values = model(torch.eye(N_STATES))
        d = Categorical(logits=probs.log())
        out["eval"] = [probs.numpy().copy(), values.numpy().copy(), d.entropy().numpy().copy()]
        out["eval"].append(d.log_prob(torch.arange(N_ACTIONS).view(-1, 1)).numpy().copy())
    return out
