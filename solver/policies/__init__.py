"""Recompute policies of Deeploy's training branch, as baselines for solve()."""
