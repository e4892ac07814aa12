"""The peer tier (tests/test_peer.py): vLLM's own `tests/plugins_tests`, from the vLLM source
distribution of each target, run against vLLM's dummy plugin packages (the baseline) and
against generated packages standing in for them. What is adapted, and what is excluded and
why, is data: tests/peer/adaptations.yml; docs/peer-tier.md is its table of results."""
