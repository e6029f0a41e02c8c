"""Stateful processors whose work is unpickled only where rows are processed.

Spark plans a ``transformWithState`` operator by starting a Python process that unpickles
the operator's processor and runs its ``init``, to learn its state variables; it does so
for every stateful operator at every start of a streaming query. The engine's processors
(``engine.runtime.kafka``) import the engine, pandas and pyarrow when they are unpickled:
about 0.8 s of that process's time, per operator and start.

A processor (``DeclaredStateProcessor``) declares its state variables (``StateVariable``:
name, kind, schemas) and takes their handles in ``attach``, as attributes of the variables'
names. ``LazyProcessor`` carries such a processor pickled, with its
declared variables: its ``init`` registers them (this module imports only PySpark's
stateful-processor API), and its first ``handleInputRows``, in an executor's Python worker
(whose daemon has the engine imported already), unpickles the processor and attaches the
handles. The variables, their order and their schemas are the processor's own, so a
checkpoint's state reads the same either way.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import StructType

VALUE, MAP = "value", "map"


@dataclass(frozen=True)
class StateVariable:
    """One state variable of a processor: a ValueState of ``value``, or a MapState from
    ``key`` to ``value``."""

    name: str
    kind: str  # VALUE or MAP
    value: StructType
    key: StructType | None = None

    def register(self, handle: StatefulProcessorHandle) -> Any:
        if self.kind == MAP:
            assert self.key is not None
            return handle.getMapState(self.name, self.key, self.value)
        return handle.getValueState(self.name, self.value)

    def describe(self) -> str:
        """``groups MapState<g binary, b binary>``, ``clock ValueState<b binary>``."""
        if self.kind == MAP:
            assert self.key is not None
            return f"{self.name} MapState<{_fields(self.key)}, {_fields(self.value)}>"
        return f"{self.name} ValueState<{_fields(self.value)}>"


def _fields(schema: StructType) -> str:
    return ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields)


def register(handle: StatefulProcessorHandle, variables: Sequence[StateVariable]) -> dict[str, Any]:
    """Register ``variables`` in order; their handles by name."""
    return {v.name: v.register(handle) for v in variables}


class DeclaredStateProcessor(StatefulProcessor):
    """A processor whose state variables are ``STATE_VARIABLES``: ``init`` registers them in
    order and ``attach`` sets each handle as the attribute of the variable's name. ``STATE``,
    their description (a line of the streaming plans planned cases keep), is derived."""

    STATE_VARIABLES: ClassVar[tuple[StateVariable, ...]] = ()
    STATE: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.STATE = ", ".join(v.describe() for v in cls.STATE_VARIABLES)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.attach(register(handle, self.STATE_VARIABLES))

    def attach(self, handles: Mapping[str, Any]) -> None:
        for name, state in handles.items():
            setattr(self, name, state)


class LazyProcessor(StatefulProcessor):
    """A ``DeclaredStateProcessor``, unpickled on first use."""

    def __init__(self, processor: DeclaredStateProcessor) -> None:
        # PySpark's own pickler, as Spark pickles a processor.
        from pyspark import cloudpickle

        self.variables: tuple[StateVariable, ...] = tuple(processor.STATE_VARIABLES)
        self.pickled = cloudpickle.dumps(processor)
        self._handles: Mapping[str, Any] = {}
        self._processor: Any = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handles = register(handle, self.variables)
        self._processor = None

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        if self._processor is None:
            processor = pickle.loads(self.pickled)
            processor.attach(self._handles)
            self._processor = processor
        return self._processor.handleInputRows(key, rows, timerValues)  # type: ignore[no-any-return]

    def close(self) -> None:
        if self._processor is not None:
            self._processor.close()
