"""Optimizer base class with PyTorch's torch.optim.Optimizer semantics."""
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain

from dynograph._trace_hook import TRACE
from .._tensor import Tensor

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marker for a hyper-parameter that has no default (e.g. ``lr`` of some optimizers)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class _RemovableHandle:
    """Handle returned by hook registration; ``remove()`` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks):
        self._hooks = hooks
        self.id = _RemovableHandle._next_id
        _RemovableHandle._next_id += 1

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def traced_lr(opt, group):
    """``group['lr']``: a Python float, or, while the step is being compiled, a graph input
    that is read on every call (so a scheduler changing it does not force a retrace)."""
    lr = group["lr"]
    tracer = TRACE.tracer
    if tracer is None or not isinstance(lr, float):
        return lr
    i = next(k for k, g in enumerate(opt.param_groups) if g is group)
    return tracer.scalar_input(f"{tracer.optimizer_name(opt)}.param_groups[{i}].lr", lr,
                               lambda: group["lr"])


def scalar_state(t):
    """A 0-d state tensor (a step counter, NAdam's momentum product) as a Python float; while
    compiling, as a float64 0-d tensor, so what depends on it is computed in the graph."""
    if TRACE.tracer is not None:
        return t.double()
    return t.item()


def _clone_state_value(value):
    if isinstance(value, Tensor):
        return value.detach().clone()
    return deepcopy(value)


class Optimizer:
    """Base class for all optimizers.

    Args:
        params: an iterable of Tensors or of dicts (parameter groups with per-group options).
        defaults: default values of the optimization options.
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                            f"or dicts, but got {type(params).__name__}")
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_optimizer_step_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_optimizer_step_post_hooks", OrderedDict())

    def __repr__(self):
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += "\n"
            text += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        text += ")"
        return text

    def add_param_group(self, param_group):
        """Add a parameter group (a dict with a 'params' entry) to ``param_groups``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but "
                            "the ordering of tensors in sets will change between runs. Please use a "
                            "list instead.")
        else:
            param_group["params"] = list(params)
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + type(param).__name__)
            if not param.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization "
                                 f"parameter {name}")
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            import warnings
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, "
                          "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for "
                          "more information", stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
        if seen.intersection(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all optimized tensors (to None by default, else to zero)."""
        from .._autograd_methods import zero_grads
        if TRACE.tracer is not None:
            TRACE.tracer.announce_optimizer(self)
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure=None):
        """Perform a single optimization step; subclasses implement ``_step``."""
        if TRACE.tracer is not None:
            TRACE.tracer.announce_optimizer(self)
        for hook in list(self._optimizer_step_pre_hooks.values()):
            result = hook(self, (), {})
            if result is not None:
                raise RuntimeError(f"{hook} must return None or a tuple of (new_args, new_kwargs), "
                                   f"but got {result}.")
        loss = self._step(closure) if TRACE.tracer is None else TRACE.tracer.run_step(self, closure)
        for hook in list(self._optimizer_step_post_hooks.values()):
            hook(self, (), {})
        return loss

    def _step(self, closure):
        raise TypeError(f"{type(self).__name__} does not define an update rule")

    def _state_ahead(self, p, group):
        """Create the state of ``p`` (which has a gradient and no state yet) as the first step
        would, where that step then runs the same update as every later one; return whether
        it did.  A trace does it before the step (compiler/tracer.py ``state_ahead``), so the
        graph reads the state as later calls do.  No, by default."""
        return False

    def register_step_pre_hook(self, hook):
        """Register ``hook(optimizer, args, kwargs)`` called before each ``step``."""
        handle = _RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook):
        """Register ``hook(optimizer, args, kwargs)`` called after each ``step``."""
        handle = _RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    def state_dict(self):
        """Return the state as a dict: 'state' keyed by parameter index, 'param_groups' with index lists."""
        mapping = {}
        index = 0
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                if id(p) not in mapping:
                    mapping[id(p)] = index
                    index += 1
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {}
        for p, value in self.state.items():
            if isinstance(p, Tensor) and id(p) in mapping:
                state[mapping[id(p)]] = value
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a state produced by ``state_dict()`` (values are copied)."""
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        param_lens = (len(g["params"]) for g in groups)
        saved_lens = (len(g["params"]) for g in saved_groups)
        if any(a != b for a, b in zip(param_lens, saved_lens)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size "
                             "of optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in id_map:
                param = id_map[key]
                state[param] = self._cast_state(param, value)
            else:
                state[key] = _clone_state_value(value)
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            new = {k: deepcopy(v) for k, v in saved.items() if k != "params"}
            new["params"] = group["params"]
            new_groups.append(new)
        self.state = state
        self.param_groups = new_groups

    @staticmethod
    def _cast_state(param, value):
        # Like torch: tensors are copied and cast to the parameter's dtype, except 'step'.
        out = {}
        for key, v in value.items():
            if isinstance(v, Tensor):
                v = v.detach().clone()
                if key != "step" and v.dtype.is_floating_point and param.dtype.is_floating_point:
                    v = v.to(param.dtype)
            else:
                v = deepcopy(v)
            out[key] = v
        return out


def run_closure(closure):
    """Evaluate the closure with gradients enabled (``step`` itself runs under no_grad)."""
    if closure is None:
        return None
    from ..autograd.grad_mode import enable_grad
    with enable_grad():
        return closure()


def step_tensor(value=0.0):
    """A float32 scalar step counter, stored in the state as PyTorch does."""
    from .. import float32, tensor
    return tensor(value, dtype=float32)


def check_range(value, ok, message):
    if not ok:
        raise ValueError(message.format(value))
