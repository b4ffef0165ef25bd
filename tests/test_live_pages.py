"""The live panels of chapters 11 and 14 on the built site, in Chromium, in every edition,
with every request to another host blocked: the reader's input gives the model's answer,
the attention maps of every layer and head (values on hover) and the formula chain, with
the numbers PyTorch computes from the same .safetensors file; an input the model was not
trained on gives the edition's message and no picture; a dropped model file runs, and a
file that does not fit is refused with a message (``make test-site``; needs ``make book``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import torch
from conftest import serve

import transformer_lib as tl
from transformer_lib.demos import addition, reversal
from transformer_lib.viz.live_panel import WORDS, page_trace

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("TL_SITE_DIR", ROOT / "_build" / "html"))  # or another build
EDITIONS = ["", "zh_CN/", "zh_TW/"]
PAGES = {"reversal": "book/11_toy_model.html", "addition": "book/14_decoder_only.html"}
CJK = re.compile(r"[\u3400-\u9fff]")


@pytest.fixture(scope="module")
def server():
    if not (SITE / PAGES["reversal"]).is_file():
        pytest.fail(f"No built site at {SITE}: run `make book` first.")
    with serve(SITE) as url:
        yield url


class Panel:
    """One chapter page opened with other hosts blocked, and its live panel."""

    def __init__(self, browser, base: str, path: str, width: int = 1200):
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.page.set_default_timeout(60_000)
        self.blocked, self.errors = [], []
        origin = urlsplit(base).netloc

        def route(r):
            if urlsplit(r.request.url).netloc == origin:
                r.continue_()
            else:
                self.blocked.append(r.request.url)
                r.abort()

        self.page.route("**/*", route)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on(
            "console", lambda m: m.type == "error" and self.errors.append(m.text)
        )
        self.page.goto(f"{base}/{path}", wait_until="load")
        self.root = self.page.locator(".tl-live-panel")
        self.wait()

    def wait(self, state: str = "done|refused") -> str:
        self.page.wait_for_function(
            "s => new RegExp('^(' + s + ')$').test("
            "document.querySelector('.tl-live-panel').getAttribute('data-state') || '')",
            arg=state,
        )
        return self.root.get_attribute("data-state")

    def type(self, text: str) -> str:
        box = self.root.locator("input[type=text]")
        box.fill(text)
        # the state of the previous input is no answer to this one: clear it first, so
        # that wait() sees only the state this input leads to (a fixed pause raced with
        # a page still reading a dropped model)
        self.root.evaluate("el => el.setAttribute('data-state', '')")
        box.press("Enter")
        return self.wait()

    def answer(self) -> list[str]:
        return self.root.locator(".tl-live-answer .tl-live-tok.new").all_inner_texts()

    def close(self):
        assert not self.blocked, f"requests to other hosts: {self.blocked[:3]}"
        assert not self.errors, f"console errors: {self.errors[:3]}"
        self.page.close()


def _exported(name: str) -> torch.nn.Module:
    """The model the page runs, read back in PyTorch from the site's own file."""
    return tl.load_exported(SITE / "_static" / "live" / f"{name}.safetensors")


def _greedy(model: torch.nn.Module, text: str) -> tuple[list[int], list[int]]:
    """PyTorch's greedy answer to the panel's input ``text``: (the tokens the model
    reads, the answer's tokens), the tokens read as the task defines them."""
    with torch.no_grad():
        if isinstance(model, tl.GPT):
            a, b = text.rstrip("=").split("+")
            n = (model.cfg.max_len - 3) // 3
            full = addition.encode(torch.tensor([int(a)]), torch.tensor([int(b)]), n)
            prompt = full[:, : addition.prompt_len(n)]
            answer = model.generate(prompt, n + 1)[0].tolist()
            return prompt[0].tolist(), answer
        vocab = reversal.token_labels(range(model.cfg.vocab_size))
        src = [vocab.index(t) for t in text.split()]
        return src, model.generate(torch.tensor([src]), len(src))[0].tolist()


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("name", list(PAGES))
def test_own_input_gives_answer_maps_and_chain(browser, server, edition, name):
    """The example input: the answer PyTorch gives, 8 maps (2 layers x 4 heads), the
    chain's weights summing to 1, a value under the pointer, the edition's words."""
    model = _exported(name)
    L, H = model.cfg.n_layers, model.cfg.n_heads
    panel = Panel(browser, server, edition + PAGES[name])
    try:
        example = panel.root.get_attribute("data-example")
        _, answer = _greedy(model, example)
        labels = tl.read_metadata(SITE / "_static" / "live" / f"{name}.safetensors")[
            "vocab"
        ]
        assert panel.answer() == [labels[i] for i in answer], panel.answer()
        maps = panel.root.locator(".tl-live-map canvas")
        assert maps.count() == L * H
        weights = panel.root.locator(".tl-live-chain-table tr td:last-child")
        values = [float(t.replace("\u2212", "-")) for t in weights.all_inner_texts()]
        assert abs(values[-1] - 1) < 1e-3 and abs(sum(values[:-1]) - 1) < 5e-3
        maps.first.scroll_into_view_if_needed()
        box = maps.first.bounding_box()
        panel.page.mouse.move(box["x"] + box["width"] - 3, box["y"] + box["height"] - 3)
        panel.page.wait_for_selector(".tl-live-tip", state="visible")
        tip = panel.page.locator(".tl-live-tip")
        assert re.search(r": (\d\.\d{3}|\S+)$", tip.inner_text()), tip.inner_text()
        title = panel.root.locator("h4").first.inner_text()
        assert bool(CJK.search(title)) == bool(edition), title
    finally:
        panel.close()


