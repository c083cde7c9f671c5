"""Read which outputs Deeploy places in an input's buffer, from Deeploy's own NetworkContext.

What Deeploy 0.2.1 records (found by reading its source, not guessed from op types):

* Buffer aliasing is declared by node templates during binding (``NodeTemplate.alignToContext``).
  Only the reshape-like template does it: ``Targets/Generic/Templates/ReshapeTemplate._ReshapeTemplate``
  links input and output both ways in ``VariableBuffer.aliases`` (a set), and the PULP subclass
  (``Targets/PULPOpen/Templates/ReshapeTemplate``) additionally sets ``bufferOut._alias = bufferIn.name``
  (used by the tiler's memory scheduler). On Siracusa this template serves Reshape, Flatten, Squeeze and
  Unsqueeze (all mapped to ``ReshapeLayer``); its C code is ``out = in;`` (pointer copy, no malloc).
* Identity nodes never reach binding: ``NetworkDeployer._removeIdentityNodes`` deletes them.
* No other 0.2.1 template (SGD, accumulations, Add, Transpose, ...) declares an alias: SGD writes
  ``weight_updated`` (a global graph output) from ``weight`` and ``grad``; nothing is updated in place.
* ``_ReferenceBuffer`` / ``hoistReference`` are used by the tiler for tile pointers into a larger
  buffer, not for graph-level aliasing, so they are not reported here.

An alias here is oriented output -> input of the same node; chains are kept as single hops
(``ckpt.solver.graph.graph.alias_root`` follows them to the root buffer).
"""
from __future__ import annotations


def collect_aliases(ctxt, graph) -> tuple[dict[str, str], dict[str, str]]:
    """Return (output tensor -> input tensor it shares, output tensor -> producer op type)."""
    producer = {}
    for node in graph.nodes:
        for tensor in node.outputs:
            producer[tensor.name] = node
    links: set[tuple[str, str]] = set()
    for scope in (ctxt.globalObjects, ctxt.localObjects):
        for name, buf in scope.items():
            target = getattr(buf, "_alias", None)
            if isinstance(target, str):
                links.add((name, target))
            for other in getattr(buf, "aliases", ()) or ():
                links.add((name, other))
    aliases: dict[str, str] = {}
    ops: dict[str, str] = {}
    for out, inp in sorted(links):
        node = producer.get(out)
        if node is None or inp not in {t.name for t in node.inputs}:
            continue  # the reverse direction of a two-way link, or not a same-node pair
        aliases[out] = inp
        ops[out] = node.op
    return aliases, ops
