"""Py4J's class and package lookups, answered once per name.

PySpark reaches JVM classes by attribute (``sc._jvm.PythonSQLUtils``,
``jvm.org.apache.spark...``): every access is a round trip in which Py4J tries the name
under each package the view imports. A miss makes the JVM's class loader look through
every jar on the class path (about 250), so one lookup costs up to a few milliseconds of
JVM CPU, and a small query's build does dozens, a large share of the JVM's work on runs of
many small queries (the replay of ksqlDB's saved plans). A name resolves to the same class or package for
the life of the JVM as long as the view's imports stay as PySpark set them at start-up
(kspark adds none), so the first answer is kept on the view or package object, where
Python's attribute lookup finds it before ``__getattr__`` is asked again.

A class's static methods and inner classes are kept the same way: PySpark reaches every
function of ``org.apache.spark.sql.functions`` by attribute (``F.upper`` asks the JVM for the
member ``upper`` before calling it), one round trip more for every call of such a function.
A static method found once stays that method; a static *field* is a value
that may change, so it is asked for each time.
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView

_installed = False


def cache_jvm_lookups() -> None:
    """Keep the classes and packages found through ``JVMView`` and ``JavaPackage``, and the
    static methods and inner classes found through ``JavaClass`` (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    for cls in (JVMView, JavaPackage):
        cls.__getattr__ = _caching(cls.__getattr__, (JavaClass, JavaPackage))  # type: ignore[method-assign]
    JavaClass.__getattr__ = _caching(JavaClass.__getattr__, (JavaMember, JavaClass))  # type: ignore[method-assign]


def _caching(lookup: Any, kept: tuple[type, ...]) -> Any:
    def cached_lookup(self: Any, name: str) -> Any:
        found = lookup(self, name)
        if isinstance(found, kept):
            self.__dict__[name] = found
        return found

    cached_lookup.__doc__ = lookup.__doc__
    return cached_lookup
