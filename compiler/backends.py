"""Running a compiled entry on a backend, then applying its effects to the user's objects."""
import numpy as np

from dynograph.runtime import device_kernels, host_kernels
from dynograph.runtime.cuda_memory import DeviceArray
from . import interpreter
from .binding import assign_binding, write_binding

BACKENDS = ("interpreter", "llvm")
DEFAULT_BACKEND = "llvm"        # tensors live on the CPU: native kernels from LLVM


def llvm_kernels():
    """The llvm backend's compiled direct kernels, lent to eager ops (runtime/host_kernels.py);
    imported when the first eager op asks."""
    from .llvm.backend import LLVM
    from .lowering.program import Host
    return Host(LLVM)


host_kernels.install(llvm_kernels)


def cuda_kernels():
    """The CUDA code generator's single-op kernels, lent to eager ops on cuda tensors
    (runtime/device_kernels.py); imported when the first op on a cuda tensor asks."""
    from .cuda.eager import device_ops
    return device_ops()


device_kernels.install(cuda_kernels)


def get_runner(backend):
    if backend == "interpreter":
        return interpreter.run
    if backend == "llvm":
        from .llvm.backend import run
        return run
    raise ValueError(f"dynograph.compile: unknown backend {backend!r}; available: "
                     f"{', '.join(BACKENDS)}")


def run_entry(backend, entry, flat):
    """Execute ``entry``'s graph on the arguments ``flat``; returns the flat outputs."""
    from dynograph._tensor import Tensor
    arrays = entry.read_inputs(flat)
    batch = entry.guards.batch_size(flat) if entry.guards.dynamic else None
    runner = get_runner(backend)
    if any(type(a) is DeviceArray for a in arrays):      # traced on cuda tensors
        from .cuda.backend import run as runner
    outs, updates = runner(entry.graph, arrays, batch, entry.writable)
    inputs = {id(a) for a in arrays}
    used = set(inputs)

    def fresh(a):
        # a result that is an input buffer or already handed out must not alias it
        if type(a) is not DeviceArray:
            a = np.asarray(a)
        if id(a) in used or (a.base is not None and id(a.base) in inputs):
            a = a.copy()
        used.add(id(a))
        return a

    for slot, array in updates.items():
        binding, kind = entry.effects[slot]
        if kind == "write":
            write_binding(binding, flat, array)
        else:
            # a new state tensor (a .grad, an optimizer buffer) owns its memory, as eager's
            # would: a view of a backend's scratch array would change the next call's guards
            array = fresh(array)
            assign_binding(binding, flat, Tensor._wrap(array.copy() if array.base is not None else array))
    for slot in entry.clears:
        slot.set(None)
    result = []
    n_tensors = sum(1 for k in entry.out_kinds if k[0] == "tensor")
    for kind in entry.out_kinds:
        if kind[0] == "const":
            result.append(kind[1])
        elif kind[0] == "tensor":
            result.append(Tensor._wrap(fresh(outs[kind[1]])))
        else:                           # a value saved for the backward graph: kept as it is
            result.append(outs[n_tensors + kind[1]])
    return result
