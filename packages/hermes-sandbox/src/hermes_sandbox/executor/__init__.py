"""``hermes-exec``: one small agent per sandbox that starts every command of that sandbox.

The sandbox (namespaces, cgroups, seccomp) is set up once when the agent starts; each command is
then a child of the agent, at about the cost of a raw process spawn. ``agent.c`` is the agent,
:mod:`~hermes_sandbox.executor.wire` its protocol, :mod:`~hermes_sandbox.executor.client` the
client, :mod:`~hermes_sandbox.executor.build` builds it and
:mod:`~hermes_sandbox.executor.process` runs it.
"""

from hermes_sandbox.executor.build import agent_binary, build_agent
from hermes_sandbox.executor.client import Executor, ExecutorDied, handshake
from hermes_sandbox.executor.process import AgentProcess
from hermes_sandbox.executor.wire import ExecRequest

__all__ = [
    "AgentProcess",
    "ExecRequest",
    "Executor",
    "ExecutorDied",
    "agent_binary",
    "build_agent",
    "handshake",
]
