"""What several test modules share: the runner's fakes (promote), the CLI runner of the system tests (clirun)."""
