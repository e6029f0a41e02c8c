"""Stateful processors unpickled only where rows are processed (``LazyProcessor``)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pandas as pd

from engine.runtime.kafka import (
    KeyedTaskProcessor,
    RunningAggregateProcessor,
    RunningAggregateTaskProcessor,
    SuppressProcessor,
)
from engine.runtime.lazy_processor import LazyProcessor
from engine.runtime.tasks import KeyedTask


class Handle:
    """A StatefulProcessorHandle that records what is registered and hands out names."""

    def __init__(self) -> None:
        self.registered: list[tuple[Any, ...]] = []

    def getMapState(self, name: str, key: Any, value: Any) -> str:  # noqa: N802 - PySpark's name
        self.registered.append(("map", name, key.json(), value.json()))
        return f"handle of {name}"

    def getValueState(self, name: str, value: Any) -> str:  # noqa: N802 - PySpark's name
        self.registered.append(("value", name, value.json()))
        return f"handle of {name}"


class Echo:
    """A processor whose rows come out with the handle it was given."""

    STATE_VARIABLES = KeyedTaskProcessor.STATE_VARIABLES

    def attach(self, handles: Any) -> None:
        self.handles = dict(handles)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[str]:  # noqa: N802
        yield f"{key}: {self.handles['clock']}"

    def close(self) -> None:
        self.handles["closed"] = "yes"


def _processors() -> list[Any]:
    task = KeyedTask(handler=None, sides=1)  # type: ignore[arg-type]
    return [
        KeyedTaskProcessor(task, ("a",)),
        RunningAggregateProcessor((), ("k",), ("k",), _schema()),
        RunningAggregateTaskProcessor((), ("k",), ("k",), _schema(), previous=False),
        SuppressProcessor(0, ("a",)),
    ]


def _schema() -> Any:
    from pyspark.sql import types as ST

    return ST.StructType([ST.StructField("x", ST.LongType())])


def test_the_lazy_processor_registers_what_the_processor_itself_registers() -> None:
    for processor in _processors():
        own, lazy = Handle(), Handle()
        processor.init(own)
        LazyProcessor(processor).init(lazy)
        assert lazy.registered == own.registered and own.registered, type(processor).__name__


def test_rows_go_to_the_unpickled_processor_with_the_registered_handles() -> None:
    lazy = pickle.loads(pickle.dumps(LazyProcessor(Echo())))
    lazy.init(Handle())
    assert list(lazy.handleInputRows("k1", iter(()), None)) == ["k1: handle of clock"]
    assert list(lazy.handleInputRows("k2", iter(()), None)) == ["k2: handle of clock"]
    lazy.close()


def test_unpickling_a_lazy_processor_imports_neither_the_engine_runtime_nor_pandas() -> None:
    # What Spark's planning process does with an operator's processor, in a fresh interpreter.
    data = pickle.dumps(LazyProcessor(KeyedTaskProcessor(KeyedTask(handler=None, sides=1), ("a",))))  # type: ignore[arg-type]
    script = (
        "import pickle, sys\n"
        f"lazy = pickle.loads({data!r})\n"
        "print(sorted(m for m in ('pandas', 'pyarrow', 'engine.runtime.kafka', 'engine.runtime.tasks') if m in sys.modules))\n"
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]"


def test_the_state_text_streaming_plans_keep_is_derived_from_the_declared_variables() -> None:
    assert KeyedTaskProcessor.STATE == (
        "groups MapState<g binary, b binary>, clock ValueState<b binary>, outer ValueState<b binary>"
    )
    assert RunningAggregateProcessor.STATE == "running ValueState<b binary>"
    assert RunningAggregateTaskProcessor.STATE == "groups MapState<g binary, b binary>"
    assert SuppressProcessor.STATE == "buffer ValueState<b binary>"


def test_attach_sets_each_handle_as_the_attribute_of_its_variable() -> None:
    processor = SuppressProcessor(0, ("a",))
    processor.init(Handle())
    assert processor.buffer == "handle of buffer"