def test_probabilities_and_chain_are_pytorchs(browser, server):
    """Chapter 14: each step's candidate probabilities and the formula chain's numbers
    are those of the PyTorch model loaded from the same file (to the 3 decimals shown)."""
    model = _exported("addition")
    panel = Panel(browser, server, PAGES["addition"])
    try:
        assert panel.type("58+67=") == "done"
        prompt, answer = _greedy(model, "58+67=")
        tokens = prompt + answer
        with torch.no_grad():
            steps = [
                torch.softmax(
                    model(torch.tensor([tokens[: len(prompt) + j]]))[0, -1], -1
                )
                for j in range(len(answer))
            ]
        rows = panel.root.locator(".tl-live-probs tr")
        for j, p in enumerate(steps):
            shown = rows.nth(j + 1).locator("td").all_inner_texts()
            assert len(shown) == model.cfg.vocab_size
            for text, x in zip(shown, p.tolist(), strict=True):
                value = float(text.replace("\u2212", "-"))
                assert abs(value - x) < 1.5e-3, (j, shown, p)
        # the chain: the last layer, head 1, the "=" query (the page's first choice)
        a = page_trace(model, tokens[: model.cfg.max_len])["layers"][-1]["self"]
        i = 2 * 3 + 1
        cells = panel.root.locator(".tl-live-chain-table tr")
        for j in range(i + 1):
            texts = cells.nth(j + 1).locator("td").all_inner_texts()
            num = [
                float(t.replace("\u2212", "-")) for t in (texts[0], texts[1], texts[3])
            ]
            want = [
                a["scores"][0][i][j],
                a["scores"][0][i][j] * a["scale"],
                a["weights"][0][i][j],
            ]
            assert all(abs(x - y) < 1.5e-3 for x, y in zip(num, want, strict=True))
        assert "".join(panel.answer()) == "".join(addition.token_labels(answer))
    finally:
        panel.close()


BAD = {
    "addition": [
        ("347+85", "err_no_equals"),
        ("3471+5=", "err_digits"),
        ("34+5=7", "err_after_equals"),
        ("3*4=", "err_char"),
        ("34=", "err_no_plus"),
    ],
    "reversal": [("abc", "err_length_exact"), ("a b c d e f g k", "err_char")],
}


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("name", list(PAGES))
def test_input_it_was_not_trained_on_gets_a_message(browser, server, edition, name):
    """No answer, no maps: the edition's message, which names what is wrong."""
    panel = Panel(browser, server, edition + PAGES[name])
    try:
        for text, key in BAD[name]:
            assert panel.type(text) == "refused", text
            msg = panel.root.locator(".tl-live-msg").first.inner_text()
            assert msg, text
            if edition:
                assert CJK.search(msg), msg
            else:
                start = WORDS[key].split("{")[0]
                assert msg.startswith(start), (msg, key)
            assert panel.root.locator(".tl-live-map").count() == 0
            assert panel.answer() == []
        assert panel.type(panel.root.get_attribute("data-example")) == "done"
    finally:
        panel.close()


def test_temperature_samples(browser, server):
    """Chapter 14's slider: ten answers sampled at the temperature shown."""
    panel = Panel(browser, server, PAGES["addition"])
    try:
        slider = panel.root.locator("input.tl-live-temp")
        slider.fill("0.1")
        slider.dispatch_event("change")
        panel.page.wait_for_function(
            "() => /0\\.1/.test(document.querySelector('.tl-live-samples').textContent)"
        )
        text = panel.root.locator(".tl-live-samples").inner_text()
        counts = [int(k) for k in re.findall(r"\u00d7(\d+)", text)]
        assert sum(counts) == 10, text
    finally:
        panel.close()


