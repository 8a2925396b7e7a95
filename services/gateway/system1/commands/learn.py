"""`learn`: fit a head per decision kind on labelled rows asked live, report, save only when asked."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import EXIT_DECISION, EXIT_HEALTH, EXIT_OK, EXIT_START, talk_to_service, write_learned
from .calibrate import labelled_rows, routing_log_rows, sources

if TYPE_CHECKING:
    from ..client.service_client import ServiceClient


def run(args: argparse.Namespace) -> int:
    from ..core.config import load_config
    from ..core.heads import LOCAL_HEADS_NAME, SHIPPED_HEADS, kind_of
    from ..offline import calibrate as labelled
    from ..offline import distil
    from ..offline import learn as tool
    from ..client.service_client import ServiceClient

    try:
        import sklearn  # noqa: F401
    except ImportError:
        print("system1 learn: needs scikit-learn and NumPy: pip install 'system1-gateway[learn]'", file=sys.stderr)
        return EXIT_START
    if not args.data and not args.from_store and not args.from_routing_log and not args.router_topics:
        print("system1 learn: give labelled JSONL files, --from-store, --from-routing-log, --router-topics, or more "
              "than one", file=sys.stderr)
        return EXIT_START
    if bool(args.teacher) != bool(args.pool or args.pool_from_store):
        print("system1 learn: --teacher and --pool (or --pool-from-store) go together: the teacher labels the "
              "pool's rows", file=sys.stderr)
        return EXIT_START
    rows, pool = labelled_rows(args, "learn"), pool_rows(args)
    if rows is None or pool is None:
        return EXIT_START
    progress = sys.stderr.isatty() and not args.json

    async def work(service: ServiceClient) -> int:
        if not await gather(service, args, rows, pool):
            return EXIT_START
        if args.kind:
            rows[:] = [r for r in rows if kind_of(r.question, r.choices, r.kind, r.options is None) in args.kind]
        if not rows:
            print("system1 learn: no labelled rows" + (f" of kind {', '.join(args.kind)}" if args.kind else ""),
                  file=sys.stderr)
            return EXIT_DECISION
        threshold = args.threshold if args.threshold is not None else (await service.capabilities())["min_confidence"]
        examples, problems = await tool.ask_all(service, rows, progress)
        if not examples:
            print(f"system1 learn: no usable rows; {'; '.join(problems[:3])}", file=sys.stderr)
            return EXIT_DECISION
        taught = None
        if args.teacher:
            taught = await distil.teach(service, args.teacher, pool, rows, threshold, progress)
            if taught.problems and not taught.rows:
                print(f"system1 learn: the teacher {args.teacher} labelled nothing; {'; '.join(taught.problems[:3])}",
                      file=sys.stderr)
                return EXIT_DECISION
            extra, more_problems = await tool.ask_all(service, taught.rows, progress, teacher=True)
            examples += extra
            problems += [f"teacher {p}" for p in more_problems + taught.problems]
        results = tool.learn_all(examples, args.folds, threshold, progress, args.repeats)
        # One report per embedding model (`[learning] models` may tie kinds to another one).
        reports = [(first, part, tool.render(part, first, learn_sources(args), problems, threshold, args.folds,
                                             args.repeats, taught))
                   for first, part in tool.by_model(examples, results)]
        print(json.dumps([r.as_dict() for r in results], indent=2) if args.json
              else "\n".join(text for _, _, text in reports))
        heads = [r.fitted for r in results if r.fitted is not None]
        if args.ship:
            assert labelled.REPORTS is not None  # `labelled_rows` refused --ship without a clone
            tool.merge(SHIPPED_HEADS, heads)
            print(f"shipped heads written to {SHIPPED_HEADS}", file=sys.stderr)
            for first, part, text in reports:
                path = labelled.REPORTS / f"heads-{first.embedder}-{first.model}.md"
                merged = (tool.keep_other_kinds(text, path.read_text(encoding="utf-8"), [r.kind for r in part])
                          if args.kind and path.exists() else text)
                write_report(path, merged, part, draw=merged == text)
        elif args.report:
            write_report(Path(args.report), "\n".join(text for _, _, text in reports), results)
        if not args.write:
            return EXIT_OK
        local = load_config().learned_dir / LOCAL_HEADS_NAME
        if not write_learned("learn", local, lambda path: tool.merge(path, heads)):
            return EXIT_START
        print(f"heads written to {local}; reloading the service", file=sys.stderr)
        reloaded = await service.reload()
        return EXIT_OK if reloaded.get("reloaded") else EXIT_HEALTH

    return talk_to_service(args, work)


async def gather(service: ServiceClient, args: argparse.Namespace, rows: list, pool: list) -> bool:
    """Add the rows (and pool rows) the service holds, and the router's topics, as the flags
    ask; False after saying why not."""
    from ..offline import calibrate as labelled

    try:
        if args.from_store:
            rows.extend(labelled.parse_rows(await service.labelled(), "the label store"))
        if args.pool_from_store:
            pool.extend(labelled.parse_rows(await service.labelled(unlabelled=True), "the label store", labelled=False))
    except labelled.DataError as exc:
        print(f"system1 learn: {exc}", file=sys.stderr)
        return False
    rows.extend(await routing_log_rows(service, args))
    if args.router_topics:
        topical = with_router_topics(rows)
        if topical is None:
            return False
        rows[:] = topical
    return True


def with_router_topics(rows: list) -> list | None:
    """`--router-topics`: the rows with the examples of `[router.topics]`, every topic-question
    row asked over the configured topics; None after saying why not."""
    from ..core.config import load_config
    from ..offline import calibrate as labelled
    from ..router.topics import example_rows, retopic

    config = load_config()
    if config.errors:
        print("system1 learn: the config has errors:", *config.errors, sep="\n  ", file=sys.stderr)
        return None
    settings = config.settings.router
    kept, dropped = retopic(settings, rows + labelled.parse_rows(example_rows(settings), "[router.topics]"))
    if dropped:
        print(f"system1 learn: {dropped} topic-question rows name a topic [router.topics] no longer has; left out",
              file=sys.stderr)
    return kept


def pool_rows(args: argparse.Namespace) -> list | None:
    """The unlabelled rows of the `--pool` files, or None after saying why not."""
    from ..offline import calibrate as labelled

    try:
        return [row for path in args.pool for row in labelled.load(Path(path), labelled=False)]
    except labelled.DataError as exc:
        print(f"system1 learn: {exc}", file=sys.stderr)
        return None


def learn_sources(args: argparse.Namespace) -> list[str]:
    """Where the rows came from, the teacher's pools included, for the report."""
    found = sources(args, *(["the label store"] if args.from_store else []),
                    *(["the examples of [router.topics]"] if args.router_topics else []), *(args.pool if args.teacher else []),
                    *(["the label store's unlabelled decisions"] if args.pool_from_store else []))
    return found + [f"rows of kind {', '.join(args.kind)} only"] if args.kind else found


def write_report(path: Path, text: str, results: list, draw: bool = True) -> None:
    """The report, with its learning curves drawn beside it where matplotlib is installed
    (`draw=False`: the plot beside it stays, its kinds' curves not all redone)."""
    from ..offline import learn as tool

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if not draw:
        print(f"report written to {path} (its plot stays the earlier fit's)", file=sys.stderr)
        return
    drawn = tool.curve_plot(results, path.with_suffix(".png"))
    print(f"report written to {path}" + ("" if drawn else " (install matplotlib for the curve)"), file=sys.stderr)


def feedback(args: argparse.Namespace) -> int:
    """`system1 feedback REQUEST_ID LABEL`: label a decision the gateway remembered."""
    from ..client.service_client import ServiceClient

    async def work(service: ServiceClient) -> int:
        answer = await service.feedback(args.request_id, args.label)
        print(f"labelled {answer['request_id']}: {answer['label']}")
        return EXIT_OK

    return talk_to_service(args, work)
