"""URL functions: java.net.URI parts and URLEncoder / URLDecoder behaviour."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine.functions  # noqa: F401  (registers the libraries)
from engine.errors import EvaluationError
from engine.functions.registry import REGISTRY
from engine.plan import types as T

URL = "https://ann@shop.example.org:8443/a%20b/c?item=ski%20pole&size=&flag#top%21"


def s(name: str, *args: Any) -> Any:
    """Call a function whose arguments are all STRING."""
    return REGISTRY.resolve(name, [T.STRING] * len(args)).invoke(list(args))


def test_extract_parts_of_a_full_url():
    assert s("URL_EXTRACT_PROTOCOL", URL) == "https"
    assert s("URL_EXTRACT_HOST", URL) == "shop.example.org"
    assert s("URL_EXTRACT_PORT", URL) == 8443
    assert s("URL_EXTRACT_PATH", URL) == "/a b/c"
    assert s("URL_EXTRACT_QUERY", URL) == "item=ski pole&size=&flag"
    assert s("URL_EXTRACT_FRAGMENT", URL) == "top!"


def test_extract_parameter_values():
    assert s("URL_EXTRACT_PARAMETER", URL, "item") == "ski pole"
    assert s("URL_EXTRACT_PARAMETER", URL, "size") == ""
    assert s("URL_EXTRACT_PARAMETER", URL, "flag") == ""
    assert s("URL_EXTRACT_PARAMETER", URL, "missing") is None
    assert s("URL_EXTRACT_PARAMETER", "http://h/p", "item") is None
    assert s("URL_EXTRACT_PARAMETER", "http://h/?a=1&a=2", "a") == "1"


def test_missing_parts_are_null_or_empty_path():
    bare = "http://example.org"
    assert s("URL_EXTRACT_PORT", bare) is None
    assert s("URL_EXTRACT_QUERY", bare) is None
    assert s("URL_EXTRACT_FRAGMENT", bare) is None
    assert s("URL_EXTRACT_PATH", bare) == ""
    assert s("URL_EXTRACT_PATH", "http://example.org?q") == ""


def test_relative_reference_has_no_protocol_or_host():
    assert s("URL_EXTRACT_PROTOCOL", "example.org/x") is None
    assert s("URL_EXTRACT_HOST", "example.org/x") is None
    assert s("URL_EXTRACT_PATH", "example.org/x") == "example.org/x"


def test_url_functions_return_null_for_null():
    for fn in ("URL_EXTRACT_HOST", "URL_EXTRACT_PORT", "URL_ENCODE_PARAM", "URL_DECODE_PARAM"):
        assert s(fn, None) is None
    assert s("URL_EXTRACT_PARAMETER", None, "a") is None


def test_invalid_url_raises_evaluation_error():
    with pytest.raises(EvaluationError, match="invalid syntax"):
        s("URL_EXTRACT_HOST", "http://bad host/")
    with pytest.raises(EvaluationError, match="invalid syntax"):
        s("URL_EXTRACT_PATH", "http://h/%zz")
    for url in ("http://bad host/", "1http://h/", "http://h/#a#b"):
        with pytest.raises(EvaluationError) as raised:
            s("URL_EXTRACT_PROTOCOL", url)
        assert str(raised.value) == f"URL input has invalid syntax: {url}"


def test_encode_param_follows_java_urlencoder():
    assert s("URL_ENCODE_PARAM", "a b&c=d") == "a+b%26c%3Dd"
    assert s("URL_ENCODE_PARAM", "keep.-*_ but ~") == "keep.-*_+but+%7E"
    assert s("URL_ENCODE_PARAM", "é") == "%C3%A9"
    assert s("URL_ENCODE_PARAM", "") == ""


def test_decode_param_follows_java_urldecoder():
    assert s("URL_DECODE_PARAM", "a+b%26c%3dd") == "a b&c=d"
    assert s("URL_DECODE_PARAM", "%C3%A9") == "é"
    assert s("URL_DECODE_PARAM", "plain") == "plain"
    with pytest.raises(EvaluationError, match="escape"):
        s("URL_DECODE_PARAM", "100%")


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_encode_then_decode_round_trips(text):
    assert s("URL_DECODE_PARAM", s("URL_ENCODE_PARAM", text)) == text
