"""The generic HTTP env server (FastAPI + uvicorn) behind ``agentgym serve``."""

from agentgym.server.app import create_app
from agentgym.server.run import serve

__all__ = ["create_app", "serve"]
