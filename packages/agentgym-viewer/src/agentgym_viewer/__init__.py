"""The AgentGym trajectory viewer: a loopback web app over run folders and episode files."""
