"""hermes-rl environments under tinker-cookbook 0.6 (docs/tinker_cookbook.md): any environment
the resolver finds as an ``EnvGroupBuilder`` whose ``Env``s drive our agent loop token by
token, and a ``TokenCompleter`` on our embedded model."""

from hermes_tinker_cookbook_env.completer import HermesTokenCompleter
from hermes_tinker_cookbook_env.env import HermesEnv, HermesEnvGroupBuilder

__all__ = ["HermesEnv", "HermesEnvGroupBuilder", "HermesTokenCompleter"]
