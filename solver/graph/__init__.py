"""The training graph and what follows from it: loading, sizes, costs, the replay semantics, decisions, baselines."""
