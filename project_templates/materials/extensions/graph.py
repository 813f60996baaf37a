"""Workflow-graph augmentation of the materials template.

``augment(graph)`` receives the roles' workflow graph (``aisac_core.roles.graph.default_graph()``, a dict of
``nodes`` and ``edges``) and returns it changed. Here it adds a tool node ``formula_check`` after the planner: on
every ``aisac ask`` / ``roles_run``, the coordinator first calls ``project_formulas_in_text`` on the question, so the
molar masses of the formulas it names are evidence for the answer (see docs/roles.md for the graph format).

It also adds a ``comparison`` node ``value_comparison`` (:mod:`aisac_core.roles.compare`): for a question about
formation energies ("Which compositions showed the lowest formation energy, and how do the reported values compare
to computed predictions?") the tables of the indexed papers are read (``data_load`` of the PDFs), each composition is
looked up in a materials database through OPTIMADE (``lit_materials``), and the answer gets a comparison table whose
every number cites its table cell or its database record.
"""

from __future__ import annotations


def augment(graph: dict) -> dict:
    """Add the ``formula_check`` tool node (runs before the plan's steps, its result counts as evidence) and the
    ``value_comparison`` node (the comparison table of a formation-energy question)."""
    graph["nodes"]["formula_check"] = {
        "kind": "tool",
        "tool": "project_formulas_in_text",
        "arguments": {"text": "{task}"},
        "description": "molar masses of the chemical formulas named in the question",
    }
    graph["edges"].append({"from": "planner", "to": "formula_check"})
    graph["nodes"]["value_comparison"] = {
        "kind": "comparison",
        "property": "formation_energy_per_atom",
        "description": "reported formation energies (table cells) beside computed ones (OPTIMADE records)",
    }
    graph["edges"].append({"from": "planner", "to": "value_comparison"})
    return graph
