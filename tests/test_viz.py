"""The interactive-figure machinery: one object gives a live widget in Jupyter and a static twin on the site."""

import json
import re

import numpy as np
import pytest

from transformer_lib.viz import Explorer, all_explorers, heatmap


def _draw(fig, T, temperature, causal):
    ax = fig.add_subplot()
    s = np.random.default_rng(0).normal(size=(T, T)) / temperature
    if causal:
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    return heatmap(
        ax, w, [f"t{i}" for i in range(T)], [f"t{i}" for i in range(T)], title="weights"
    )


def make():
    return Explorer(
        _draw,
        {"T": [3, 5], "temperature": [0.5, 1.0, 2.0], "causal": [False, True]},
        defaults={"temperature": 1.0},
    )


def test_update_changes_the_picture():
    e = make()
    a, b = e.update(temperature=0.5), e.update(temperature=2.0)
    assert a[:8] == b"\x89PNG\r\n\x1a\n" and a != b
    assert e.update(temperature=0.5) == a  # deterministic


def test_static_twin_has_every_frame_and_hover_values():
    e = make()
    html = e.to_html()
    frames = json.loads(
        re.search(
            r'<script type="application/json" class="tl-frames">(.*?)</script>', html
        ).group(1)
    )
    assert len(frames) == 2 * 3 * 2
    hover = frames["1,1,1"]["hover"][0]
    assert hover["r"] == ["t0", "t1", "t2", "t3", "t4"] and len(hover["v"]) == 5
    assert hover["v"][0][4] == 0.0  # causal: query 0 gives key 4 no weight
    assert all(0 <= x <= 1 for x in hover["box"])
    assert 'type="range"' in html and 'type="checkbox"' in html
    assert "http://" not in html and "https://" not in html  # nothing from another host


def test_bundle_has_live_view_and_static_twin():
    bundle = make()._repr_mimebundle_()
    assert "text/html" in bundle and "tl-explorer" in bundle["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_bad_controls_are_refused():
    with pytest.raises(ValueError, match="not one of the options"):
        Explorer(_draw, {"T": [3]}, defaults={"T": 4})
    with pytest.raises(ValueError, match="exceed"):
        Explorer(_draw, {"a": list(range(20)), "b": list(range(20))})


def test_every_registered_explorer_builds_and_redraws():
    found = all_explorers()
    assert found, "no chapter registers an explorer"
    for name, factory in found.items():
        e = factory()
        assert isinstance(e, Explorer), name
        for control, options in e.controls.items():
            assert e.update(**{control: options[-1]})[:4] == b"\x89PNG", (name, control)
