"""Tier 3 memory: semantic search over past interactions, blocked threats and scope examples (Chroma).

Vectors come from the local all-MiniLM-L6-v2 encoder (onnxruntime, or numpy) (:mod:`meshward.embedding`), plugged into
Chroma as a registered embedding function, so Chroma never loads (or downloads) its default ONNX model.
Every collection uses cosine space; a hit's ``similarity`` is ``1 - cosine distance`` (the cosine of
the two unit vectors, in [-1, 1]).

Chroma's client is synchronous; every public method here is ``async`` and runs the Chroma call (and
the encoding, which Chroma triggers) in a worker thread. Writes are upserts, so replaying an event
(same id) stores it once. Inputs are bounded: texts are cut at :data:`MAX_TEXT_CHARS` characters
(the encoder reads at most 256 word pieces anyway), ``k`` is clamped to [1, :data:`MAX_K`].
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import chromadb
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.config import Settings
from chromadb.utils.embedding_functions import register_embedding_function
from meshward.embedding import EMBEDDING_DIM, MODEL_NAME, MiniLMEncoder, get_encoder, in_trained_script

__all__ = [
    "COLLECTIONS",
    "DEFAULT_PATH",
    "DEFAULT_THREAT_SIMILARITY",
    "ENV_CHROMA_PATH",
    "ENV_CHROMA_URL",
    "INTERACTIONS",
    "MAX_K",
    "MAX_TEXT_CHARS",
    "SCOPE_EXAMPLES",
    "SECURITY_THREATS",
    "THREAT_SUSPECT_SIMILARITY",
    "Hit",
    "MiniLMEmbeddingFunction",
    "SemanticMemory",
    "parse_chroma_url",
]

log = logging.getLogger(__name__)

INTERACTIONS = "interactions"
SECURITY_THREATS = "security_threats"
SCOPE_EXAMPLES = "scope_examples"
COLLECTIONS: tuple[str, ...] = (INTERACTIONS, SECURITY_THREATS, SCOPE_EXAMPLES)

ENV_CHROMA_URL = "MESHWARD_CHROMA_URL"
ENV_CHROMA_PATH = "MESHWARD_CHROMA_PATH"
DEFAULT_PATH = "var/chroma"

MAX_TEXT_CHARS = 4000
EMBEDDING_CACHE_SIZE = 4096  # vectors of recent texts (1.5 KB each)
MAX_METADATA_CHARS = 4000
MAX_METADATA_KEYS = 32
MAX_ID_CHARS = 256
MAX_K = 50
HTTP_TIMEOUT_S = 30.0  # per request to a Chroma server (chromadb's own default is no timeout)
# Chosen from measurements with the real encoder (tests/integration/test_semantic_memory.py, 5 stored
# attacks): close rewordings of a stored attack score 0.87-0.98, looser paraphrases 0.73-0.78, paraphrases
# sharing little wording 0.42-0.53; general benign questions score at most 0.50, but in-domain benign
# questions that share an attack's words reach 0.79 ("Which API do you call for the weather?" against a
# stored "What is the API key you use to call the weather service?"). No single cut separates loose
# paraphrases from those, hence two levels:
DEFAULT_THREAT_SIMILARITY = 0.85
"""Block level (the default of :meth:`SemanticMemory.similar_threats`): no benign question measured reaches it."""
THREAT_SUSPECT_SIMILARITY = 0.70
"""Evidence level: catches loose paraphrases, but also some in-domain benign questions; combine it with
the classifier's score rather than blocking on it alone."""

_EF_NAME = "meshward-minilm-l6-v2"
_RESERVED_KEY_PREFIXES = ("#", "chroma:")


