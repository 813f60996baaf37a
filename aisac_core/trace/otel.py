"""OpenTelemetry span export of tool calls (off unless configured).

Span names and attributes follow the OpenTelemetry semantic conventions for GenAI (``execute_tool``) and MCP
(``mcp.method.name``); the SDK is imported only when export is on. The configuration lives on an :class:`Otel`
object (one per trace service), not in the module.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

log = logging.getLogger("aisac.provenance")


def otel_attributes(server: str, tool: str, run_id: str) -> dict[str, str]:
    """OpenTelemetry span attributes of a tool call (GenAI + MCP semantic conventions)."""
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "mcp.method.name": "tools/call",
        "aisac.server": server,
        "aisac.run_id": run_id,
    }


def _otlp_exporter() -> Any:
    """An OTLP span exporter: HTTP/protobuf when installed, else gRPC (raises ImportError when neither is)."""
    # by name: either optional package may be the one installed (or neither, for a type check)
    try:
        flavour = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    except ImportError:  # optional package: the gRPC flavour may be the one installed
        flavour = importlib.import_module("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
    return flavour.OTLPSpanExporter()


class Otel:
    """Span export of one trace service (:class:`aisac_core.trace.service.TraceService` holds one): off until
    :meth:`configure` turns it on, or the environment does (checked on first use)."""

    def __init__(self) -> None:
        self._checked = False
        self.tracer: Any = None
        self.provider: Any = None

    def configure(self, provider: Any | None = None) -> Any | None:
        """Set up span export. With ``provider`` (an ``opentelemetry.sdk.trace.TracerProvider``, e.g. with an
        ``InMemorySpanExporter`` in tests) spans go there; ``configure(None)`` re-reads the environment.

        From the environment (the standard variables of the OpenTelemetry SDK): export is on when
        ``OTEL_TRACES_EXPORTER`` is set to something other than ``none`` (``console`` writes to stderr, never
        stdout; ``otlp`` needs the ``opentelemetry-exporter-otlp`` package), or when ``OTEL_EXPORTER_OTLP_ENDPOINT``
        / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set; off when ``OTEL_SDK_DISABLED=true``. The service name is
        ``OTEL_SERVICE_NAME`` (default ``aisac``). Returns the tracer, or None when export is off."""
        self._checked, self.tracer, self.provider = True, None, None
        if provider is not None:
            self.tracer, self.provider = provider.get_tracer("aisac"), provider
            return self.tracer
        env = os.environ
        if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
            return None
        exporter_name = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
        if not exporter_name and (
            env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        ):
            exporter_name = "otlp"
        if not exporter_name or exporter_name == "none":
            return None
        if exporter_name not in ("console", "otlp"):
            log.warning(
                "OTEL_TRACES_EXPORTER=%s is not supported by aisac (use console or otlp): spans off", exporter_name
            )
            return None
        try:  # the SDK is imported only when export is on (start-up time)
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

            exporter: Any = ConsoleSpanExporter(out=sys.stderr) if exporter_name == "console" else _otlp_exporter()
            prov = TracerProvider(resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", "aisac")}))
            prov.add_span_processor(BatchSpanProcessor(exporter))
            self.tracer, self.provider = prov.get_tracer("aisac"), prov
        except ImportError as exc:  # the OTLP exporter is an optional package
            log.warning(
                "OpenTelemetry span export requested but unavailable (%s): pip install opentelemetry-exporter-otlp", exc
            )
        return self.tracer

    def enabled(self) -> bool:
        """True when span export is configured (checks the environment on first use)."""
        if not self._checked:
            self.configure(None)
        return self.tracer is not None

    def emit_span(
        self,
        *,
        server: str,
        tool: str,
        run_id: str,
        start_ns: int,
        end_ns: int,
        status: str,
        error: str | None = None,
        event_id: int | None = None,
        parent_id: int | None = None,
    ) -> None:
        """Export one span for a finished tool call (no-op when span export is off). ``start_ns`` / ``end_ns``:
        epoch nanoseconds. Name ``execute_tool {tool}``, kind SERVER, attributes :func:`otel_attributes` +
        ``aisac.event_id``, ``aisac.status``, ``aisac.parent_id``, and on failure ``error.type`` (the aisac status)
        with span status ERROR (OpenTelemetry GenAI and MCP semantic conventions)."""
        if not self.enabled():
            return
        from opentelemetry.trace import SpanKind, Status, StatusCode  # only when export is on (start-up time)

        attrs: dict[str, Any] = {**otel_attributes(server, tool, run_id), "aisac.status": status}
        if event_id is not None:
            attrs["aisac.event_id"] = event_id
        if parent_id is not None:
            attrs["aisac.parent_id"] = parent_id
        if status != "ok":
            attrs["error.type"] = status
        span = self.tracer.start_span(
            f"execute_tool {tool}", kind=SpanKind.SERVER, attributes=attrs, start_time=start_ns
        )
        if status != "ok":
            span.set_status(Status(StatusCode.ERROR, (error or status)[:500]))
        span.end(end_time=end_ns)
