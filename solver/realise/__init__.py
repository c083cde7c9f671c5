"""Turning an answer (a relaxation's, a heuristic's, a MILP's) into a schedule and its SolveResult."""