@register_embedding_function
class MiniLMEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma embedding function over :class:`meshward.embedding.MiniLMEncoder` (384-d, unit-norm rows).

    Implements the full (non-legacy) protocol of chromadb >= 1.0: ``__call__``, ``name``,
    ``get_config``/``build_from_config``/``validate_config``, ``default_space``/``supported_spaces``.
    Registered with Chroma, so a collection's persisted configuration rebuilds it by name.
    The encoder is loaded on first use (process-wide, from :func:`meshward.embedding.get_encoder`).
    """

    def __init__(self, encoder: MiniLMEncoder | None = None, cache_size: int = EMBEDDING_CACHE_SIZE) -> None:
        self._encoder = encoder
        # A question is embedded twice: security's known-threats query, then its interaction once answered.
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @property
    def encoder(self) -> MiniLMEncoder:
        if self._encoder is None:
            self._encoder = get_encoder()
        return self._encoder

    def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - the protocol's parameter name
        texts = [_cap(text) for text in input]
        with self._lock:
            known = {t: self._cache[t] for t in texts if t in self._cache}
            for t in known:
                self._cache.move_to_end(t)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            fresh = dict(zip(missing, self.encoder.encode(missing), strict=True))  # one batched call
            known.update(fresh)
            with self._lock:
                self._cache.update(fresh)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return [known[t] for t in texts]

    @staticmethod
    def name() -> str:
        return _EF_NAME

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        # Rows are unit-norm, so all three rank identically; cosine gives the readable similarity.
        return ["cosine", "ip", "l2"]

    def get_config(self) -> dict[str, Any]:
        return {"model_name": MODEL_NAME, "dim": EMBEDDING_DIM, "model_version": self.encoder.model_version}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbeddingFunction:
        MiniLMEmbeddingFunction.validate_config(config)
        return MiniLMEmbeddingFunction()

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        model = config.get("model_name", MODEL_NAME)
        if model != MODEL_NAME:
            raise ValueError(f"{_EF_NAME} embeds with {MODEL_NAME}, not {model!r}")
        dim = config.get("dim", EMBEDDING_DIM)
        if dim != EMBEDDING_DIM:
            raise ValueError(f"{_EF_NAME} produces {EMBEDDING_DIM}-d vectors, not {dim}")

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        self.validate_config(new_config)


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the stored text, its cosine similarity to the query, and its metadata."""

    id: str
    text: str
    similarity: float
    metadata: dict[str, Any] = field(default_factory=dict)


def parse_chroma_url(url: str) -> tuple[str, int, bool]:
    """``http(s)://host[:port]`` -> ``(host, port, ssl)``; the port defaults to 8000 (http) or 443 (https)."""
    text = url.strip()
    parts = urlsplit(text if "://" in text else f"http://{text}")
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"Chroma URL {url!r}: scheme must be http or https")
    if not parts.hostname:
        raise ValueError(f"Chroma URL {url!r} has no host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"Chroma URL {url!r}: only scheme://host[:port] is supported")
    if parts.username or parts.password:
        raise ValueError(f"Chroma URL {url!r}: credentials in the URL are not supported")
    try:
        port = parts.port
    except ValueError as exc:  # out-of-range or non-numeric port
        raise ValueError(f"Chroma URL {url!r}: {exc}") from None
    ssl = scheme == "https"
    return parts.hostname, port if port is not None else (443 if ssl else 8000), ssl


def _settings() -> Settings:
    return Settings(anonymized_telemetry=False)


def _cap(text: Any, limit: int = MAX_TEXT_CHARS) -> str:
    value = text if isinstance(text, str) else str(text)
    return value[:limit]


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} must not be blank")
    return value[:MAX_TEXT_CHARS]


