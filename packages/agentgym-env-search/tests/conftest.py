import os
import tempfile

# Indexes built by the tests go to a throw-away cache, never the user's ~/.cache.
os.environ.setdefault("AGENTGYM_SEARCH_CACHE", tempfile.mkdtemp(prefix="agentgym-search-cache-"))

# AgentGym's conformance suite against the search env (determinism, invalid actions, spaces, HTTP
# parity, the expert on a fixed sample of both splits: it must solve 60%, the README's promise).
agentgym_conformance = {"env": "search", "sample": 5, "expert_sample": 40, "expert_min_success": 0.6}
