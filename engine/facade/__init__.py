"""The engine's facade: ``KsqlEngine`` ties parser, planner, builders and runtime together.

``engine.facade.engine`` holds ``KsqlEngine``; ``engine.facade.api`` the values it hands back
(``SourceInfo``, ``StatementResult``); ``engine.facade.explain`` what ``kspark explain`` prints.
"""
