"""OpenTelemetry span export of tool calls (off unless configured).

Span names and attributes follow the OpenTelemetry semantic conventions for GenAI (``execute_tool``) and MCP
(``mcp.method.name``); the SDK is imported only when export is on.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

log = logging.getLogger("aisac.provenance")

_otel: dict[str, Any] = {"checked": False, "tracer": None, "provider": None}


def otel_attributes(server: str, tool: str, run_id: str) -> dict[str, str]:
    """OpenTelemetry span attributes of a tool call (GenAI + MCP semantic conventions)."""
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "mcp.method.name": "tools/call",
            "aisac.server": server, "aisac.run_id": run_id}


def _otlp_exporter() -> Any:
    """An OTLP span exporter: HTTP/protobuf when installed, else gRPC (raises ImportError when neither is)."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter,
        )
    except ImportError:  # optional package: the gRPC flavour may be the one installed
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter,  # type: ignore
        )
    return OTLPSpanExporter()


def configure_otel(provider: Any | None = None) -> Any | None:
    """Set up span export. With ``provider`` (an ``opentelemetry.sdk.trace.TracerProvider``, e.g. with an
    ``InMemorySpanExporter`` in tests) spans go there; ``configure_otel(None)`` re-reads the environment.

    From the environment (the standard variables of the OpenTelemetry SDK): export is on when
    ``OTEL_TRACES_EXPORTER`` is set to something other than ``none`` (``console`` writes to stderr, never
    stdout; ``otlp`` needs the ``opentelemetry-exporter-otlp`` package), or when ``OTEL_EXPORTER_OTLP_ENDPOINT``
    / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set; off when ``OTEL_SDK_DISABLED=true``. The service name is
    ``OTEL_SERVICE_NAME`` (default ``aisac``). Returns the tracer, or None when export is off."""
    _otel.update(checked=True, tracer=None, provider=None)
    if provider is not None:
        _otel.update(tracer=provider.get_tracer("aisac"), provider=provider)
        return _otel["tracer"]
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return None
    exporter_name = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not exporter_name and (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        exporter_name = "otlp"
    if not exporter_name or exporter_name == "none":
        return None
    if exporter_name not in ("console", "otlp"):
        log.warning("OTEL_TRACES_EXPORTER=%s is not supported by aisac (use console or otlp): spans off", exporter_name)
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
        )

        exporter: Any = ConsoleSpanExporter(out=sys.stderr) if exporter_name == "console" else _otlp_exporter()
        prov = TracerProvider(resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", "aisac")}))
        prov.add_span_processor(BatchSpanProcessor(exporter))
        _otel.update(tracer=prov.get_tracer("aisac"), provider=prov)
    except ImportError as exc:  # the OTLP exporter is an optional package
        log.warning("OpenTelemetry span export requested but unavailable (%s): pip install "
                    "opentelemetry-exporter-otlp", exc)
    return _otel["tracer"]


def otel_enabled() -> bool:
    """True when span export is configured (checks the environment once)."""
    if not _otel["checked"]:
        configure_otel(None)
    return _otel["tracer"] is not None


def emit_span(*, server: str, tool: str, run_id: str, start_ns: int, end_ns: int, status: str,
              error: str | None = None, event_id: int | None = None, parent_id: int | None = None) -> None:
    """Export one span for a finished tool call (no-op when span export is off). ``start_ns`` / ``end_ns``: epoch
    nanoseconds. Name ``execute_tool {tool}``, kind SERVER, attributes :func:`otel_attributes` +
    ``aisac.event_id``, ``aisac.status``, ``aisac.parent_id``, and on failure ``error.type`` (the aisac status)
    with span status ERROR (OpenTelemetry GenAI and MCP semantic conventions)."""
    if not otel_enabled():
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    attrs: dict[str, Any] = {**otel_attributes(server, tool, run_id), "aisac.status": status}
    if event_id is not None:
        attrs["aisac.event_id"] = event_id
    if parent_id is not None:
        attrs["aisac.parent_id"] = parent_id
    if status != "ok":
        attrs["error.type"] = status
    span = _otel["tracer"].start_span(f"execute_tool {tool}", kind=SpanKind.SERVER, attributes=attrs,
                                      start_time=start_ns)
    if status != "ok":
        span.set_status(Status(StatusCode.ERROR, (error or status)[:500]))
    span.end(end_time=end_ns)
