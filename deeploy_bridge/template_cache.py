"""Each mako template text compiled once per process.

Deeploy makes a fresh mako `Template` from a text for every node at every code-generation pass (and again in
each closure), and mako compiles every one of them (lexer, code generator, Python's compile), most of them the
same few hundred texts. The compiled module is a function of the text and the template's compile options only,
and rendering keeps no state in it, so templates with the same text and options can share one module. Templates
read from files or with options that cannot be compared are compiled as mako does. Importing this module
applies it once.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from mako import template as mako_template

MAX_TEXTS = 8192                 # distinct texts kept; the least recently used goes first
_original = mako_template._compile_text
_compiled: OrderedDict[tuple, tuple] = OrderedDict()
_lock = threading.Lock()


def _key(template, text: str) -> tuple | None:
    """What the compiled module depends on besides the text, or None where it cannot be compared."""
    key = (text, tuple(template.default_filters or ()), tuple(template.buffer_filters or ()),
           tuple(template.imports or ()), tuple(template.future_imports or ()), template.strict_undefined,
           template.enable_loop, template.input_encoding, template.preprocessor, template.lexer_cls,
           tuple(template.reserved_names or ()))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _compile_text_once(template, text, filename):
    key = _key(template, text) if filename is None else None
    if key is None:
        return _original(template, text, filename)
    with _lock:
        found = _compiled.get(key)
        if found is not None:
            _compiled.move_to_end(key)
            return found
    found = _original(template, text, filename)
    with _lock:
        _compiled[key] = found
        if len(_compiled) > MAX_TEXTS:
            _compiled.popitem(last=False)
    return found


mako_template._compile_text = _compile_text_once


def template_text(node_template) -> str:
    """The text a Deeploy NodeTemplate's mako template was made from ("" where it has none). Read from the text the
    template keeps, not mako's `Template.source`: that looks the compiled module up in a registry of weak references
    to each template's module record, and with a module shared here the record of a template that is gone (the
    last one made from that text) takes the entry with it, so `source` of a template still alive raised KeyError
    (MobileNetV1's tiled split replay, reading a ConvGradX binding's kernel)."""
    template = getattr(node_template, "template", None)
    text = getattr(template, "_source", None)
    if text is None and template is not None:
        text = template.source       # made from a file: mako keeps no text, its registry has it
    return text or ""
