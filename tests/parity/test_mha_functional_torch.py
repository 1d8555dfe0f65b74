"""F.multi_head_attention_forward against torch 2.13: CLIP's attention pooling (separate q/k/v projections
as keyword arguments, need_weights=False, an output projection to another width) in f64, values and
gradients; the packed in_proj form with a key padding mask and the weights averaged over heads."""

from __future__ import annotations

import numpy as np
import torch
from gradients import check_values_and_gradients

import verigrad

RNG = np.random.default_rng(8)


def _clip_pool(t):
    nn, F = t.nn, t.nn.functional

    class AttentionPool2d(nn.Module):
        def __init__(self, spacial_dim, embed_dim, num_heads, output_dim=None):
            super().__init__()
            self.positional_embedding = nn.Parameter(t.randn(spacial_dim**2 + 1, embed_dim) / embed_dim**0.5)
            self.k_proj = nn.Linear(embed_dim, embed_dim)
            self.q_proj = nn.Linear(embed_dim, embed_dim)
            self.v_proj = nn.Linear(embed_dim, embed_dim)
            self.c_proj = nn.Linear(embed_dim, output_dim or embed_dim)
            self.num_heads = num_heads

        def forward(self, x):
            x = x.flatten(start_dim=2).permute(2, 0, 1)  # NCHW -> (HW)NC
            x = t.cat([x.mean(dim=0, keepdim=True), x], dim=0)  # (HW+1)NC
            x = x + self.positional_embedding[:, None, :].to(x.dtype)
            x, _ = F.multi_head_attention_forward(
                query=x[:1], key=x, value=x, embed_dim_to_check=x.shape[-1], num_heads=self.num_heads,
                q_proj_weight=self.q_proj.weight, k_proj_weight=self.k_proj.weight,
                v_proj_weight=self.v_proj.weight, in_proj_weight=None,
                in_proj_bias=t.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]), bias_k=None,
                bias_v=None, add_zero_attn=False, dropout_p=0, out_proj_weight=self.c_proj.weight,
                out_proj_bias=self.c_proj.bias, use_separate_proj_weight=True, training=self.training,
                need_weights=False,
            )  # fmt: skip
            return x.squeeze(0)

    return AttentionPool2d(3, 8, 2, output_dim=5).double()


def test_clip_attention_pool_against_torch():
    theirs, ours = _clip_pool(torch), _clip_pool(verigrad)
    ours.load_state_dict(
        {k: verigrad.from_numpy(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()}
    )
    x = RNG.standard_normal((2, 8, 3, 3))
    o_x, t_x = verigrad.from_numpy(x.copy()).requires_grad_(), torch.from_numpy(x.copy()).requires_grad_()
    o, t = ours(o_x), theirs(t_x)
    np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-13)
    cotangent = RNG.standard_normal(tuple(t.shape))
    o.backward(verigrad.from_numpy(cotangent.copy()))
    t.backward(torch.from_numpy(cotangent.copy()))
    np.testing.assert_allclose(o_x.grad.numpy(), t_x.grad.numpy(), rtol=1e-11, atol=1e-13)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-11, atol=1e-13, err_msg=name)


def test_packed_projection_with_padding_mask_against_torch():
    e, heads, length, batch, size = 8, 2, 3, 2, 4
    arrays = {
        "q": RNG.standard_normal((length, batch, e)), "k": RNG.standard_normal((size, batch, e)),
        "v": RNG.standard_normal((size, batch, e)), "w": RNG.standard_normal((3 * e, e)),
        "b": RNG.standard_normal(3 * e), "wo": RNG.standard_normal((e, e)), "bo": RNG.standard_normal(e),
    }  # fmt: skip
    mask = RNG.random((batch, size)) > 0.6
    mask[:, 0] = False

    def call(t):
        def f(q, k, v, w, b, wo, bo):
            out, weights = t.nn.functional.multi_head_attention_forward(
                q, k, v, e, heads, w, b, None, None, False, 0.0, wo, bo, training=False,
                key_padding_mask=t.from_numpy(mask.copy()),
            )  # fmt: skip
            return out.sum(-1) + weights.sum(-1).sum(-1).unsqueeze(0) * 0.5

        return f

    check_values_and_gradients(arrays, call(verigrad), call(torch))
