"""WebArena as an AgentGym environment: Playwright driving Chromium over WebArena's observation and
action space, its task format and evaluators, and two bundled sites (a shop and a forum) as the
embedded default."""
