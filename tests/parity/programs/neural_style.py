"""PyTorch's fast_neural_style example, shrunk: the TransformerNet of reflection-padded convolutions,
affine InstanceNorm2d, residual blocks and nearest upsampling by F.interpolate(scale_factor=2), trained
by Adam on a content loss (MSE of a frozen feature network's relu2_2) and a style loss (MSE of Gram
matrices, `features.bmm(features_t) / (ch * h * w)`), with the example's normalize_batch dividing by 255
in place. The feature network stands in for VGG16 (four frozen slices returned as a namedtuple); the
images are random. The style batch is `style.repeat(2, 1, 1, 1)` cloned: verigrad's repeat gives a
read-only view, which normalize_batch's div_ refuses (PyTorch's repeat copies)."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from . import record

CONTENT_WEIGHT, STYLE_WEIGHT = 1e2, 1e7


def build(torch: Any) -> Any:
    class ConvLayer(torch.nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride):
            super(ConvLayer, self).__init__()  # noqa: UP008 (as the example)
            reflection_padding = kernel_size // 2
            self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
            self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            out = self.reflection_pad(x)
            out = self.conv2d(out)
            return out

    class ResidualBlock(torch.nn.Module):
        def __init__(self, channels):
            super(ResidualBlock, self).__init__()  # noqa: UP008 (as the example)
            self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
            self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
            self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
            self.relu = torch.nn.ReLU()

        def forward(self, x):
            residual = x
            out = self.relu(self.in1(self.conv1(x)))
            out = self.in2(self.conv2(out))
            out = out + residual
            return out

    class UpsampleConvLayer(torch.nn.Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
            super(UpsampleConvLayer, self).__init__()  # noqa: UP008 (as the example)
            self.upsample = upsample
            reflection_padding = kernel_size // 2
            self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
            self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

        def forward(self, x):
            x_in = x
            if self.upsample:
                x_in = torch.nn.functional.interpolate(x_in, mode="nearest", scale_factor=self.upsample)
            out = self.reflection_pad(x_in)
            out = self.conv2d(out)
            return out

    class TransformerNet(torch.nn.Module):
        def __init__(self):
            super(TransformerNet, self).__init__()  # noqa: UP008 (as the example)
            self.conv1 = ConvLayer(3, 8, kernel_size=9, stride=1)
            self.in1 = torch.nn.InstanceNorm2d(8, affine=True)
            self.conv2 = ConvLayer(8, 12, kernel_size=3, stride=2)
            self.in2 = torch.nn.InstanceNorm2d(12, affine=True)
            self.conv3 = ConvLayer(12, 16, kernel_size=3, stride=2)
            self.in3 = torch.nn.InstanceNorm2d(16, affine=True)
            self.res1 = ResidualBlock(16)
            self.res2 = ResidualBlock(16)
            self.deconv1 = UpsampleConvLayer(16, 12, kernel_size=3, stride=1, upsample=2)
            self.in4 = torch.nn.InstanceNorm2d(12, affine=True)
            self.deconv2 = UpsampleConvLayer(12, 8, kernel_size=3, stride=1, upsample=2)
            self.in5 = torch.nn.InstanceNorm2d(8, affine=True)
            self.deconv3 = ConvLayer(8, 3, kernel_size=9, stride=1)
            self.relu = torch.nn.ReLU()

        def forward(self, X):
            y = self.relu(self.in1(self.conv1(X)))
            y = self.relu(self.in2(self.conv2(y)))
            y = self.relu(self.in3(self.conv3(y)))
            y = self.res1(y)
            y = self.res2(y)
            y = self.relu(self.in4(self.deconv1(y)))
            y = self.relu(self.in5(self.deconv2(y)))
            y = self.deconv3(y)
            return y

    return TransformerNet()


def features(torch: Any, requires_grad: bool = False) -> Any:
    """The example's Vgg16 in miniature: four slices of convolutions and pools, frozen."""
    nn = torch.nn

    class Vgg16(nn.Module):
        def __init__(self, requires_grad=False):
            super(Vgg16, self).__init__()  # noqa: UP008 (as the example)
            self.slice1 = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(inplace=True))
            self.slice2 = nn.Sequential(
                nn.MaxPool2d(2, 2), nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(inplace=True)
            )
            self.slice3 = nn.Sequential(
                nn.MaxPool2d(2, 2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True)
            )
            self.slice4 = nn.Sequential(
                nn.MaxPool2d(2, 2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True)
            )
            if not requires_grad:
                for param in self.parameters():
                    param.requires_grad = False

        def forward(self, X):
            h = self.slice1(X)
            h_relu1_2 = h
            h = self.slice2(h)
            h_relu2_2 = h
            h = self.slice3(h)
            h_relu3_3 = h
            h = self.slice4(h)
            h_relu4_3 = h
            vgg_outputs = namedtuple("VggOutputs", ["relu1_2", "relu2_2", "relu3_3", "relu4_3"])
            out = vgg_outputs(h_relu1_2, h_relu2_2, h_relu3_3, h_relu4_3)
            return out

    return Vgg16(requires_grad=requires_grad)


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    gram = features.bmm(features_t) / (ch * h * w)
    return gram


def normalize_batch(batch):
    # normalize using imagenet mean and std
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None, steps: int = 6
) -> dict[str, Any]:
    torch.manual_seed(0)
    dt = dtype or torch.float32
    transformer = build(torch).to(dt)
    vgg = features(torch).to(dt)
    model = torch.nn.ModuleDict({"transformer": transformer, "vgg": vgg})
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "content": [], "style": []}
    optimizer = torch.optim.Adam(transformer.parameters(), 1e-2)
    mse_loss = torch.nn.MSELoss()
    rng = np.random.default_rng(6)
    style = torch.from_numpy(rng.uniform(0, 255, (1, 3, 16, 16))).to(dt)
    style = style.repeat(2, 1, 1, 1).clone()  # clone: verigrad's repeat is read-only (see the docstring)
    features_style = vgg(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]

    for batch_id in range(steps):
        x = torch.from_numpy(rng.uniform(0, 255, (2, 3, 16, 16))).to(dt)
        n_batch = len(x)
        optimizer.zero_grad()

        y = transformer(x)
        y = normalize_batch(y)
        x = normalize_batch(x)

        features_y = vgg(y)
        features_x = vgg(x)

        content_loss = CONTENT_WEIGHT * mse_loss(features_y.relu2_2, features_x.relu2_2)

        style_loss = 0.0
        for ft_y, gm_s in zip(features_y, gram_style):
            gm_y = gram_matrix(ft_y)
            style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
        style_loss *= STYLE_WEIGHT

        total_loss = content_loss + style_loss
        total_loss.backward()
        if batch_id == 0:
            out["loss0"] = total_loss.item()
            out["grads0"] = {f"transformer.{k}": v for k, v in record.grads(transformer).items()}
        optimizer.step()
        out["losses"].append(total_loss.item())
        out["content"].append(content_loss.item())
        out["style"].append(style_loss.item())

    transformer.eval()
    with torch.no_grad():
        content = torch.from_numpy(rng.uniform(0, 255, (1, 3, 16, 16))).to(dt)
        output = transformer(content)
        out["eval"] = [output.numpy().copy(), output.clamp(0, 255).numpy().copy()]
    return out
