"""Workflow-graph augmentation of the materials template.

``augment(graph)`` receives the roles' workflow graph (``aisac_core.roles.graph.default_graph()``, a dict of
``nodes`` and ``edges``) and returns it changed. Here it adds a tool node ``formula_check`` after the planner: on
every ``aisac ask`` / ``roles_run``, the coordinator first calls ``project_formulas_in_text`` on the question, so the
molar masses of the formulas it names are evidence for the answer (see docs/roles.md for the graph format).
"""

from __future__ import annotations


def augment(graph: dict) -> dict:
    """Add the ``formula_check`` tool node (runs before the plan's steps, its result counts as evidence)."""
    graph["nodes"]["formula_check"] = {
        "kind": "tool",
        "tool": "project_formulas_in_text",
        "arguments": {"text": "{task}"},
        "description": "molar masses of the chemical formulas named in the question",
    }
    graph["edges"].append({"from": "planner", "to": "formula_check"})
    return graph
