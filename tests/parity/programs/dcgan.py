"""PyTorch's DCGAN example scaled to 16x16 images: a generator of transposed convolutions with batch
norm, a discriminator of strided convolutions with LeakyReLU, weights_init through model.apply, BCELoss
and two Adam optimizers with betas; the discriminator's step sees the fakes detached."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

NZ, NGF, NDF, NC = 8, 8, 8, 1


def build(torch: Any) -> tuple[Any, Any]:
    nn = torch.nn

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            m.weight.data.normal_(1.0, 0.02)
            m.bias.data.fill_(0)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False),  # 4x4
                nn.BatchNorm2d(NGF * 2),
                nn.ReLU(True),
                nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False),  # 8x8
                nn.BatchNorm2d(NGF),
                nn.ReLU(True),
                nn.ConvTranspose2d(NGF, NC, 4, 2, 1, bias=False),  # 16x16
                nn.Tanh(),
            )

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(NC, NDF, 4, 2, 1, bias=False),  # 8x8
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),  # 4x4
                nn.BatchNorm2d(NDF * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),
                nn.Sigmoid(),
            )

        def forward(self, input):
            output = self.main(input)
            return output.view(-1, 1).squeeze(1)

    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    return netG, netD


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, steps: int = 12) -> dict[str, Any]:
    nn = torch.nn
    torch.manual_seed(0)
    netG, netD = build(torch)
    if saved is not None:
        record.load(torch, netG, {k[2:]: v for k, v in saved.items() if k.startswith("G.")})
        record.load(torch, netD, {k[2:]: v for k, v in saved.items() if k.startswith("D.")})
    state = {"G." + k: v for k, v in record.state(netG).items()}
    state.update({"D." + k: v for k, v in record.state(netD).items()})
    out: dict[str, Any] = {"state": state, "losses": []}

    criterion = nn.BCELoss()
    real_label, fake_label = 1.0, 0.0
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))

    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:16, 0:16] / 15.0
    batch_size = 8
    for step in range(steps):
        phase = rng.random((batch_size, 1, 1, 1))
        real_cpu = torch.from_numpy(np.sin(6 * xx + 4 * yy + 6 * phase).astype(np.float32))
        noise = torch.from_numpy(rng.standard_normal((batch_size, NZ, 1, 1)).astype(np.float32))

        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        errD = errD_real + errD_fake
        if step == 0:
            out["loss0"] = errD.item()
            out["grads0"] = {"D." + k: v for k, v in record.grads(netD).items()}
        optimizerD.step()

        # (2) Update G network: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        if step == 0:
            out["grads0"].update({"G." + k: v for k, v in record.grads(netG).items()})
        optimizerG.step()
        out["losses"] += [errD.item(), errG.item()]

    netG.eval()
    with torch.no_grad():
        fixed_noise = torch.from_numpy(rng.standard_normal((4, NZ, 1, 1)).astype(np.float32))
        out["eval"] = [netG(fixed_noise).numpy().copy(), netD(netG(fixed_noise)).numpy().copy()]
    return out
