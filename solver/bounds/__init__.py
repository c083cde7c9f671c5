"""Lower bounds and floors: the point-relaxation bound rounds and the smallest feasible budget."""
