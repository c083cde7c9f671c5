"""ckpt's solver: a training graph and a memory budget in, the cheapest recompute schedule that fits out.

It knows nothing of Deeploy. Its rooms, each importing only the ones listed before it:

- graph/     the graph record, loading it, and what follows from it: the replay semantics (simulate.py), a
             schedule's decisions and sequence, views, the plain orders and the single-op floor (baselines.py).
             A new fact about an op or a buffer goes here.
- memory/    where a sequence's buffers sit on the device: the static layout, the non-tiled arena, the heap, the
             resident arena. A new memory level's layout goes here.
- model/     the models handed to HiGHS: the index sets (problem.py), the memory accounting (accounting.py), the
             exact MILP (milp.py), the point relaxation (relaxation.py), running them by a deadline, and the
             records a solve takes and gives. A new constraint family or a new memory level's terms go here.
- realise/   turning an answer into a schedule: the greedy repair, the walk from a relaxation's answer, the
             canonical schedule and the SolveResult made of it.
- bounds/    lower bounds and floors: the point-relaxation bound rounds, the smallest feasible budget, and the
             refusal that states it.
- policies/  recompute policies of Deeploy's training branch, the baselines solve() is measured against.

On top: solve.py (solve(), the one entry), stages.py (the stages it runs), order_search.py, budget.py.
"""
