"""JSON over HTTP for inference backends: per-request timeout, retries with backoff + jitter.

Retried: HTTP 429 and 5xx, connection errors and connections dropped mid-response. Not retried:
other 4xx (the request is wrong), request timeouts (raised as :class:`BackendTimeout`) and
well-formed responses that make no sense (raised as :class:`BackendError`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

import anyio
import attrs
import httpx
from hermes_protocols import (
    BackendError,
    BackendTimeout,
    ConfigError,
    JSONObject,
    SamplingParams,
)

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


@attrs.frozen(slots=True)
class RetryPolicy:
    """``attempts`` tries in total; waits ``base_s * 2**n`` (capped at ``max_s``), each scaled
    by a random factor in ``[1 - jitter, 1]``; a 429's ``Retry-After`` is honoured up to
    ``max_s``."""

    attempts: int = 4
    base_s: float = 0.5
    max_s: float = 8.0
    jitter: float = 0.5

    def __attrs_post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError("RetryPolicy.attempts must be at least 1")

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        wait = min(self.max_s, self.base_s * 2.0**attempt)
        if retry_after is not None:
            return min(self.max_s, max(retry_after, 0.0))
        return wait * (1.0 - self.jitter * rng.random())


class JSONPoster:
    """Owns an ``httpx.AsyncClient`` and posts JSON with the retry policy. Close with
    :meth:`aclose` (or use the owning backend as an async context manager)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        client: httpx.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        seed: int | None = None,
    ) -> None:
        all_headers = dict(headers or {})
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            base_url=base_url.rstrip("/"), timeout=httpx.Timeout(timeout_s)
        )
        self._headers = all_headers
        self.retry = retry or RetryPolicy()
        self._rng = random.Random(seed)
        self.timeout_s = timeout_s

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def post(self, path: str, body: JSONObject) -> JSONObject:
        """POST ``body``; return the decoded JSON object or raise a typed backend error."""
        last: str = "no attempt made"
        for attempt in range(self.retry.attempts):
            retry_after: float | None = None
            try:
                response = await self._client.post(
                    path, json=body, headers=self._headers, timeout=self.timeout_s
                )
            except httpx.TimeoutException as exc:
                if isinstance(exc, httpx.ConnectTimeout):
                    last = f"connect timeout: {exc}"
                else:
                    raise BackendTimeout(
                        f"POST {path} did not finish within {self.timeout_s} s; raise the "
                        "request timeout or lower max_tokens"
                    ) from exc
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 400:
                    return _decode(path, response)
                last = f"HTTP {response.status_code}: {_error_text(response)}"
                if response.status_code not in RETRY_STATUS:
                    raise BackendError(f"POST {path} failed with {last}")
                retry_after = _retry_after(response)
            if attempt + 1 < self.retry.attempts:
                await anyio.sleep(self.retry.delay(attempt, self._rng, retry_after))
        raise BackendError(f"POST {path} failed after {self.retry.attempts} attempts: {last}")


def _decode(path: str, response: httpx.Response) -> JSONObject:
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BackendError(
            f"POST {path}: response is not valid JSON (truncated?): {response.text[:200]!r}"
        ) from exc
    if not isinstance(data, dict):
        raise BackendError(f"POST {path}: expected a JSON object, got {type(data).__name__}")
    return data


def _error_text(response: httpx.Response) -> str:
    try:
        data: Any = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text[:500]
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return json.dumps(data)[:500]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def finish_body(body: JSONObject, sampling: SamplingParams, extra_body: JSONObject) -> JSONObject:
    """Add ``seed`` and ``stop`` when set, then merge ``extra_body`` untouched; return ``body``."""
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.stop:
        body["stop"] = list(sampling.stop)
    body.update(extra_body)
    return body


def require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """Fetch ``data[key]`` of the expected JSON type or raise :class:`BackendError`."""
    value = data.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
        raise BackendError(
            f"{where}: field {key!r} is missing or has the wrong type ({type(value).__name__}); "
            "the server's response does not match its documented format"
        )
    return value


class HTTPBackend:
    """Base of the HTTP backends: owns a :class:`JSONPoster`; an async context manager."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url
        self._http = JSONPoster(
            base_url, api_key=api_key, timeout_s=timeout_s, retry=retry, client=client
        )

    async def __aenter__(self) -> HTTPBackend:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()
