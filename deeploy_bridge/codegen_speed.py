"""Two steps of Deeploy's code generation made linear in the network's size, with the same output.

- `IntrospectiveCodeTransformationMixIn._fixCtxtOrdering` sorts a layer's buffer names by their place in the
  context, finding each place by searching a fresh list of every name in it; it runs for every layer in several
  passes, so on a graph of a few hundred layers (MobileNetV1 of the training branch) it took minutes. Here only
  the layer's own names are looked for, from both ends of each dict (the same places as `list.index` finds in
  the joined list; a name not there is the same ValueError).
- `NetworkContainer.generateGlobalDefinitionCode` joins the global definitions by adding strings one to the
  next, copying the whole text each time (tens of MB there); here they are joined once.
Importing this module applies it once.
"""
from __future__ import annotations

from Deeploy.CommonExtensions.CodeTransformationPasses.IntrospectiveCodeTransformation import (
    IntrospectiveCodeTransformationMixIn,
)
from Deeploy.DeeployTypes import GlobalDefinition, NetworkContainer

_original = {
    "_fixCtxtOrdering": IntrospectiveCodeTransformationMixIn._fixCtxtOrdering,
    "generateGlobalDefinitionCode": NetworkContainer.generateGlobalDefinitionCode,
}


def _places(objects: dict, wanted: set[str], offset: int) -> dict[str, int]:
    """The place of each name of `wanted` among the keys of `objects` (plus `offset`), walking in from both ends
    at once and stopping when all are found: a layer's names are mostly the network's first buffers or its latest
    ones, and a context's keys can run to tens of thousands."""
    found: dict[str, int] = {}
    size = len(objects)
    forward, backward = iter(objects), reversed(objects)
    for step in range((size + 1) // 2):
        if len(found) == len(wanted):
            break
        first, last = next(forward), next(backward)
        if first in wanted:
            found[first] = offset + step
        if last in wanted:
            found[last] = offset + size - 1 - step
    return found


def _fix_ctxt_ordering(ctxt, nameList: list[str]) -> list[str]:
    # a name's first place in globals then locals: a global name's place among the globals, else its local one
    # after all globals (dict keys are unique, so each dict holds a name once)
    held, local = ctxt.globalObjects, ctxt.localObjects
    place = _places(held, {name for name in nameList if name in held}, 0)
    place.update(_places(local, {name for name in nameList if name not in held and name in local}, len(held)))

    def key(name: str) -> int:
        if name not in place:
            raise ValueError(f"{name!r} is not in list")
        return place[name]

    return sorted(nameList.copy(), key=key)


def _generate_global_definition_code(self: NetworkContainer) -> str:
    if not self.parsed or not self.bound:
        raise RuntimeError('You need to parse and bind the network before generating code!')
    return "".join(obj.definition for obj in self.ctxt.globalObjects.values() if isinstance(obj, GlobalDefinition))


IntrospectiveCodeTransformationMixIn._fixCtxtOrdering = staticmethod(_fix_ctxt_ordering)
NetworkContainer.generateGlobalDefinitionCode = _generate_global_definition_code
