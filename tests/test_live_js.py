"""The JavaScript formulas of the site (``book/_static/tl-live.js``) against
transformer_lib, in Chromium, on the built site with every other host blocked.

* Each trained model's ``.safetensors`` file, as the site serves it, is loaded into the
  PyTorch model (``tl.load_exported``, through ``safetensors.torch.load_model``) and
  into the page (``window.tlLive``); their logits on random inputs are at most 1e-4
  apart, and so are the attention weights of the page's trace.
* Every formula function of the module is given the same random inputs as its
  ``transformer_lib`` counterpart, in float32.
* A file dropped on the page (``tlLive.load``) runs when it fits and is refused with
  the right ``.code`` when it does not.

Needs the built site (``make book``); runs in ``make test-site``. ``TL_SITE_DIR`` tests
another build. The largest difference seen is written to ``_build/live-js-report.json``.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import safetensors.torch
import torch
import torch.nn.functional as F
from conftest import serve

import transformer_lib as tl

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("TL_SITE_DIR", ROOT / "_build" / "html"))
REPORT = ROOT / "_build" / "live-js-report.json"
PAGE = "book/javascript.html"  # the appendix loads the module and no model
WEIGHTS = "../_static/live/{}.safetensors"  # relative to the page
EDITIONS = ["", "zh_CN/", "zh_TW/"]
MODELS = {"reversal": "transformer", "addition": "gpt"}
TOLERANCE = 1e-4  # logits, JavaScript against PyTorch, both float32


@pytest.fixture(scope="module")
def server():
    if not (SITE / PAGE).is_file():
        pytest.fail(f"no built site at {SITE}: run `make book` first")
    with serve(SITE) as url:
        yield url


def _open(browser, server, path: str):
    """The page at ``path`` with other hosts blocked; returns (page, problems), the
    problems being blocked or failed requests and console errors."""
    page = browser.new_page()
    page.set_default_timeout(60_000)
    problems: list[str] = []
    origin = urlsplit(server).netloc

    def route(r):
        if urlsplit(r.request.url).netloc == origin:
            r.continue_()
        else:
            problems.append(f"blocked {r.request.url}")
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    page.on(
        "response",
        lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"),
    )
    page.goto(f"{server}/{path}")
    page.wait_for_function("() => window.tlLive !== undefined")
    page.evaluate("() => window.tlLive.ready")
    return page, problems


@pytest.fixture(scope="module")
def page(browser, server):
    p, problems = _open(browser, server, PAGE)
    yield p
    assert not problems, problems
    p.close()


@pytest.fixture(scope="module")
def report():
    found: dict = {}
    yield found
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(found, indent=1))


# -- passing tensors to the page and back ---------------------------------------------
def _js(t: torch.Tensor) -> dict:
    return {"data": t.detach().float().flatten().tolist(), "shape": list(t.shape)}


def _params(module: torch.nn.Module) -> dict:
    return {k: _js(v) for k, v in module.state_dict().items()}


# in the page: F = the formulas, T(o) a tensor, M(o) a mask, P(o) nested parameters,
# out(t) back to {data, shape}
PRELUDE = """const F = window.tlLive.formulas;
const T = (o) => F.tensor(o.data, o.shape);
const M = (o) => ({ data: Uint8Array.from(o.data), shape: o.shape });
const P = (o) => F.nestParams(Object.fromEntries(Object.entries(o).map(([k, v]) => [k, T(v)])));
const out = (t) => ({ data: Array.from(t.data), shape: t.shape });"""


def run(page, body: str, **args):
    """Run the JavaScript ``body`` (which returns) with ``args`` bound by name."""
    names = ", ".join(args)
    return page.evaluate(f"({{{names}}}) => {{ {PRELUDE}\n{body} }}", args)


def _torch(o: dict) -> torch.Tensor:
    return torch.tensor(o["data"], dtype=torch.float32).reshape(o["shape"])


def close(got: dict, want: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-5):
    torch.testing.assert_close(_torch(got), want.float(), atol=atol, rtol=rtol)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- the formulas ---------------------------------------------------------------------
def test_softmax(page):
    x = torch.randn(3, 4, 7, generator=gen(0)) * 5
    x[0, 1] = float("-inf")  # a row with nothing allowed gives zeros
    x[1, 2, :3] = float("-inf")
    got = run(page, "return out(F.softmax(T(x)));", x=_js(x))  # -inf passes as is
    close(got, tl.softmax(x))
    assert _torch(got)[0, 1].abs().sum() == 0


@pytest.mark.parametrize("scale", [True, False])
def test_attention_scores(page, scale):
    q, k = (
        torch.randn(2, 5, 8, generator=gen(1)),
        torch.randn(2, 6, 8, generator=gen(2)),
    )
    got = run(
        page,
        "return out(F.attention_scores(T(q), T(k), scale));",
        q=_js(q),
        k=_js(k),
        scale=scale,
    )
    close(got, tl.attention_scores(q, k, scale=scale))


@pytest.mark.parametrize("T_q,T_k", [(5, 5), (1, 6), (4, 7), (3, 3)])
def test_causal_mask_and_attention(page, T_q, T_k):
    g = gen(T_q * 10 + T_k)
    q, k, v = (torch.randn(3, n, 8, generator=g) for n in (T_q, T_k, T_k))
    mask = tl.causal_mask(T_q, T_k)
    got = run(
        page,
        """const m = F.causal_mask(T_q, T_k);
        const [o, w] = F.scaled_dot_product_attention(T(q), T(k), T(v), m);
        return {mask: Array.from(m.data), out: out(o), weights: out(w)};""",
        q=_js(q),
        k=_js(k),
        v=_js(v),
        T_q=T_q,
        T_k=T_k,
    )
    assert got["mask"] == mask.flatten().int().tolist()
    want_out, want_w = tl.scaled_dot_product_attention(q, k, v, mask)
    close(got["out"], want_out)
    close(got["weights"], want_w)


def test_attention_with_a_fully_masked_row(page):
    q, k, v = (torch.randn(2, 4, 6, generator=gen(3)) for _ in range(3))
    mask = torch.rand(4, 4, generator=gen(4)) > 0.4
    mask[2] = False
    got = run(
        page,
        "const [o, w] = F.scaled_dot_product_attention(T(q), T(k), T(v), M(m));"
        "return [out(o), out(w)];",
        q=_js(q),
        k=_js(k),
        v=_js(v),
        m={"data": mask.flatten().int().tolist(), "shape": [4, 4]},
    )
    want_out, want_w = tl.scaled_dot_product_attention(q, k, v, mask)
    close(got[0], want_out)
    close(got[1], want_w)


def test_linear_and_embedding(page):
    x, lin = torch.randn(5, 12, generator=gen(5)), torch.nn.Linear(12, 7)
    E, ids = torch.randn(9, 4, generator=gen(6)), [3, 0, 8, 8, 1]
    got = run(
        page,
        "return [out(F.linear(T(x), T(w), T(b))), out(F.embedding(ids, T(E)))];",
        x=_js(x),
        w=_js(lin.weight),
        b=_js(lin.bias),
        E=_js(E),
        ids=ids,
    )
    close(got[0], lin(x))
    close(got[1], F.embedding(torch.tensor(ids), E), atol=0, rtol=0)


@pytest.mark.parametrize(
    "name,ref",
    [
        ("relu", F.relu),
        ("gelu", F.gelu),
        ("gelu_tanh", tl.gelu_tanh),
        ("silu", tl.silu),
    ],
)
def test_activations(page, name, ref):
    x = torch.linspace(-9, 9, 721)
    got = run(page, f"return out(F.{name}(T(x)));", x=_js(x))
    close(got, ref(x), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "activation,gated,bias",
    [("relu", False, True), ("gelu_tanh", False, True), ("silu", True, False)],
)
def test_feed_forward(page, activation, gated, bias):
    torch.manual_seed(7)
    ffn = tl.FeedForward(16, 40, activation, bias=bias, gated=gated).eval()
    x = torch.randn(6, 16, generator=gen(8))
    got = run(
        page,
        "return out(F.feed_forward(T(x), P(p), activation, gated));",
        x=_js(x),
        p=_params(ffn),
        activation=activation,
        gated=gated,
    )
    close(got, ffn(x))


def test_layer_norm_and_rms_norm(page):
    x = torch.randn(4, 5, 16, generator=gen(9)) * 3 + 1e2
    gamma, beta = torch.randn(16, generator=gen(10)), torch.randn(16, generator=gen(11))
    got = run(
        page,
        "return [out(F.layer_norm(T(x), T(g), T(b), 1e-5)),"
        " out(F.rms_norm(T(x), T(g), 1e-6))];",
        x=_js(x),
        g=_js(gamma),
        b=_js(beta),
    )
    close(got[0], tl.layer_norm(x, gamma, beta, 1e-5), atol=1e-4)
    close(got[1], tl.rms_norm(x, gamma, 1e-6))


@pytest.mark.parametrize("T,d", [(16, 64), (12, 7)])
def test_sinusoidal_positional_encoding(page, T, d):
    got = run(page, "return out(F.sinusoidal_positional_encoding(n, d));", n=T, d=d)
    close(got, tl.sinusoidal_positional_encoding(T, d), atol=1e-7, rtol=1e-7)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope(page, layout):
    x = torch.randn(3, 9, 8, generator=gen(12))
    positions = [0, 1, 2, 3, 5, 8, 13, 21, 34]
    got = run(
        page,
        "return [Array.from(F.rope_angles(pos, 8, 500)),"
        " out(F.apply_rope(T(x), pos, 500, layout))];",
        x=_js(x),
        pos=positions,
        layout=layout,
    )
    angles = tl.rope_angles(torch.tensor(positions), 8, 500)
    torch.testing.assert_close(
        torch.tensor(got[0], dtype=torch.float64), angles.flatten()
    )
    close(got[1], tl.apply_rope(x, torch.tensor(positions), 500, layout))


def test_heads(page):
    x = torch.randn(5, 12, generator=gen(13))
    k = torch.randn(2, 5, 6, generator=gen(14))
    got = run(
        page,
        "const s = F.split_heads(T(x), 3);"
        "return [out(s), out(F.merge_heads(s)), out(F.repeat_kv(T(k), 3))];",
        x=_js(x),
        k=_js(k),
    )
    split = tl.split_heads(x[None], 3)[0]
    close(got[0], split, atol=0, rtol=0)
    close(got[1], tl.merge_heads(split[None])[0], atol=0, rtol=0)
    close(got[2], tl.repeat_kv(k[None], 3)[0], atol=0, rtol=0)


@pytest.mark.parametrize("n_kv_heads,masked", [(4, False), (2, True), (1, True)])
def test_multi_head_attention(page, n_kv_heads, masked):
    torch.manual_seed(15)
    mha = tl.MultiHeadAttention(16, 4, n_kv_heads).eval()
    query, key = (
        torch.randn(5, 16, generator=gen(16)),
        torch.randn(7, 16, generator=gen(17)),
    )
    mask = tl.causal_mask(5, 7) if masked else None
    got = run(
        page,
        "const [o, w] = F.multi_head_attention(T(q), T(k), T(k), P(p),"
        " {n_heads: 4, n_kv_heads: h_kv}, {mask: masked ? F.causal_mask(5, 7) : null});"
        "return [out(o), out(w)];",
        q=_js(query),
        k=_js(key),
        p=_params(mha),
        h_kv=n_kv_heads,
        masked=masked,
    )
    want_out, want_w = mha(query[None], key[None], key[None], mask, need_weights=True)
    close(got[0], want_out[0])
    close(got[1], want_w[0])


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_and_decoder_layers(page, norm_first):
    torch.manual_seed(18)
    kw = dict(norm_first=norm_first, activation="gelu", n_kv_heads=2)
    enc = tl.EncoderLayer(16, 4, 32, **kw).eval()
    dec = tl.DecoderLayer(16, 4, 32, **kw).eval()
    x, y = torch.randn(6, 16, generator=gen(19)), torch.randn(4, 16, generator=gen(20))
    cfg = {
        "n_heads": 4,
        "n_kv_heads": 2,
        "norm_first": norm_first,
        "activation": "gelu",
    }
    got = run(
        page,
        "const m = F.encoder_layer(T(x), P(pe), cfg);"
        "return [out(m), out(F.decoder_layer(T(y), m, P(pd), cfg))];",
        x=_js(x),
        y=_js(y),
        pe=_params(enc),
        pd=_params(dec),
        cfg=cfg,
    )
    memory = enc(x[None])
    close(got[0], memory[0], atol=1e-5)
    close(got[1], dec(y[None], memory, tl.causal_mask(4))[0], atol=1e-5)


@pytest.mark.parametrize(
    "cfg",
    [
        tl.GPTConfig(vocab_size=5, d_model=16, n_heads=4, n_layers=1, d_ff=32, max_len=8),
        tl.GPTConfig.llama(
            vocab_size=5, d_model=16, n_heads=4, n_kv_heads=2, n_layers=1, d_ff=24,
            max_len=8,
        ),
    ],
    ids=["gpt2", "llama"],
)  # fmt: skip
def test_gpt_block(page, cfg):
    torch.manual_seed(21)
    block = tl.GPTBlock(cfg).eval()
    x = torch.randn(6, 16, generator=gen(22))
    got = run(
        page,
        "return out(F.gpt_block(T(x), P(p), cfg));",
        x=_js(x),
        p=_params(block),
        cfg={**cfg.__dict__},
    )
    close(got, block(x[None], torch.arange(6))[0][0], atol=1e-5)


# -- the two trained models -----------------------------------------------------------
def _random_inputs(kind: str, cfg, n: int, seed: int) -> list[list[list[int]]]:
    g, inputs = gen(seed), []
    for _ in range(n):
        if kind == "gpt":
            T = int(torch.randint(1, cfg.max_len + 1, (), generator=g))
            inputs.append(
                [torch.randint(0, cfg.vocab_size, (T,), generator=g).tolist()]
            )
        else:
            T_src = int(torch.randint(1, cfg.max_len + 1, (), generator=g))
            T_tgt = int(torch.randint(1, cfg.max_len + 1, (), generator=g))
            src = torch.randint(2, cfg.vocab_size, (T_src,), generator=g).tolist()
            tgt = torch.randint(2, cfg.vocab_size, (T_tgt,), generator=g).tolist()
            inputs.append([src, [cfg.bos_id, *tgt[:-1]]])
    return inputs


@pytest.mark.parametrize("name", MODELS)
def test_model_logits_match_pytorch(page, report, name):
    path = SITE / "_static" / "live" / f"{name}.safetensors"
    model = tl.load_exported(path)  # through safetensors.torch.load_model
    kind = MODELS[name]
    meta = tl.read_metadata(path)
    assert meta["kind"] == kind and meta["vocab"] is not None
    inputs = _random_inputs(kind, model.cfg, 25, seed=len(name))
    got = page.evaluate(
        """async ([name, inputs]) => {
            const m = await window.tlLive.open(name);
            const logits = [];
            for (const args of inputs) logits.push(await m.logits(...args));
            const t = await m.trace(...inputs[0]);
            return {kind: m.kind, config: m.config, vocab: m.vocab, url: m.weightsUrl,
                    logits, trace: t};
        }""",
        [name, inputs],
    )
    assert got["kind"] == kind and got["vocab"] == meta["vocab"]
    assert got["url"] == WEIGHTS.format(name)
    assert got["config"] == json.loads(json.dumps(model.cfg.__dict__))
    worst = 0.0
    with torch.no_grad():
        for args, logits in zip(inputs, got["logits"], strict=True):
            want = model(*(torch.tensor([a]) for a in args))[0]
            diff = (torch.tensor(logits) - want).abs().max().item()
            worst = max(worst, diff)
        assert worst <= TOLERANCE, (
            f"{name}: JS and PyTorch logits differ by {worst:.2e}"
        )
        # the trace's attention weights are PyTorch's need_weights maps
        _, maps = model(*(torch.tensor([a]) for a in inputs[0]), need_weights=True)
    t = got["trace"]
    if kind == "gpt":
        pairs = [(layer["self"], w) for layer, w in zip(t["layers"], maps, strict=True)]
    else:
        pairs = [
            (layer["self"], w)
            for layer, w in zip(t["encoder"], maps["encoder"], strict=True)
        ]
        pairs += [
            (la["self"], w)
            for la, w in zip(t["decoder"], maps["decoder_self"], strict=True)
        ]
        pairs += [
            (la["cross"], w) for la, w in zip(t["decoder"], maps["cross"], strict=True)
        ]
    assert len(pairs) == (1 if kind == "gpt" else 3) * model.cfg.n_layers
    for attn, w in pairs:
        torch.testing.assert_close(
            torch.tensor(attn["weights"]), w[0], atol=1e-5, rtol=0
        )
        scaled = torch.tensor(attn["scores"]) * attn["scale"]
        mask = torch.tensor(attn["mask"])
        torch.testing.assert_close(
            tl.softmax(scaled.masked_fill(~mask, float("-inf"))),
            torch.tensor(attn["weights"]),
            atol=1e-6,
            rtol=0,
        )
    torch.testing.assert_close(
        torch.tensor(t["logits"]), torch.tensor(got["logits"][0])
    )
    report[name] = {
        "max_abs_diff": worst,
        "inputs": len(inputs),
        "bytes": path.stat().st_size,
    }


@pytest.mark.parametrize("edition", EDITIONS[1:])
def test_every_edition_serves_the_same_models(browser, server, edition):
    page, problems = _open(browser, server, edition + PAGE)
    got = page.evaluate(
        """async () => {
            const out = {};
            for (const name of ["reversal", "addition"]) {
                const m = await window.tlLive.open(name);
                out[name] = [m.weightsUrl, await m.logits(...(m.kind === "gpt" ?
                    [[1, 2, 3, 10, 4, 5, 6, 11]] : [[2, 3, 4, 5], [1, 5, 4]]))];
            }
            return out;
        }"""
    )
    page.close()
    assert not problems, problems
    for name, (url, logits) in got.items():
        assert url == WEIGHTS.format(name)
        here, english = SITE / edition / "book" / url, SITE / "book" / url
        same = here.read_bytes() == english.read_bytes()
        assert same, f"{edition}{url} differs from the English edition's"
        assert len(logits) == (8 if name == "addition" else 3)


# -- a file dropped on the page -------------------------------------------------------
def _load(page, name: str, data: bytes) -> dict:
    """tlLive.load(name, the bytes): {ok, logits} or {code, detail}."""
    return page.evaluate(
        """async ([name, b64]) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            try {
                const m = await window.tlLive.load(name, bytes.buffer);
                const args = m.kind === "gpt" ? [[0, 1, 2, 3]] : [[2, 3, 4], [1, 4]];
                return {ok: true, kind: m.kind, logits: await m.logits(...args)};
            } catch (e) {
                return {ok: false, code: e.code, detail: e.detail};
            }
        }""",
        [name, base64.b64encode(data).decode()],
    )


def test_a_dropped_model_runs(page, tmp_path):
    torch.manual_seed(23)
    cfg = tl.GPTConfig.llama(
        vocab_size=7,
        d_model=16,
        n_heads=4,
        n_kv_heads=2,
        n_layers=2,
        d_ff=24,
        max_len=9,
    )
    model = tl.GPT(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(std=0.5)
    path = tl.export_model(model, tmp_path / "mine.safetensors")
    got = _load(page, "mine", path.read_bytes())
    assert got["ok"], got
    with torch.no_grad():
        want = model(torch.tensor([[0, 1, 2, 3]]))[0]
    assert (torch.tensor(got["logits"]) - want).abs().max().item() <= TOLERANCE


def _save(tmp_path, tensors: dict, metadata: dict | None) -> bytes:
    path = tmp_path / "f.safetensors"
    safetensors.torch.save_file(tensors, str(path), metadata=metadata)
    return path.read_bytes()


def test_a_dropped_file_that_does_not_fit_is_refused(page, tmp_path):
    model = tl.GPT(
        tl.GPTConfig(vocab_size=6, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=5)
    )
    good = tl.export_model(model, tmp_path / "g.safetensors")
    meta = safetensors.safe_open(str(good), "pt").metadata()
    state = safetensors.torch.load_file(str(good))
    config = json.loads(meta["config"])
    cases = {
        "not-safetensors": (b"\x00\x01not a safetensors file at all", None),
        "no-config": (_save(tmp_path, state, {"kind": "gpt"}), None),
        "bad-config": (
            _save(
                tmp_path,
                state,
                {**meta, "config": json.dumps({**config, "n_heads": 3})},
            ),
            "n_heads=3",
        ),
        "missing-tensor": (
            _save(
                tmp_path, {k: v for k, v in state.items() if k != "norm_f.bias"}, meta
            ),
            "norm_f.bias",
        ),
        "unexpected-tensor": (
            _save(tmp_path, {**state, "extra.weight": torch.zeros(2)}, meta),
            "extra.weight",
        ),
        "bad-shape": (
            _save(tmp_path, {**state, "norm_f.bias": torch.zeros(9)}, meta),
            "norm_f.bias",
        ),
    }
    for code, (data, named) in cases.items():
        got = _load(page, "refused", data)
        assert not got["ok"] and got["code"] == code, (code, got)
        assert named is None or named in got["detail"], (code, got)
    # a GPT dropped where the encoder-decoder of chapter 11 runs
    got = _load(page, "reversal", good.read_bytes())
    assert got["code"] == "bad-config" and "transformer" in got["detail"]


def test_a_page_names_its_models(page):
    """The models named by data-tl-live-models are loaded before ready resolves; a
    name that is no model stays absent, with its error."""
    got = page.evaluate(
        """async () => {
            const div = document.createElement("div");
            div.dataset.tlLiveModels = "reversal addition nosuch";
            document.body.append(div);
            // a second instance of the module, which reads the page again
            const mod = await import("../_static/tl-live.js?again");
            const models = await mod.tlLive.ready;
            div.remove();
            return {names: Object.keys(models).sort(), kinds: [models.reversal.kind,
                    models.addition.kind], error: mod.tlLive.errors.nosuch.code,
                    window_kept: window.tlLive !== mod.tlLive};
        }"""
    )
    assert got == {
        "names": ["addition", "reversal"],
        "kinds": ["transformer", "gpt"],
        "error": "bad-config",
        "window_kept": True,
    }
