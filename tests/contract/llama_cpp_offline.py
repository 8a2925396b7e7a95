"""A pytest plugin that runs llama.cpp's own server tests offline, against our build.

Loaded by `test_llama_cpp_suite.py` as `-p llama_cpp_offline` with `--noconftest`: their
conftest.py starts every server preset once per session to download its model from the
Hugging Face Hub, which cannot be reached here. This stands in for the two fixtures of theirs
the tests need (stopping servers after each test), and:

- points the `tinyopenjev` preset at a local openjev GGUF (`TINYOPENJEV_LOCAL_MODEL`, the stack's
  Gemma decision model) the way their own `tinylaya` preset reads `TINYLAYA_LOCAL_MODEL`, with
  `--swa-full`: Gemma 3 attends through a sliding window, whose cache cannot share a prompt
  between the questions of a request unless it is kept whole, and their test counts on sharing;
- gives their image helper a PNG made here instead of one fetched from the Hub.
"""

from __future__ import annotations

import base64
import os
import struct
import zlib

import pytest


def png(width: int = 8, height: int = 8) -> bytes:
    """A valid grey RGB PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * (3 * width) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def local_image(image_id: str) -> str:
    if image_id.startswith("IMG_BASE64_URI"):
        return "data:image/png;base64," + base64.b64encode(png()).decode()
    if image_id.startswith("IMG_BASE64"):
        return base64.b64encode(png()).decode()
    raise ValueError(f"{image_id}: only local images exist offline")


@pytest.fixture(autouse=True)
def stop_server_after_each_test():
    yield
    from utils import server_instances

    for instance in set(server_instances):
        instance.stop()


@pytest.fixture(autouse=True)
def offline(request, monkeypatch):
    if hasattr(request.module, "get_img_url"):
        monkeypatch.setattr(request.module, "get_img_url", local_image)
    model = os.environ.get("TINYOPENJEV_LOCAL_MODEL")
    if model:
        import utils

        preset = utils.ServerPreset.tinyopenjev

        def tinyopenjev():
            server = preset()
            server.model_hf_repo, server.model_file, server.swa_full = None, model, True
            return server

        monkeypatch.setattr(utils.ServerPreset, "tinyopenjev", staticmethod(tinyopenjev))
