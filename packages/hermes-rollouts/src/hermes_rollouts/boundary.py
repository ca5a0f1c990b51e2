"""What an app does with the exception that ended a run: unwrap exception groups to the error
a user can act on."""

from __future__ import annotations


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def root_error(exc: BaseException) -> BaseException:
    """The error a task group re-raised on behalf of one of its tasks: the first leaf of
    (nested) exception groups that is an ``Exception`` (not a cancellation), else ``exc``."""
    leaves = _leaves(exc)
    return next((leaf for leaf in leaves if isinstance(leaf, Exception)), leaves[0])
