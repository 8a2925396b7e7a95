"""Serve one decision engine over the `/v1/systemone` contract.

    python engines/systemone/serve.py                    # minilm on 127.0.0.1:8790
    python engines/systemone/serve.py --engine gte --model /models/gte-reranker-modernbert-base

Binds 127.0.0.1 unless told otherwise (the container binds its internal address and names the
Host it answers to with --allowed-host). Set SYSTEM1_SYSTEMONE_API_KEY to require a bearer
token. A pass uses as many BLAS threads as the process has CPUs (affinity and cgroup quota),
or SYSTEMONE_THREADS; one request may make the engine read at most --max-work characters. See systemone_engine/app.py for the contract and systemone_engine/backends.py for the
engines.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Before NumPy is imported: its BLAS reads the thread count once, at load.
from systemone_engine.threads import configure_threads  # noqa: E402

THREADS = configure_threads(os.environ.get("SYSTEMONE_THREADS"))

from systemone_engine.app import DEFAULT_MAX_WORK  # noqa: E402
from systemone_engine.backends import EMBEDDERS, ENGINES, load, load_embedder  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=ENGINES, default=os.environ.get("SYSTEMONE_ENGINE", "minilm"))
    parser.add_argument("--model", default=os.environ.get("SYSTEMONE_MODEL") or None,
                        help="weights directory or cached Hugging Face id (default: the engine's own)")
    parser.add_argument("--host", default=os.environ.get("SYSTEMONE_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("SYSTEMONE_PORT", "8790")))
    parser.add_argument("--allowed-host", action="append", default=[],
                        help="a Host name to answer besides 127.0.0.1 and localhost (repeatable)")
    parser.add_argument("--max-work", type=int, default=int(os.environ.get("SYSTEMONE_MAX_WORK", DEFAULT_MAX_WORK)),
                        help="characters one request may make the engine read (default %(default)s)")
    parser.add_argument("--embedders", default=os.environ.get("SYSTEMONE_EMBEDDERS", ""),
                        help=f"embedding models to load besides the engine, comma-separated ({', '.join(EMBEDDERS)}): "
                             "`POST /v1/embed` with their model id answers from them")
    args = parser.parse_args()

    import uvicorn

    from systemone_engine.app import create_app

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    engine = load(args.engine, args.model)
    logging.getLogger("systemone").info("engine %s, model %s, device %s, %d threads per pass",
                                        engine.name, engine.model, engine.device, THREADS)
    embedders = [load_embedder(name.strip(), THREADS) for name in args.embedders.split(",") if name.strip()]
    for embedder in embedders:
        logging.getLogger("systemone").info("embedder %s, model %s", embedder.name, embedder.model)
    extra = args.allowed_host + [h for h in os.environ.get("SYSTEMONE_ALLOWED_HOSTS", "").split(",") if h]
    app = create_app(engine, args.port, extra, os.environ.get("SYSTEM1_SYSTEMONE_API_KEY", ""), args.max_work, embedders)
    uvicorn.run(app, host=args.host, port=args.port, log_config=None, access_log=False)


if __name__ == "__main__":
    main()
