"""Trace exports: Markdown, W3C PROV, Workflow Run RO-Crate."""