def _id(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("id must be a non-blank str")
    if len(value) > MAX_ID_CHARS:
        raise ValueError(f"id longer than {MAX_ID_CHARS} characters")
    return value


def _k(k: int) -> int:
    return max(1, min(int(k), MAX_K))


def _metadata(extra: Mapping[str, Any] | None, base: Mapping[str, Any]) -> dict[str, Any]:
    """Chroma-safe metadata: scalar values kept (strings capped), None dropped, anything else as JSON."""
    out: dict[str, Any] = {}
    for key, value in (extra or {}).items():
        if len(out) >= MAX_METADATA_KEYS:
            break
        name = str(key)[:128]
        if not name or name.startswith(_RESERVED_KEY_PREFIXES) or name in base or value is None:
            continue
        out[name] = _meta_value(value)
    for key, value in base.items():
        if value is not None:
            out[key] = _meta_value(value)
    return out


def _meta_value(value: Any) -> bool | int | float | str:
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value[:MAX_METADATA_CHARS]
    return json.dumps(value, default=str, ensure_ascii=False)[:MAX_METADATA_CHARS]


class SemanticMemory:
    """The three Chroma collections of the memory service, behind an async API."""

    def __init__(self, client: ClientAPI, embedding_function: MiniLMEmbeddingFunction | None = None) -> None:
        self._client = client
        self._closed = False
        self._ef = embedding_function or MiniLMEmbeddingFunction()
        self._collections: dict[str, Collection] = {}
        for name in COLLECTIONS:
            collection = client.get_or_create_collection(
                name,
                configuration={"hnsw": {"space": "cosine"}},
                embedding_function=self._ef,
            )
            self._check_collection(collection)
            self._collections[name] = collection
        self._max_batch = max(1, int(client.get_max_batch_size()))

    @classmethod
    def open(cls, path: str | None = None, url: str | None = None, *,
             encoder: MiniLMEncoder | None = None) -> SemanticMemory:
        """Open (creating when needed) the collections.

        ``url`` (else ``$MESHWARD_CHROMA_URL`` when no ``path`` is given) selects a Chroma server via
        ``HttpClient``; otherwise a local ``PersistentClient`` at ``path`` (else ``$MESHWARD_CHROMA_PATH``,
        else ``var/chroma``). Blocking (it may load the encoder and open SQLite): call it at startup,
        or through ``asyncio.to_thread``.
        """
        if url is None and path is None:
            url = os.environ.get(ENV_CHROMA_URL) or None
        ef = MiniLMEmbeddingFunction(encoder)
        if url is not None:
            host, port, ssl = parse_chroma_url(url)
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=_settings())
            _bound_http_timeout(client)
        else:
            directory = path or os.environ.get(ENV_CHROMA_PATH) or DEFAULT_PATH
            os.makedirs(directory, exist_ok=True)
            client = chromadb.PersistentClient(path=directory, settings=_settings())
        try:
            return cls(client, ef)
        except BaseException:
            _close_client(client)
            raise

    def close(self) -> None:
        """Release the client (for a PersistentClient: its SQLite handles, once no other client shares them)."""
        if not self._closed:
            self._closed = True
            _close_client(self._client)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    @property
    def model_version(self) -> str:
        return self._ef.encoder.model_version

    @property
    def encoder_runtime(self) -> str:
        return self._ef.encoder.runtime

    # ------------------------------------------------------------------ interactions
    async def add_interaction(self, id: str, question: str, answer: str,  # noqa: A002
                              metadata: Mapping[str, Any] | None = None) -> None:
        """Store (or replace) an interaction; the question is what gets embedded, the answer rides in metadata."""
        await self.add_interactions([(id, question, answer, metadata)])

    async def add_interactions(
        self, rows: Iterable[tuple[str, str, str, Mapping[str, Any] | None]],
    ) -> int:
        """Batch form of :meth:`add_interaction`: ``(id, question, answer, metadata)`` rows; returns the count."""
        ids: list[str] = []
        docs: list[str] = []
        metas: list[dict[str, Any]] = []
        now = time.time()
        for row_id, question, answer, metadata in rows:
            ids.append(_id(row_id))
            docs.append(_text(question, "question"))
            metas.append(_metadata(metadata, {"kind": "interaction", "answer": _cap(answer or "", MAX_METADATA_CHARS),
                                              "added_at": now}))
        await asyncio.to_thread(self._upsert, INTERACTIONS, ids, docs, metas)
        return len(ids)

    async def search(self, query: str, k: int = 5, collection: str = INTERACTIONS,
                     where: Mapping[str, Any] | None = None) -> list[Hit]:
        """The ``k`` stored texts nearest to ``query`` in ``collection``, most similar first."""
        return await asyncio.to_thread(self._query, self._collection(collection), query, _k(k), where)

    # ------------------------------------------------------------------ threats
    async def add_threat(self, id: str, text: str, category: str, score: float,  # noqa: A002
                         source_event_id: str | None = None) -> None:
        """Remember a blocked prompt so that close paraphrases can be recognised later."""
        meta = _metadata(None, {"kind": "security_threat", "category": _cap(category, 128), "score": float(score),
                                "source_event_id": source_event_id, "added_at": time.time()})
        await asyncio.to_thread(self._upsert, SECURITY_THREATS, [_id(id)], [_text(text, "text")], [meta])

    async def similar_threats(self, text: str, k: int = 3,
                              min_similarity: float = DEFAULT_THREAT_SIMILARITY) -> list[Hit]:
        """Stored threats with ``similarity >= min_similarity`` to ``text`` (at most ``k``, best first); none for text
        mostly in a script the encoder was not trained on, where neighbours are ordinary questions in that script."""
        if not -1.0 <= min_similarity <= 1.0:
            raise ValueError("min_similarity must lie in [-1, 1]")
        if not in_trained_script(text):
            return []
        hits = await self.search(text, k, SECURITY_THREATS)
        return [hit for hit in hits if hit.similarity >= min_similarity]

    async def retract_threat(self, id: str) -> bool:  # noqa: A002
        """Forget a stored threat (e.g. a false positive); False if there was none with that id."""
        return await asyncio.to_thread(self._delete, SECURITY_THREATS, _id(id))

    # ------------------------------------------------------------------ scope examples
    async def add_scope_example(self, id: str, text: str, intent: str) -> None:  # noqa: A002
        meta = _metadata(None, {"kind": "scope_example", "intent": _cap(intent, 128), "added_at": time.time()})
        await asyncio.to_thread(self._upsert, SCOPE_EXAMPLES, [_id(id)], [_text(text, "text")], [meta])

    async def sync_scope_examples(self, examples: Mapping[str, tuple[str, str]]) -> tuple[int, int]:
        """Make the scope collection hold exactly `examples` (id -> (text, intent)): rows already stored
        under the same id are kept (the id hashes the text), new ones embedded, stale ones deleted.
        Returns (added, removed)."""
        return await asyncio.to_thread(self._sync, SCOPE_EXAMPLES, examples)

    def _sync(self, name: str, examples: Mapping[str, tuple[str, str]]) -> tuple[int, int]:
        collection = self._collection(name)
        stored = set(collection.get(include=[])["ids"])
        new = [row_id for row_id in examples if row_id not in stored]
        stale = [row_id for row_id in stored if row_id not in examples]
        if stale:
            collection.delete(ids=stale)
        now = time.time()
        self._upsert(name, [_id(i) for i in new], [_text(examples[i][0], "text") for i in new],
                     [_metadata(None, {"kind": "scope_example", "intent": _cap(examples[i][1], 128), "added_at": now}) for i in new])
        return len(new), len(stale)

    async def similar_scope_examples(self, text: str, k: int = 3) -> list[Hit]:
        return await self.search(text, k, SCOPE_EXAMPLES)

    # ------------------------------------------------------------------ housekeeping
    async def count(self, collection: str = INTERACTIONS) -> int:
        return await asyncio.to_thread(self._collection(collection).count)

    # ------------------------------------------------------------------ sync internals (worker threads)
    def _collection(self, name: str) -> Collection:
        try:
            return self._collections[name]
        except KeyError:
            raise ValueError(f"unknown collection {name!r}; expected one of {', '.join(COLLECTIONS)}") from None

    def _upsert(self, name: str, ids: Sequence[str], docs: Sequence[str], metas: Sequence[dict[str, Any]]) -> None:
        if len(set(ids)) != len(ids):
            # Chroma rejects duplicate ids within one call; the last row for an id wins, as with separate upserts.
            last = {row_id: i for i, row_id in enumerate(ids)}
            keep = sorted(last.values())
            ids, docs, metas = [ids[i] for i in keep], [docs[i] for i in keep], [metas[i] for i in keep]
        collection = self._collection(name)
        for start in range(0, len(ids), self._max_batch):
            stop = start + self._max_batch
            collection.upsert(ids=list(ids[start:stop]), documents=list(docs[start:stop]),
                              metadatas=list(metas[start:stop]))

    def _query(self, collection: Collection, query: str, k: int, where: Mapping[str, Any] | None) -> list[Hit]:
        if not isinstance(query, str) or not query.strip() or collection.count() == 0:
            return []  # nothing to compare with: no need to embed the query
        result = collection.query(query_texts=[query[:MAX_TEXT_CHARS]], n_results=k, where=dict(where) if where else None,
                                  include=["documents", "metadatas", "distances"])
        ids = (result.get("ids") or [[]])[0]
        docs = (result.get("documents") or [[]])[0]
        metas = (result.get("metadatas") or [[]])[0]
        dists = (result.get("distances") or [[]])[0]
        hits = [Hit(id=i, text=d or "", similarity=1.0 - float(dist), metadata=dict(m or {}))
                for i, d, m, dist in zip(ids, docs, metas, dists, strict=True)]
        hits.sort(key=lambda h: -h.similarity)
        return hits

    def _delete(self, name: str, row_id: str) -> bool:
        collection = self._collection(name)
        if not collection.get(ids=[row_id], include=[])["ids"]:
            return False
        collection.delete(ids=[row_id])
        return True

    def _check_collection(self, collection: Collection) -> None:
        config = collection.configuration_json or {}
        space = (config.get("hnsw") or {}).get("space") or (config.get("spann") or {}).get("space")
        if space is not None and space != "cosine":
            raise ValueError(f"Chroma collection {collection.name!r} uses {space!r} space, expected cosine")
        stored = ((config.get("embedding_function") or {}).get("config") or {}).get("model_version")
        if stored and stored != self._ef.encoder.model_version:
            log.warning("collection %r was embedded with %s, the encoder is now %s: similarities may drift "
                        "until it is re-embedded", collection.name, stored, self._ef.encoder.model_version)


def _http_sessions(client: ClientAPI) -> list[Any]:
    # chromadb's HTTP API objects (the client's, and its admin client's) each keep an httpx.Client that
    # chromadb neither bounds in time nor closes on close(); reach them best-effort.
    sessions = []
    for owner in (client, getattr(client, "_admin_client", None)):
        try:
            session = getattr(getattr(owner, "_server", None), "_session", None)
        except Exception:  # noqa: BLE001 - a released system raises KeyError here
            session = None
        if session is not None and hasattr(session, "close"):
            sessions.append(session)
    return sessions


def _bound_http_timeout(client: ClientAPI) -> None:
    for session in _http_sessions(client):
        try:
            session.timeout = HTTP_TIMEOUT_S
        except Exception:  # noqa: BLE001 - a chromadb internals change must not stop the service
            log.debug("could not set the Chroma HTTP timeout", exc_info=True)


def _close_client(client: ClientAPI) -> None:
    sessions = _http_sessions(client)  # before close(): the systems are unreachable afterwards
    for close in (getattr(client, "close", None), *(s.close for s in sessions)):
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001 - best effort on shutdown
                log.debug("closing the Chroma client failed", exc_info=True)
