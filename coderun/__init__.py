"""Running the C code Deeploy generates, on this host: the figure a device would print, before a device runs it.

- ``sources``: the Deeploy checkout whose kernels the code calls (checked against the installed release).
- ``build``: the kernels as a cached library, and the generated code built against them with ckpt's runtime.
- ``run``: one or more training steps on given inputs; the outputs, or why the code did not run.
- ``dma``: the DMA transfers the code makes, read from it (none may reach 2^17 B).
- ``manifest``: io.json, what the bridge writes beside the code so the harness can feed and read it.
- ``runtime/``: ckpt's stand-in for the PULP runtime (C): cores as threads, L3 as a separate address space,
  DMA and RAM copies with bounds checks, and the harness.

No Deeploy import here: the code is plain C; the bridge writes it, replay runs it.
"""