def test_own_model_runs_and_a_misfit_is_refused(browser, server, tmp_path):
    """A GPT adder exported with tl.export_model runs on the page with the same views;
    a file that is not safetensors, and an encoder-decoder on the GPT's page, are
    refused with a message; nothing is sent anywhere (blocked hosts checked)."""
    torch.manual_seed(0)
    mine = tl.GPT(addition.addition_config(2)).eval()  # 2-digit operands, 9 positions
    own = tl.export_model(
        mine, tmp_path / "mine.safetensors", vocab=addition.token_labels(range(12))
    )
    wrong = tl.export_model(
        reversal.random_model(),
        tmp_path / "reversal.safetensors",
        vocab=reversal.token_labels(range(12)),
    )
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a model at all")
    panel = Panel(browser, server, PAGES["addition"])
    try:
        chooser = panel.root.locator("input.tl-live-file")
        note = panel.root.locator(".tl-live-own")
        chooser.set_input_files(str(junk))
        panel.page.wait_for_function(
            "() => document.querySelector('.tl-live-own').textContent.length > 0"
        )
        assert note.inner_text().startswith(WORDS["file_not-safetensors"][:20])
        chooser.set_input_files(str(wrong))
        panel.page.wait_for_function(
            "() => /transformer: n_layers=2/.test("
            "document.querySelector('.tl-live-own').textContent)"
        )
        assert note.inner_text().startswith("This file does not hold an adder.")
        chooser.set_input_files(str(own))
        panel.page.wait_for_function(
            "() => /mine\\.safetensors/.test(document.querySelector('.tl-live-own').textContent)"
        )
        assert panel.type("347+85=") == "refused"  # 3 digits: too many for this model
        assert panel.type("47+85=") == "done"
        _, answer = _greedy(mine, "47+85=")
        assert panel.answer() == addition.token_labels(answer)
        assert panel.root.locator(".tl-live-map canvas").count() == 8
    finally:
        panel.close()


def test_narrow_screen(browser, server):
    """On a phone-sized screen the panel fits: nothing wider than the viewport."""
    panel = Panel(browser, server, PAGES["reversal"], width=390)
    try:
        width = panel.page.evaluate(
            "() => Math.max(...Array.from(document.querySelectorAll("
            "'.tl-live-panel, .tl-live-panel canvas, .tl-live-panel input'),"
            " e => e.getBoundingClientRect().right))"
        )
        assert width <= 390, width
    finally:
        panel.close()


# (n_layers, n_heads, digits or source length): the shapes tl.export_model allows,
# dropped one after another, so that each model follows one of another shape
SHAPES = {
    "addition": [(4, 4, 4), (1, 1, 1), (3, 2, 2), (2, 4, 3), (1, 2, 4)],
    "reversal": [(4, 4, 8), (1, 1, 3), (2, 2, 5), (3, 4, 1)],
}


def _untrained(name: str, layers: int, heads: int, size: int, path: Path) -> Path:
    """An untrained model of that shape, exported as a learner would."""
    torch.manual_seed(layers * 100 + heads * 10 + size)
    if name == "addition":
        model = tl.GPT(addition.addition_config(size, n_layers=layers, n_heads=heads))
        vocab = addition.token_labels(range(12))
    else:
        model = reversal.random_model(
            length=size, n_layers=layers, n_heads=heads, seed=layers
        )
        vocab = reversal.token_labels(range(12))
    return tl.export_model(model, path, vocab=vocab)


@pytest.mark.parametrize("name", list(PAGES))
def test_a_learners_model_of_any_shape_runs(browser, server, tmp_path, name):
    """Issue 31: each model of SHAPES, dropped on the panel, runs on an example the
    panel adapts to it: no page error, every map and the chain present, and the
    layer and head menus of its own sizes, opening on its last layer."""
    panel = Panel(browser, server, PAGES[name])
    try:
        chooser = panel.root.locator("input.tl-live-file")
        for layers, heads, size in SHAPES[name]:
            path = _untrained(
                name,
                layers,
                heads,
                size,
                tmp_path / f"m{layers}{heads}{size}.safetensors",
            )
            chooser.set_input_files(str(path))
            panel.page.wait_for_function(
                "f => document.querySelector('.tl-live-own').textContent.includes(f)",
                arg=path.name,
            )
            assert panel.wait() == "done", (name, layers, heads, size)
            shape = (layers, heads, size)
            maps = panel.root.locator(".tl-live-map canvas").count()
            assert maps == layers * heads, shape
            assert panel.root.locator(".tl-live-chain-table").count() == 1, shape
            layer_menu = panel.root.locator("select.tl-live-layer option")
            head_menu = panel.root.locator("select.tl-live-head option")
            assert layer_menu.count() == layers and head_menu.count() == heads, shape
            chosen = panel.root.locator("select.tl-live-layer").input_value()
            assert chosen == str(layers - 1), shape
            note = panel.root.locator(".tl-live-own").inner_text()
            assert ("1 layer," if layers == 1 else f"{layers} layers,") in note, note
            assert ("1 head," if heads == 1 else f"{heads} heads,") in note, note
            hint = panel.root.locator(".tl-live-hint").inner_text()
            unit = "digit" if name == "addition" else "symbol"
            if name == "addition":  # the example fits the model, and the hint says so
                text = panel.root.locator("input[type=text]").input_value()
                assert all(len(x) <= size for x in text.rstrip("=").split("+")), text
                count = f"1 {unit}" if size == 1 else f"{size} {unit}s"
                example = f"{'3479'[:size]}+{'8516'[: max(1, size - 1)]}="
                assert count in hint and f"as in {example}," in hint, hint
            typed = panel.root.locator("input[type=text]").input_value()
            want = size + 1 if name == "addition" else len(typed.split())
            assert len(panel.answer()) == want, shape
        assert not panel.errors, panel.errors
    finally:
        panel.close()
