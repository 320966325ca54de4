"""Clients of ``agentgym serve``: ``RemoteEnv`` (one session, sync) and ``AsyncEnvPool`` (many, async).

``transport`` carries their requests (httpx, sync and async), ``retry`` holds the retry policy and
the replay of lost sessions that both share, ``remote`` and ``pool`` the two clients.
"""

from agentgym.client.pool import AsyncEnvPool, PoolSession
from agentgym.client.remote import RemoteEnv

__all__ = ["AsyncEnvPool", "PoolSession", "RemoteEnv"]
