"""`verigrad.distributed`: PyTorch's `torch.distributed` names on MPI (mpi4py, imported only when
`init_process_group` runs): the process group, the collectives (IR ops whose reduction is the sum in
rank order, so every rank count gives defined bits), `DistributedDataParallel` and, in
`verigrad.distributed.optim`, `ZeroRedundancyOptimizer`."""

from ..nn import parallel as _parallel
from . import ops, optim
from .collectives import (
    Work,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    broadcast,
    reduce_scatter,
    reduce_scatter_tensor,
)
from .ddp import DistributedDataParallel
from .reduction import ReduceOp, ordered_reduce, reduce_reference
from .world import (
    DistributedError,
    NotInitializedError,
    barrier,
    destroy_process_group,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
)

# PyTorch's `torch.nn.parallel.DistributedDataParallel`: nn is a lower layer than distributed (which
# needs nn's Module and optim's Optimizer), so the class is set on nn.parallel from here; `import
# verigrad` imports this package (mpi4py only when init_process_group runs).
_parallel.DistributedDataParallel = DistributedDataParallel
