from agentgym.cli import main

main()
