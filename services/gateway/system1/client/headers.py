"""Every HTTP header the service and its clients exchange, in one place."""

from __future__ import annotations

#: The caller's name, trusted from the bridge token (or when no keys are configured).
CLIENT = "X-System1-Client"
#: `batch` queues the request behind interactive work.
PRIORITY = "X-System1-Priority"
#: `off` returns the engine's own probabilities, for fitting (`system1 calibrate`).
CALIBRATION = "X-System1-Calibration"
#: A configured provider that answers alone, on its own answer (no fallback, no cascade, no
#: learned head): `system1 learn --teacher`.
PROVIDER = "X-System1-Provider"
#: The model that answered, on `/v1/decide` replies (calibration fits are keyed by it).
MODEL = "X-System1-Model"
