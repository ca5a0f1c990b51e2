"""Which logprob mode an engine returns, and a loud warning when it is not the one requested.

vLLM chooses its mode at start-up (``--logprobs-mode raw_logprobs`` by default,
``processed_logprobs`` for the sampled distribution); SGLang returns temperature-scaled
logprobs unless started with ``SGLANG_RETURN_ORIGINAL_LOGPROB=1``. The client cannot change
either per request, so the backends are told what the server does and say so in every
:class:`hermes_protocols.Generation`.
"""

from __future__ import annotations

import logging

from hermes_protocols import LogprobMode

_log = logging.getLogger("hermes_loop.logprobs")


class LogprobModeGuard:
    """Knows the mode ``engine`` returns; warns (once per backend) when a request wants the
    other one. ``how`` says how to get the requested mode from that engine."""

    def __init__(self, engine: str, available: LogprobMode, how: str) -> None:
        self.engine = engine
        self.available: LogprobMode = available
        self._how = how
        self._warned = False

    def returned(self, requested: LogprobMode) -> LogprobMode:
        """The mode the engine will return for a request that asks for ``requested``."""
        if requested != self.available and not self._warned:
            self._warned = True
            _log.warning(
                "%s returns %s logprobs but %s were requested: the records will say %r. %s",
                self.engine,
                self.available,
                requested,
                self.available,
                self._how,
            )
        return self.available
