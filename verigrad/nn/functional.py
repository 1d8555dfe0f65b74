"""`verigrad.functional` under PyTorch's path, so `import verigrad.nn.functional as F` works as
`import torch.nn.functional as F` does."""

from ..functional import *  # noqa: F403
from ..functional import __all__  # noqa: F401
