"""Each mako template text is compiled once per process, and a shared compiled module renders every template
that holds its text as mako alone would."""
from hypothesis import given
from hypothesis import strategies as st
from mako import template as mako_template
from mako.template import Template

from ckpt.deeploy_bridge import template_cache

PIECES = st.sampled_from(["${a}", "${b}", " + ", "${a * b}", "\n% if a > b:\nbigger ${a}\n% endif\n",
                          "\n% for i in range(b % 3):\n${i}\n% endfor\n"])


def _uncached_render(text: str, **values) -> str:
    mako_template._compile_text = template_cache._original
    try:
        return Template(text).render(**values)
    finally:
        mako_template._compile_text = template_cache._compile_text_once


def test_templates_of_one_text_share_one_module_and_render_their_own_values():
    text = "int ${name}[${size}]; // template_cache test"
    first, second = Template(text), Template(text)
    assert first.module is second.module
    assert first.render(name="a", size=3) == "int a[3]; // template_cache test"
    assert second.render(name="b", size=5) == "int b[5]; // template_cache test"


def test_other_compile_options_compile_again():
    text = "${value} // template_cache options"
    plain, escaped = Template(text), Template(text, default_filters=["h"])
    assert plain.module is not escaped.module
    assert plain.render(value="<") == "< // template_cache options"
    assert escaped.render(value="<") == "&lt; // template_cache options"


@given(st.lists(PIECES, max_size=8), st.integers(-5, 5), st.integers(-5, 5))
def test_a_shared_module_renders_what_mako_alone_renders(pieces, a, b):
    text = "".join(pieces)
    twice = [Template(text).render(a=a, b=b) for _ in range(2)]
    assert twice[0] == twice[1] == _uncached_render(text, a=a, b=b)


def test_a_templates_text_is_read_after_another_template_of_that_text_is_gone():
    """mako's `source` looks the shared module up through the last template made from its text: once that one is
    collected it raised KeyError for one still alive (a MobileNetV1 replay, reading a ConvGradX binding)."""
    import gc

    from Deeploy.DeeployTypes import NodeTemplate

    text = "x = ${y}; // template_cache text"
    kept, gone = NodeTemplate(text), NodeTemplate(text)
    del gone
    gc.collect()
    assert template_cache.template_text(kept) == text
    assert template_cache.template_text(object()) == ""
