"""Keyword names: every public function of dynograph (and every Tensor method) accepts the
keyword names torch's own signature has, and torch's Python-level functions' defaults.

torch's signatures come from ``inspect`` where torch defines the function in Python, and
otherwise from its operator schemas (``aten::name``: the overloads whose first argument is a
tensor, without the ``out=`` forms; ``self`` is called ``input`` in the function form).  A name
listed in EXCEPTIONS is a deliberate or known difference, with its reason."""
import inspect

import pytest

import dynograph

# keyword names torch accepts that dynograph does not, by function (or "Tensor.method")
EXCEPTIONS = {
    # the low-precision output option of the matmul family (CUDA kernels only)
    "bmm": {"out_dtype"}, "mm": {"out_dtype"}, "Tensor.bmm": {"out_dtype"}, "Tensor.mm": {"out_dtype"},
    "baddbmm": {"out_dtype"}, "addmm": {"out_dtype"},
    "Tensor.baddbmm": {"out_dtype"}, "Tensor.addmm": {"out_dtype"},
    # pinned memory is a CUDA host-allocation option; dynograph has no CUDA device
    "rand_like": {"pin_memory"}, "randn_like": {"pin_memory"}, "randint_like": {"pin_memory"},
    # the overloads taking one Python number are spelled element= / test_element=
    "isin": {"element", "test_element"},
    # dynograph.compile is dynograph's own compiler entry point, not torch.compile
    "compile": {"disable", "isolate_recompiles", "model", "name", "recompile_limit", "shapes_spec"},
    # schema artifacts: Tensor.where's first schema argument is the condition, copy_'s second
    # overload (copy_.Tensor) is not reachable from Python
    "Tensor.where": {"input"}, "Tensor.copy_": {"other"},
    # nn.functional: elu_'s schema has the fused-ELU scale arguments torch's Python form does
    # not show; one_hot's first argument is named tensor in torch's documented signature
    "F.elu_": {"input_scale", "scale"}, "F.one_hot": {"input"},
}


def _torch_signature_names(fn, method):
    """(names, defaults) of torch's signature: Python-level functions by inspect, builtins
    by their operator schemas; None where torch states neither."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        params = list(sig.parameters.values())[1 if method else 0:]
        names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        defaults = {p.name: p.default for p in params if p.default is not p.empty}
        return names, defaults
    import torch
    try:
        schemas = torch._C._jit_get_schemas_for_operator("aten::" + fn.__name__)
    except RuntimeError:
        return None
    names, found = set(), False
    for s in schemas:
        args = s.arguments
        if not args or str(args[0].type) not in ("Tensor", "Tensor[]", "Tensor?[]") or \
                any(a.is_out for a in args):
            continue
        found = True
        for a in args[1:] if method else args:
            names.add("input" if a.name == "self" else a.name)
    return (names, {}) if found else None


def _ours(fn, method):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())[1 if method else 0:]
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None                     # takes any keyword: checked by the call tests
    return ({p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)},
            {p.name: p.default for p in params if p.default is not p.empty})


def _pairs(torch, method):
    if method == "functional":
        for name in sorted(dir(dynograph.nn.functional)):
            ours, theirs = getattr(dynograph.nn.functional, name), getattr(torch.nn.functional, name, None)
            if name.startswith("_") or theirs is None or not callable(ours) or inspect.isclass(ours):
                continue
            yield "F." + name, ours, theirs
        return
    if method:
        for name in sorted(dir(dynograph.Tensor)):
            if name.startswith("_") or not hasattr(torch.Tensor, name):
                continue
            ours, theirs = getattr(dynograph.Tensor, name), getattr(torch.Tensor, name)
            if callable(ours) and callable(theirs) and not isinstance(ours, property):
                yield "Tensor." + name, ours, theirs
        return
    for name in sorted(dir(dynograph)):
        ours, theirs = getattr(dynograph, name), getattr(torch, name, None)
        if name.startswith("_") or theirs is None or not callable(ours) or inspect.isclass(ours) \
                or inspect.isclass(theirs):
            continue
        yield name, ours, theirs


def _mismatches(torch, method):
    missing, defaults = {}, {}
    for name, ours, theirs in _pairs(torch, method):
        t = _torch_signature_names(theirs, method is True)
        o = _ours(ours, method is True)
        if t is None or o is None:
            continue
        lack = t[0] - o[0] - EXCEPTIONS.get(name, set())
        if lack:
            missing[name] = sorted(lack)
        for k, v in t[1].items():
            if k in o[1] and o[1][k] != v and not (v is None or o[1][k] is None) and \
                    type(v) in (int, float, bool, str):
                defaults[f"{name}({k})"] = (o[1][k], v)
    return missing, defaults


@pytest.mark.parametrize("method", [False, True, "functional"],
                         ids=["functions", "methods", "nn.functional"])
def test_keyword_names_and_defaults_match_torch(torch, method):
    missing, defaults = _mismatches(torch, method)
    assert missing == {}, "keyword names torch accepts and dynograph does not"
    assert defaults == {}, "defaults that differ from torch's"


def test_exceptions_are_still_needed(torch):
    # an exception whose keyword dynograph has learned must leave the list
    for name, names in EXCEPTIONS.items():
        method = name.startswith("Tensor.")
        fn = getattr(dynograph.Tensor, name[7:]) if method else \
            getattr(dynograph.nn.functional, name[2:]) if name.startswith("F.") else getattr(dynograph, name)
        o = _ours(fn, method)
        assert o is None or not (names & o[0]), name


def test_flip_and_friends_take_their_keyword(torch):
    for lib in (torch, dynograph):
        x = lib.arange(6.0).reshape(2, 3)
        assert x.flip(dims=(0,)).tolist() == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]]
        assert x.permute(dims=(1, 0)).shape == (3, 2)
        assert x.reshape(shape=(3, 2)).shape == (3, 2)
        assert x.repeat(repeats=(1, 2)).shape == (2, 6)
        assert x[:1].expand(size=(4, 3)).shape == (4, 3)
        assert x.tile(dims=(2,)).shape == (2, 6)
