"""One trainable sequence as every reader of records sees it, whatever file it came from."""

from __future__ import annotations

import attrs

from hermes_protocols.json_types import JSONObject


@attrs.frozen(kw_only=True)
class TokenSequence:
    """A rollout's tokens as a trainer takes them.

    ``ids`` are the sampler's (or re-tokenized) ids, ``mask`` is 1 where the policy sampled the
    token, ``logprobs`` holds the sampler's logprob there (``None`` where masked or where the
    engine returned none). ``token_source`` is ``"sampler"`` or ``"retokenized"``,
    ``logprob_mode`` ``"sampled"``, ``"raw"`` or ``None`` (mixed or unknown), ``sampling`` the
    sampling settings the rollout records (its ``temperature``), ``reward`` the verifier's
    (``None``: the rollout failed).
    """

    id: str
    reward: float | None
    ids: tuple[int, ...]
    mask: tuple[int, ...]
    logprobs: tuple[float | None, ...]
    token_source: str | None
    logprob_mode: str | None
    sampling: JSONObject | None

    @property
    def temperature(self) -> float | None:
        """The sampling temperature the rollout records, if it records one."""
        value = (self.sampling or {}).get("temperature")
        return (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )
