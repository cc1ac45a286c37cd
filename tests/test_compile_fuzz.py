"""The differential fuzzer of dynograph.compile (tools/fuzz_compile.py) on fixed seeds: random
programs, compiled on each backend, agree with eager execution after every call."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tools import fuzz_compile  # noqa: E402

SEED = 1000
PROGRAMS = 150          # per backend: ~10 s on the interpreter, ~15 s on llvm


@pytest.mark.parametrize("backend", ["interpreter", "llvm"])
def test_random_programs_agree_with_eager(backend):
    reports = []
    found = fuzz_compile.fuzz(PROGRAMS, SEED, backend, report=reports.append)
    assert not found, "\n".join(reports)


def test_random_programs_agree_with_eager_with_every_kernel_in_pieces(monkeypatch):
    # the fuzzer's tensors are small: with pieces of any size, every kernel is split over three
    # threads (and products over the pool), as large ones are
    from dynograph.compiler.llvm import backend, blas
    from dynograph.runtime import threads
    monkeypatch.setattr(threads, "_count", [3])
    monkeypatch.setattr(backend, "PIECE_MIN", 1)
    monkeypatch.setattr(blas, "MIN_FLOPS", 1)
    reports = []
    found = fuzz_compile.fuzz(PROGRAMS // 3, SEED + 7, "llvm", report=reports.append)
    assert not found, "\n".join(reports)


def test_programs_are_reproducible_from_their_seed():
    a = fuzz_compile.generate(7, tuple(fuzz_compile.CATEGORIES))
    b = fuzz_compile.generate(7, tuple(fuzz_compile.CATEGORIES))
    assert a.source() == b.source()
    compile(a.source(), "<program>", "exec")


def test_a_wrong_kernel_is_found_and_minimized(monkeypatch):
    from dynograph.compiler import interpreter
    real = interpreter.evaluate

    def wrong(op, args, attrs):             # a deliberately broken backend: mul is off by one
        out = real(op, args, attrs)
        return out + 1 if op.name == "mul" else out
    monkeypatch.setattr(interpreter, "evaluate", wrong)
    found = fuzz_compile.fuzz(20, SEED, "interpreter", ("ops",), report=lambda text: None,
                              minimize_failures=False)
    assert found
    seed, program, failure = next(iter(found.values()))[0]
    before = len(program.body) + len(program.returns)
    program, failure = fuzz_compile.minimize(program, "interpreter", failure)
    assert len(program.body) + len(program.returns) < before
    assert " * " in "\n".join(program.body) or "**" in "\n".join(program.body)
    assert fuzz_compile.check(program.source(), "interpreter") is not None
