"""Two steps of Deeploy's code generation made linear in the network's size, with the same output.

- `IntrospectiveCodeTransformationMixIn._fixCtxtOrdering` sorts a layer's buffer names by their place in the
  context, finding each place by searching a fresh list of every name in it; it runs for every layer in several
  passes, so on a graph of a few hundred layers (MobileNetV1 of the training branch) it took minutes. Here the
  places are indexed once (the first place of a name, as `list.index` finds it; a name not there is the same
  ValueError), and the index is used again while the context's names are the same list.
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


_last: tuple[list[str], dict[str, int]] = ([], {})     # the names last indexed, and their places


def _places(names: list[str]) -> dict[str, int]:
    """Each name's first place in `names` (as list.index finds it); the last call's index when `names` is equal
    to its list (consecutive layers mostly see the same context)."""
    global _last
    if names != _last[0]:
        # reversed, so that the first place of a name is the one kept; built by dict's C loop
        _last = (names, dict(zip(reversed(names), range(len(names) - 1, -1, -1))))
    return _last[1]


def _fix_ctxt_ordering(ctxt, nameList: list[str]) -> list[str]:
    place = _places([*ctxt.globalObjects.keys(), *ctxt.localObjects.keys()])

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
