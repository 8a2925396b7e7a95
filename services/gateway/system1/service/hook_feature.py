"""The Claude Code prompt hook's side of the service: its answers to hook events, the four
features of a prompt, and the routing log (teacher labels and spawn outcomes written into it)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from ..core.config import RoutingSettings
from ..core.gateway import Gateway
from ..core.schema import RequestError
from ..hook.answer import HookReply, RouteEvent, RoutingHook, feature_views, parse_features
from ..hook.log import RoutingLog, labels_of, verdicts_of, write_labels, write_outcomes


class HookFeature:
    def __init__(self, log_path: Path, borrow: Callable[[], AbstractAsyncContextManager[Gateway]]) -> None:
        self.log = RoutingLog(log_path)
        self.borrow = borrow

    def configure(self, log_path: Path) -> None:
        if self.log.path != log_path:
            self.log = RoutingLog(log_path)

    async def health(self, routing: RoutingSettings) -> dict[str, Any]:
        """The hook's part of the health report."""
        return {"enabled": routing.enabled, "hint": routing.hint,
                "prompts_waiting_for_labels": await self.log.waiting_for_labels()}

    async def entries(self) -> dict[str, Any]:
        """The routing log's entries worth evaluating, for `system1 evaluate` wherever it runs."""
        entries, unreadable = await self.log.evaluable()
        return {"entries": entries, "unreadable_lines": unreadable}

    async def waiting_prompts(self, limit: int) -> list[dict[str, Any]]:
        """The newest logged prompts waiting for teacher labels (what `/system1:calibrate` labels)."""
        return await self.log.waiting(limit)

    async def label_prompts(self, payload: Any) -> dict[str, int]:
        """Write teacher labels into logged prompts, by id; `RequestError` naming the field."""
        try:
            labels = labels_of(payload)
        except ValueError as exc:
            raise RequestError(str(exc)) from None
        return {"labelled": await self.log.rewrite(lambda path: write_labels(path, labels))}

    async def apply_outcomes(self, payload: Any) -> dict[str, int]:
        """Write spawn outcomes (from `system1 outcomes --apply`) into this service's routing log;
        `RequestError` naming the field for a bad body."""
        try:
            verdicts = verdicts_of(payload)
        except ValueError as exc:
            raise RequestError(str(exc)) from None
        return {"applied": await self.log.rewrite(lambda path: write_outcomes(path, verdicts))}

    async def route(self, event: RouteEvent, client: str) -> HookReply:
        """The routing hook's answer for one Claude Code hook event."""
        async with self.borrow() as gateway:
            return await RoutingHook(gateway, self.log).route(event, client)

    async def features(self, payload: Any, client: str, priority: int) -> dict[str, Any]:
        """The four routing features of a prompt, each with its probabilities, from the chain or
        the named provider (`system1 evaluate --provider`); nothing is logged. `RequestError`
        for a bad body or a provider this gateway cannot ask."""
        prompt, provider = parse_features(payload)
        async with self.borrow() as gateway:
            if provider is not None:
                gateway.check_askable(provider)
            decisions = await RoutingHook(gateway, self.log).feature_decisions(
                prompt, client, None, priority, only=provider)
        views = feature_views(decisions)
        failed = None if views is not None else next(d for d in decisions if d.status == "error")
        return {"features": views, "error": failed and failed.envelope_json()["error"]}
