"""The models handed to HiGHS (exact MILP, point relaxation), their accounting, and running them by a deadline."""
