"""One rendering per term in the zh_CN catalogs (booktools/renderings.py).

The renderings the book has settled against (``DRIFT``: 堆栈 for a stack of layers,
five words for "masked", bare "memory", 模型宽度, ...) stay out of every catalog; the
report covers every term of the glossary; and a planted drift is caught, so the check
can fail.
"""

from __future__ import annotations

import re

import pytest

from booktools import renderings


def test_no_rejected_rendering_is_left_in_the_catalogs():
    found = renderings.drift_found()
    assert not found, "\n".join(
        f"{name}: …{around}… ({d.term}: write {d.written}; {d.reason})"
        for d, name, around in found[:20]
    )


@pytest.mark.parametrize("drift", renderings.DRIFT, ids=lambda d: d.rejected[:12])
def test_each_rejected_rendering_is_caught_and_its_replacement_is_not(drift):
    """Each rule finds a sentence that has the rejected word, and none that writes
    the replacement instead, in prose (code and math are not prose)."""
    sample = drift.example
    entry = [("sample.po", "", sample)]
    assert [d for d, _, _ in renderings.drift_found(entry)] == [drift]
    fixed = [("sample.po", "", re.sub(drift.rejected, " ", sample) + drift.written)]
    assert not [d for d, _, _ in renderings.drift_found(fixed) if d is drift]


def test_code_and_math_are_not_prose():
    entry = [("x.po", "", "键和值来自 `memory`，见 {eq}`eq-kv-memory`，$nats$")]
    assert renderings.drift_found(entry) == []
    # Geva's key-value memories are another thing, and stay 记忆
    assert renderings.drift_found([("x.po", "", "看作键–值记忆")]) == []
    # hidden *by the mask*: the noun as agent
    assert renderings.drift_found([("x.po", "", "整行都被掩码遮住的查询")]) == []


def test_the_report_covers_the_glossary_and_sees_a_drift():
    terms = renderings.glossary_terms()
    assert len(terms) > 100, len(terms)
    assert ("masked self-attention", ["掩蔽自注意力", "带掩码的自注意力"]) in terms
    lines = renderings.report()
    assert any(line.endswith(("entries",)) or "others in" in line for line in lines)
    assert any("d_model (model width) = 模型维度" in line for line in lines), lines
    drifted = [
        ("a.po", "The residual connection adds x.", "残差连接把 x 加上。"),
        ("b.po", "A residual connection again.", "残差链接再一次。"),
    ]
    line = next(
        x
        for x in renderings.report(drifted)
        if x.split("  ", 1)[1].startswith("residual connection ")
    )
    assert line.startswith(" 50%") and "others in b.po" in line, line
