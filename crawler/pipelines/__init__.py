"""Item pipelines: near-duplicate verdicts counted and applied, the full-text index, and big
items' feed lines made off the reactor."""
