"""every spelling of a service URL becomes one canonical URL, or a clear refusal
naming the option (and never echoing a secret)."""

from __future__ import annotations

import pytest

from factbank_client import config as client_config
from factbank_client.config import normalize_url

GOOD = [
    ("127.0.0.1:28701", "http://127.0.0.1:28701"),
    ("127.0.0.1:28701/", "http://127.0.0.1:28701"),
    ("  127.0.0.1:28701\n", "http://127.0.0.1:28701"),
    ("28701", "http://127.0.0.1:28701"),
    ("localhost:8701", "http://localhost:8701"),
    ("HTTP://LocalHost:8701/", "http://localhost:8701"),
    ("http://127.0.0.1:8701///", "http://127.0.0.1:8701"),
    ("//127.0.0.1:8701", "http://127.0.0.1:8701"),
    ("[::1]:8701", "http://[::1]:8701"),
    ("http://[::1]:8701/", "http://[::1]:8701"),
    ("https://fb.example.com", "https://fb.example.com"),
    ("https://fb.example.com/factbank/", "https://fb.example.com/factbank"),
    ("100.64.0.5:8701", "http://100.64.0.5:8701"),
]

BAD = [
    ("", "is empty"),
    ("   ", "is empty"),
    ("ftp://127.0.0.1:8701", "scheme must be http"),
    ("file:///etc/passwd", "scheme must be http"),
    ("http://", "names no host"),
    ("http://:8701", "names no host"),
    ("http://127.0.0.1:0", "port must be"),
    ("http://127.0.0.1:65536", "port must be"),
    ("127.0.0.1:port", "port must be"),
    ("http://me:hunter2@127.0.0.1:8701", "no user or password"),
    ("http://127.0.0.1:8701/?token=x", "no ?query"),
    ("http://127.0.0.1:8701/#top", "no ?query"),
    ("http://127.0.0.1 :8701", "contains a space"),
    ("http://fb_host:8701", "host may hold"),
    ("fb_rcn6dfRbv-WzbQSC-PeKl5HmyFMbg8ewdFKiVX31PK4", "host may hold"),
]


@pytest.mark.parametrize(("raw", "canonical"), GOOD)
def test_each_spelling_becomes_the_canonical_url(raw, canonical):
    assert normalize_url(raw) == canonical
    assert normalize_url(canonical) == canonical  # idempotent


@pytest.mark.parametrize(("raw", "why"), BAD)
def test_a_url_that_cannot_be_a_service_is_refused_naming_the_option(raw, why):
    with pytest.raises(ValueError) as caught:
        normalize_url(raw, "--recall-url")
    message = str(caught.value)
    assert message.startswith("--recall-url") and why in message
    assert "hunter2" not in message and "fb_rcn6" not in message


def test_the_recall_url_derived_from_a_schemeless_config_is_the_next_port(tmp_path,
                                                                          monkeypatch):
    """A config saved by the old login (`url = "127.0.0.1:28701"`) is read as the URL it
    meant; the recall URL is the next port, not `//127.0.0.1:81/127.0.0.1:28701`."""
    path = tmp_path / "config.toml"
    path.write_text('url = "127.0.0.1:28701"\n[banks.personal]\ntoken = "fb_x"\n')
    for var in ("FACTBANK_URL", "FACTBANK_RECALL_URL", "FACTBANK_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    cfg = client_config.load(path)
    assert (cfg.url, cfg.recall_url) == ("http://127.0.0.1:28701", "http://127.0.0.1:28702")
