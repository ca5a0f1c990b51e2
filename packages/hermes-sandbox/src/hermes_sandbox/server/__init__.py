"""The sandbox server (``hermes-sandbox serve``): slots of one host over authenticated HTTP."""

from hermes_sandbox.server.app import ServerConfig, create_app
from hermes_sandbox.server.run import running_server, serve

__all__ = ["ServerConfig", "create_app", "running_server", "serve"]
