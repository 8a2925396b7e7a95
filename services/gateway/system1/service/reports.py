"""The `system1_health` and `system1_capabilities` payloads of one core."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..core.gateway import Gateway
from ..core.health import overall_status
from ..core.schema import SCHEMA_VERSION, SCHEMA_VERSIONS, json_schemas
from ..providers import REGISTRY
from .tools import TOOLS


async def health_report(gateway: Gateway, max_age_s: float = 0.0) -> dict[str, Any]:
    """Status, versions, config and calibration errors, and a probe of each engine no older
    than `max_age_s`."""
    providers = await gateway.monitor.check(max_age_s)
    return {
        "status": overall_status(gateway.paused, gateway.errors, providers),
        "gateway_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "config_file": str(gateway.config.path) if gateway.config.path else None,
        "config_errors": list(gateway.errors),
        "calibration_errors": list(gateway.calibrator.errors),
        "heads_errors": list(gateway.heads.errors),
        "embedder_error": gateway.learned.error,
        "calibrated_for": {model: {**c, "questions": len(c["questions"])}
                           for model, c in gateway.calibrator.coverage(gateway.config.settings.gateway.provider).items()},
        "providers": providers,
    }


def capabilities_report(gateway: Gateway) -> dict[str, Any]:
    settings = gateway.config.settings.gateway
    schemas = json_schemas()
    return {
        "gateway_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "schema_versions": list(SCHEMA_VERSIONS),
        "tools": list(TOOLS),
        "provider": settings.provider,
        "fallback": list(settings.fallback),
        "timeout_s": settings.timeout_s,
        "min_confidence": settings.min_confidence,
        "providers": {name: p.capabilities().as_dict() for name, p in gateway.providers.items()},
        "available_providers": list(REGISTRY),
        "calibration": gateway.calibrator.summary(),
        "uncalibrated": settings.uncalibrated,
        "calibrated_for": gateway.calibrator.coverage(settings.provider),
        "learning": {"embedder": gateway.embedder.name if gateway.embedder else None,
                     "heads": gateway.heads.summary()},
        "config_errors": list(gateway.errors),
        "request_schema": schemas["request.json"],
        "response_schema": schemas["response.json"],
    }
