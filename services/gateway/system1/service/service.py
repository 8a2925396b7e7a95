"""The long-running gateway service: one core shared by every user and front door.

It owns the current `Gateway` (config, providers, lanes, calibration), the metrics, the API
keys, the request log and the background health probes. `reload()` (SIGHUP, `system1 reload`)
builds a new core from the config and fits on disk and swaps it in; requests already running
finish on the old one, which is closed when the last of them is done. A broken new config keeps
the old core and is reported by health.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from ..client.token import write_bridge_token
from ..core.config import LoadedConfig, load_config
from ..core.gateway import Gateway
from ..core.lanes import BATCH, INTERACTIVE
from ..core.result import Decision
from ..router.plan import Plan, Reply
from ..router.router import Router
from .auth import KeyRing
from .hook_feature import HookFeature
from .metrics import Metrics
from .reports import capabilities_report, health_report
from .requestlog import RequestLog

logger = logging.getLogger(__name__)


class _Core:
    """A gateway plus a count of the requests using it, so a retired one closes when idle."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.users = 0
        self.retired = False

    async def close_when_idle(self) -> None:
        self.retired = True
        if self.users == 0:
            await self.gateway.aclose()


class Service:
    """Built from a loaded config (by default from this process's environment); a reload reads
    the config again from the same environment."""

    def __init__(self, config: LoadedConfig | None = None) -> None:
        config = config or load_config()
        self.env: Mapping[str, str] = config.env
        self.metrics = Metrics(config.settings.service.clients)
        self._core = _Core(Gateway(config, observer=self.metrics))
        self.reload_errors: list[str] = []
        self.key_errors: list[str] = []
        self.bridge_token: str | None = None
        self.keys = KeyRing({})
        self.request_log: RequestLog | None = None
        self.hook = HookFeature(config.routing_log, self._use)
        self.router = Router(config.settings.router, config.install_dir, self.metrics, self._use,
                             learned_dir=config.learned_dir)
        self._health_task: asyncio.Task | None = None
        self._configure_edges(config)

    # -- state -------------------------------------------------------------------------------
    @property
    def gateway(self) -> Gateway:
        return self._core.gateway

    @property
    def config(self) -> LoadedConfig:
        return self.gateway.config

    @property
    def ready(self) -> bool:
        return not self.gateway.errors

    def _load_keys(self, config: LoadedConfig) -> None:
        self.keys, self.key_errors = KeyRing.load(config.settings.service.api_keys_file, self.env, self.bridge_token)
        if self.key_errors:
            logger.error("API keys are misconfigured, so every route but /healthz is closed: %s",
                         "; ".join(self.key_errors))

    def _configure_edges(self, config: LoadedConfig) -> None:
        service = config.settings.service
        self.metrics.clients = frozenset(service.clients)
        self.router.learned_dir = config.learned_dir
        self.router.configure(config.settings.router)
        self._load_keys(config)
        self.hook.configure(config.routing_log)
        if self.request_log is not None:
            self.request_log.close()
            self.request_log = None
        if service.request_log:
            self.request_log = RequestLog(
                Path(service.request_log).expanduser(),
                service.request_log_questions,
                service.request_log_max_bytes,
                service.request_log_backups,
            )

    def priority_of(self, client: str, requested: str | None) -> int:
        if requested == "batch" or client in self.config.settings.service.batch_clients:
            return BATCH
        return INTERACTIVE

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        if self._core.retired:  # started again after a stop: the stopped core's engines are closed
            self._core = _Core(Gateway(self.config, observer=self.metrics))
            self._configure_edges(self.config)  # reopens the request log
        self.bridge_token = write_bridge_token(self.config.install_dir)
        self._load_keys(self.config)  # now with the bridge token
        self._health_task = asyncio.create_task(self._probe_forever())
        self.router.start()

    async def stop(self) -> None:
        if self._health_task is not None:
            self._health_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health_task
        await self._core.close_when_idle()
        await self.router.aclose()
        if self.request_log is not None:
            self.request_log.close()
            self.request_log = None

    async def _probe_forever(self) -> None:
        """Keep the health cache warm so health requests never stampede an engine."""
        while True:
            try:
                await self.gateway.monitor.check()
            except Exception:  # the loop must outlive any one probe
                logger.exception("background health probe failed")
            await asyncio.sleep(self.config.settings.service.health_interval_s)

    async def reload(self) -> dict[str, Any]:
        config = load_config(self.env)
        if config.errors:
            self.reload_errors = list(config.errors)
            logger.warning("reload refused, keeping the running config: %s", "; ".join(config.errors))
            return {"reloaded": False, "errors": self.reload_errors}
        old = self._core
        self._core = _Core(Gateway(config, observer=self.metrics))
        self.reload_errors = []
        self._configure_edges(config)
        await old.close_when_idle()
        logger.info("config, calibration fits and learned heads reloaded from %s", config.path or "defaults")
        return {"reloaded": True, "errors": [], "skipped": self.skipped_files()}

    def skipped_files(self) -> list[str]:
        """The learned files that could not be used (fits, heads, the router's skills), each
        naming the file and why; the service runs without them."""
        gateway, router = self.gateway, self.router
        return [*gateway.calibrator.errors, *gateway.heads.errors, *filter(None, [router.skills_error])]

    @contextlib.asynccontextmanager
    async def _use(self) -> AsyncIterator[Gateway]:
        core = self._core
        core.users += 1
        try:
            yield core.gateway
        finally:
            core.users -= 1
            if core.retired and core.users == 0:
                await core.gateway.aclose()

    # -- the three tools ---------------------------------------------------------------------
    async def decide(
        self, payload: Any, client: str, priority: int = INTERACTIVE, calibrate: bool = True, only: str | None = None
    ) -> Decision:
        async with self._use() as gateway:
            decision = await gateway.decide(payload, client=client, priority=priority, calibrate=calibrate, only=only)
        if self.request_log is not None:
            self.request_log.record(decision, client, payload)
        return decision

    async def plan_route(self, api: str, body: Any, client: str, remember: bool = True) -> Plan:
        """The router's plan for a chat request (`remember` False for a dry run: the
        conversation's model is not set)."""
        return await self.router.plan(api, body, client, remember)

    async def answer_route(self, plan: Plan, body: dict[str, Any], headers: Mapping[str, str], client: str) -> Reply:
        """The plan's answer, checked where `[router.check]` applies."""
        return await self.router.answer(plan, body, headers, client)

    async def feedback(self, payload: Any, client: str) -> dict[str, Any]:
        """Label a remembered decision (the client is recorded as the label's source)."""
        async with self._use() as gateway:
            return gateway.feedback.label(payload, client)

    async def labelled(self, labelled: bool = True) -> list[dict[str, Any]]:
        async with self._use() as gateway:
            return gateway.feedback.labelled(labelled)

    async def embed(self, payload: Any, client: str) -> dict[str, Any]:
        """The embedder's vector of a request's judged text (for `system1 learn`, as `client`'s
        batch work)."""
        async with self._use() as gateway:
            return await gateway.learned.embed(payload, client)

    async def health(self) -> dict[str, Any]:
        async with self._use() as gateway:
            report = await health_report(gateway, max_age_s=2 * self.config.settings.service.health_interval_s)
        report["reload_errors"] = list(self.reload_errors)
        report["router_skills_errors"] = [self.router.skills_error] if self.router.skills_error else []
        report["router_spend_errors"] = [self.router.spend.error] if self.router.spend.error else []
        report["auth_errors"] = list(self.key_errors)
        report["routing"] = await self.hook.health(self.config.settings.routing)
        return report

    async def capabilities(self) -> dict[str, Any]:
        return capabilities_report(self.gateway)
