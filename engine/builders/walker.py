"""Builds a step DAG: inputs first, each passed to its builder by field name."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from engine.builders.context import BuildContext, Built
from engine.errors import InternalError, PlanError
from engine.plan.steps import STEP_TYPES, Step

Builder = Callable[..., Any]
BUILDERS: dict[str, Builder] = {}
# A step version that only some steps may read: its check gets the step and every step on
# the way from it to the plan's root (nearest first) and raises PlanError when one may not.
ConsumerCheck = Callable[[Step, Sequence[Step]], None]
CONSUMER_CHECKS: dict[str, ConsumerCheck] = {}

BuildObserver = Callable[[Step, BuildContext, Built], None]
_OBSERVER: ContextVar[BuildObserver | None] = ContextVar("build_observer", default=None)


@contextmanager
def observing_builds(observer: BuildObserver) -> Iterator[None]:
    """Call ``observer(step, ctx, built)`` after each step that ``build`` builds inside the block.

    Steps come inputs first. The observer is per thread (a context variable), so concurrent
    builds on other threads are not seen. Lets a caller see every step's built schema
    without the builders or the engine knowing.
    """
    token = _OBSERVER.set(observer)
    try:
        yield
    finally:
        _OBSERVER.reset(token)


def builds(step_cls: type[Step]) -> Callable[[Builder], Builder]:
    """Register the decorated function as the builder of one step version."""

    def wrap(fn: Builder) -> Builder:
        if step_cls.TYPE in BUILDERS:
            raise TypeError(f"Step {step_cls.TYPE} has two builders.")
        if STEP_TYPES.get(step_cls.TYPE) is not step_cls:
            raise TypeError(f"Step {step_cls.TYPE} is not a registered step class.")
        BUILDERS[step_cls.TYPE] = fn
        return fn

    return wrap


def checks_consumers(step_cls: type[Step]) -> Callable[[ConsumerCheck], ConsumerCheck]:
    """Register the decorated function as the consumer check of one step version."""

    def wrap(fn: ConsumerCheck) -> ConsumerCheck:
        if step_cls.TYPE in CONSUMER_CHECKS:
            raise TypeError(f"Step {step_cls.TYPE} has two consumer checks.")
        CONSUMER_CHECKS[step_cls.TYPE] = fn
        return fn

    return wrap


def build(step: Step, ctx: BuildContext) -> Any:
    """Build ``step`` and everything it reads from; returns what its builder returns."""
    _load_builders()
    cache: dict[int, Any] = {}
    observer = _OBSERVER.get()

    def visit(s: Step, consumers: tuple[Step, ...] = ()) -> Any:
        check = CONSUMER_CHECKS.get(s.TYPE)
        if check is not None:  # on every path to the step, not only the first one built
            check(s, consumers)
        if id(s) in cache:
            return cache[id(s)]
        builder = BUILDERS.get(s.TYPE)
        if builder is None:
            raise PlanError(
                f"No builder for step type '{s.TYPE}'; known: {', '.join(sorted(BUILDERS))}."
            )
        inputs = {name: visit(child, (s, *consumers)) for name, child in s.inputs().items()}
        for name, value in inputs.items():
            if not isinstance(value, Built):
                raise InternalError(f"Input '{name}' of step {s.ctx} did not build a stream or table.")
        result = builder(s, ctx=ctx, **inputs)
        cache[id(s)] = result
        if observer is not None and isinstance(result, Built):
            observer(s, ctx, result)
        return result

    return visit(step)


def _load_builders() -> None:
    """Import every module of the package once: importing a module registers its builders."""
    import importlib
    import pkgutil

    import engine.builders as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
